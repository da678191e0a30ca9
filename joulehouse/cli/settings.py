"""`joulehouse settings [--config FILE]`: every setting with its value, its range and what it means.

Prints the settings a command would run with (the file, then JOULEHOUSE_<SECTION>__<FIELD>
overrides; without --config, the defaults and the overrides) as TOML, each section under its
docstring and each key under its description and range (the Field declarations of each layer's
settings module): a commented starting file for a site
(`joulehouse settings > /etc/joulehouse/joulehouse.toml`). infra/joulehouse.example.toml is this
command's output for the defaults. A password that is set is printed as asterisks. Settings that
are wrong, and input files they name that are not there, are refused in one line (exit 2).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Optional

import annotated_types
import typer
from pydantic.fields import FieldInfo

from joulehouse.cli.options import CONFIG_DEFAULT, config_origin, settings_file
from joulehouse.collectors.settings import SettingsError, SettingsRoot, absolute_locations, toml_value

HEADER = """\
# joulehouse settings: every field, with its default and what it means.
# Written by `joulehouse settings`; edit what your site needs and drop the rest.
# Any field can also be set from the environment: JOULEHOUSE_<SECTION>__<FIELD>=value.
# A relative path in a settings file is the file's folder's; from the environment, the working directory's.
"""
_BOUNDS = ((annotated_types.Gt, "gt", ">"), (annotated_types.Ge, "ge", ">="), (annotated_types.Lt, "lt", "<"),
           (annotated_types.Le, "le", "<="))


def field_range(info: FieldInfo) -> str | None:
    """The values a field accepts, in words ("range: > 0", "range: >= 0 and <= 1", "one of: duckdb, spark")."""
    if typing.get_origin(info.annotation) is typing.Literal:
        return "one of: " + ", ".join(str(v) for v in typing.get_args(info.annotation))
    bounds = [f"{sign} {getattr(m, attr)}" for kind, attr, sign in _BOUNDS for m in info.metadata if isinstance(m, kind)]
    steps = [f"a multiple of {m.multiple_of:g}" for m in info.metadata if isinstance(m, annotated_types.MultipleOf)]
    return "range: " + " and ".join(bounds + steps) if bounds else None


def field_notes(cls: type) -> dict[str, list[str]]:
    """The comment lines of each field of a settings section: its description, then its range."""
    notes = {}
    for name, info in cls.__pydantic_fields__.items():
        lines = (info.description or "").splitlines()
        if (accepted := field_range(info)) is not None:
            lines.append(accepted)
        notes[name] = lines
    return notes


def commented_toml(settings: SettingsRoot, paths_from: Path | None = None) -> str:
    """`settings` as TOML, each section under its class's docstring and each key under its notes;
    with `paths_from`, every relative path made that folder's (what the printout must say to mean,
    once saved as a file elsewhere, the paths these settings were read with)."""
    lines = [HEADER]
    for name in type(settings).model_fields:
        values = getattr(settings, name)
        doc = (inspect.getdoc(type(values)) or "").splitlines()
        lines += [f"# {doc[0]}" if doc else "", f"[{name}]"]
        notes = field_notes(type(values))
        shown = absolute_locations(values, paths_from) if paths_from is not None else {}
        for f in dataclasses.fields(values):
            value = shown.get(f.name, getattr(values, f.name))
            lines += [f"# {c}" for c in notes.get(f.name, [])]
            lines.append(f"{f.name} = {toml_value('********' if f.name.endswith('password') and value else value)}")
        lines.append("")
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1])) + "\n"


def settings_command(
    config: Optional[str] = typer.Option(None, "--config", help=f"Settings file (TOML); {CONFIG_DEFAULT}."),
) -> None:
    """Print every setting with its value and what it means (a commented TOML file).

    Example: joulehouse settings --config /etc/joulehouse/joulehouse.toml
    """
    # Imported here: every other command starts without the analytics' settings modules.
    from joulehouse.settings import input_file_problems, load_settings

    given = config
    try:
        config = settings_file(config)
        settings = load_settings(config)
    except SettingsError as exc:
        typer.echo(f"error: {exc}{config_origin(given)}", err=True)
        raise typer.Exit(2) from None
    if (missing := input_file_problems(settings, config)) is not None:
        typer.echo(f"error: {missing}", err=True)  # the check `joulehouse run` makes before its work
        raise typer.Exit(2)
    # with a file, its defaults and environment paths are the working directory's: printed absolute
    typer.echo(commented_toml(settings, Path.cwd() if config else None), nl=False)


def register(app: typer.Typer) -> None:
    app.command("settings")(settings_command)
