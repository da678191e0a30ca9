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
import re
from collections.abc import Mapping

DAY_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2}")


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
    raw = conf.get("config")
    if raw is None or raw == "":
        return environ.get("JOULEHOUSE_CONFIG", "").strip() or None
    if not isinstance(raw, str) or not raw.strip():
        raise RunConfError(f"dag_run.conf['config']={raw!r}: must be the path of a settings file (TOML)")
    return raw
