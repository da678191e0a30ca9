"""The day and the settings file a run of the daily DAG is for, from its `dag_run.conf`, checked.

Whoever may trigger the DAG (the UI's trigger form, the REST API) writes `dag_run.conf`. A malformed
value failed the run's first task in Python's words ("month must be in 1..12", "fromisoformat:
argument must be str", `KeyError: 'data_interval_start'` for a run triggered without a logical
date and without a day), naming neither the key nor what it takes, and each was retried twice
(2 and 4 minutes of backoff) though no retry mends it. RunConfError says both in one line, and
the DAG fails the run on it at once. Stdlib only: the DAG file calls it in every task.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Mapping
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
    built-in defaults). A blank JOULEHOUSE_CONFIG names none, as for the CLI (cli.options).

    `conf["config"]` must lie in a folder the deployment allows (allowed_config_folders): the
    settings choose the warehouse file, the export folder, the signing key and where the signed
    config is published, and whoever may trigger a run could otherwise point them at any TOML
    file the worker can read."""
    raw = conf.get("config")
    if raw is None or raw == "":
        return environ.get("JOULEHOUSE_CONFIG", "").strip() or None
    if not isinstance(raw, str) or not raw.strip():
        raise RunConfError(f"dag_run.conf['config']={raw[:200] if isinstance(raw, str) else raw!r}: "
                           "must be the path of a settings file (TOML)")
    folders = allowed_config_folders(environ)
    path = Path(raw).expanduser().resolve()  # a link inside an allowed folder to a file outside is outside
    if not any(path.is_relative_to(folder) for folder in folders):
        allowed = ", ".join(map(str, folders)) or "none"
        raise RunConfError(f"dag_run.conf['config']={raw[:200]!r}: not in a folder this deployment takes settings "
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
