"""`joulehouse settings [--config FILE]`: every setting with its value and what it means.

Prints the settings a command would run with (the file, then JOULEHOUSE_<SECTION>__<FIELD>
overrides; without --config, the defaults and the overrides) as TOML, each key under the comment the code gives it
in collectors/settings.py: a commented starting file for a site
(`joulehouse settings > /etc/joulehouse/joulehouse.toml`). infra/joulehouse.example.toml is this
command's output for the defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Optional

import typer

from joulehouse.collectors.settings import Settings, SettingsError, load_settings, toml_value

HEADER = """\
# joulehouse settings: every field, with its default and what it means.
# Written by `joulehouse settings`; edit what your site needs and drop the rest.
# Any field can also be set from the environment: JOULEHOUSE_<SECTION>__<FIELD>=value.
"""
_FIELD = re.compile(r"^(\w+)\s*:[^=]*(?:=\s*(.*?))?$")


def field_comments(cls: type) -> dict[str, list[str]]:
    """The comment lines written above (or beside) each field of a settings dataclass."""
    comments: dict[str, list[str]] = {}
    pending: list[str] = []
    for raw in inspect.getsource(cls).splitlines()[1:]:
        text = raw.strip()
        if text.startswith("#"):
            pending.append(text.lstrip("#").strip())
            continue
        code, _, inline = text.partition("  # ")
        match = _FIELD.match(code)
        if match and not code.startswith(("def ", "class ", "@", '"""')):
            comments[match.group(1)] = pending + ([inline.strip()] if inline else [])
        pending = []
    return comments


def commented_toml(settings: Settings) -> str:
    """`settings` as TOML, each section under its class's docstring and each key under its comment."""
    lines = [HEADER]
    for section in dataclasses.fields(settings):
        values = getattr(settings, section.name)
        doc = (inspect.getdoc(type(values)) or "").splitlines()
        lines += [f"# {doc[0]}" if doc else "", f"[{section.name}]"]
        comments = field_comments(type(values))
        for f in dataclasses.fields(values):
            lines += [f"# {c}" for c in comments.get(f.name, [])]
            lines.append(f"{f.name} = {toml_value(getattr(values, f.name))}")
        lines.append("")
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1])) + "\n"


def settings_command(
    config: Optional[str] = typer.Option(None, "--config", help="Settings file (TOML); default: none, the built-in defaults."),
) -> None:
    """Print every setting with its value and what it means (a commented TOML file)."""
    try:
        settings = load_settings(config)
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(commented_toml(settings), nl=False)


def register(app: typer.Typer) -> None:
    app.command("settings")(settings_command)
