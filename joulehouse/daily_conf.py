"""The day and the settings file a run of the daily DAG is for, from its `dag_run.conf`, checked.

Whoever may trigger the DAG (the UI's trigger form, the REST API) writes `dag_run.conf`. A malformed
value failed the run's first task in Python's words ("month must be in 1..12", "fromisoformat:
argument must be str", `KeyError: 'data_interval_start'` for a run triggered without a logical
date and without a day), naming neither the key nor what it takes, and each was retried twice
(2 and 4 minutes of backoff) though no retry mends it. RunConfError says both in one line, and
the DAG fails the run on it at once. Stdlib only: the DAG file calls it in every task.

The same folder rule picks the settings files joulehouse_publish publishes with: each export
event names the file its run exported with (publish_configs).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

DAY_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2}")
CONFIG_FOLDERS_ENV = "JOULEHOUSE_CONFIG_DIRS"


class RunConfError(ValueError):
    """A value of dag_run.conf (or its absence) that no run can use; the message names the key."""


def run_day(conf: Mapping, data_interval_start: dt.datetime | None) -> str:
    """The day to build, YYYY-MM-DD: `conf["day"]`, else the day the run's data interval starts."""
    raw = conf.get("day")
    if raw is None or raw == "":
        if data_interval_start is None:
            raise RunConfError("this run has no data interval (it was triggered without a logical date) and "
                               "dag_run.conf names no day: give dag_run.conf['day'] = 'YYYY-MM-DD' (UTC)")
        return data_interval_start.date().isoformat()
    # Only the one spelling: fromisoformat also takes 20260610 and 2026-W24-3, which then went on,
    # unnormalised, into the task summaries and the Asset events' {"day": ...}.
    if not isinstance(raw, str) or not DAY_FORMAT.fullmatch(raw):
        raise RunConfError(f"dag_run.conf['day']={raw!r}: must be a day, 'YYYY-MM-DD' (UTC)")
    try:
        return dt.date.fromisoformat(raw).isoformat()
    except ValueError as exc:
        raise RunConfError(f"dag_run.conf['day']={raw!r}: not a day of the calendar ({exc})") from None


def run_config(conf: Mapping, environ: Mapping[str, str]) -> str | None:
    """The settings file: `conf["config"]`, else the one JOULEHOUSE_CONFIG names, else None (the
    built-in defaults). A blank JOULEHOUSE_CONFIG names none, as for the CLI (cli.options)."""
    return config_named_by_conf(conf, environ) or _deployed_config(environ)


def config_named_by_conf(conf: Mapping, environ: Mapping[str, str]) -> str | None:
    """The settings file `conf["config"]` names, resolved, or None where it names none.

    It must lie in a folder the deployment allows (allowed_config_folders): the settings choose
    the warehouse file, the export folder, the signing key and where the signed config is
    published, and whoever may trigger a run could otherwise point them at any TOML file the
    worker can read."""
    raw = conf.get("config")
    if raw is None or raw == "":
        return None
    return _allowed_settings_file(raw, "dag_run.conf['config']", environ)


def publish_configs(event_extras: Iterable[Mapping | None], environ: Mapping[str, str]) -> list[str | None]:
    """The settings files a run of joulehouse_publish publishes the export of, one per distinct
    file (links resolved), in the order of the export events that triggered it.

    Each event's extra names the settings file its daily run exported with (`{"day": ...,
    "config": path}`): a run given another fleet's settings wrote into that fleet's `[export]
    out_dir`, to go to that fleet's `publish_url`. `config` null or absent (an event written
    before it was recorded), or no event at all (a run triggered by hand), is the file
    JOULEHOUSE_CONFIG names. A named file must lie in a folder run_config allows: every one is
    checked before any is read, and the first outside them is refused naming its event."""
    configs: dict[str | None, str | None] = {}
    for extra in event_extras:
        extra = extra or {}
        raw = extra.get("config")
        if raw is None:
            config = _deployed_config(environ)
        else:
            named_by = f"the recommended-config event of day {extra.get('day', 'unknown')}: extra['config']"
            config = _allowed_settings_file(raw, named_by, environ)
        configs.setdefault(_same_file_key(config), config)
    if not configs:
        deployed = _deployed_config(environ)
        configs[_same_file_key(deployed)] = deployed
    return list(configs.values())


def _deployed_config(environ: Mapping[str, str]) -> str | None:
    return environ.get("JOULEHOUSE_CONFIG", "").strip() or None


def _same_file_key(config: str | None) -> str | None:
    return str(Path(config).expanduser().resolve()) if config else None


def _allowed_settings_file(raw: object, named_by: str, environ: Mapping[str, str]) -> str:
    """`raw` resolved, where it is the path of a file in an allowed folder; else RunConfError
    naming `named_by`. The file itself is not read."""
    if not isinstance(raw, str) or not raw.strip():
        raise RunConfError(f"{named_by}={raw[:200] if isinstance(raw, str) else raw!r}: "
                           "must be the path of a settings file (TOML)")
    folders = allowed_config_folders(environ)
    path = Path(raw).expanduser().resolve()  # a link inside an allowed folder to a file outside is outside
    if not any(path.is_relative_to(folder) for folder in folders):
        allowed = ", ".join(map(str, folders)) or "none"
        raise RunConfError(f"{named_by}={raw[:200]!r}: not in a folder this deployment takes settings "
                           f"files from ({allowed}); list the folders in {CONFIG_FOLDERS_ENV} "
                           f"(separated by {os.pathsep!r})")
    return str(path)


def allowed_config_folders(environ: Mapping[str, str]) -> list[Path]:
    """The folders a run's `conf["config"]` may name a file in: those JOULEHOUSE_CONFIG_DIRS lists,
    else the folder of the file JOULEHOUSE_CONFIG names; none where neither is set."""
    listed = [p.strip() for p in environ.get(CONFIG_FOLDERS_ENV, "").split(os.pathsep) if p.strip()]
    if not listed and environ.get("JOULEHOUSE_CONFIG", "").strip():
        listed = [str(Path(environ["JOULEHOUSE_CONFIG"].strip()).expanduser().resolve().parent)]
    return [Path(p).expanduser().resolve() for p in listed]
