"""The few settings the DAG files read from the environment at parse time, checked.

A DAG file that fails at import is a DAG the scheduler no longer shows: its error must say which
variable is wrong and what it takes, in one line, not `invalid literal for int() with base 10`.
Stdlib only, so parsing the DAG files stays light.
"""

from __future__ import annotations

import datetime as dt
import os

MAX_RETRIES = 10


def retries(default: int) -> int:
    """JOULEHOUSE_DAG_RETRIES: a task's retries, a whole number from 0 to MAX_RETRIES."""
    raw = os.environ.get("JOULEHOUSE_DAG_RETRIES")
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_RETRIES:
        raise ValueError(f"JOULEHOUSE_DAG_RETRIES={raw!r}: must be a whole number from 0 to {MAX_RETRIES}")
    return value


def start_date(default: dt.date) -> dt.datetime:
    """JOULEHOUSE_START_DATE: the first day the DAG builds, YYYY-MM-DD (UTC midnight), or an ISO
    date and time (UTC when it names no offset)."""
    raw = os.environ.get("JOULEHOUSE_START_DATE")
    if raw is None or raw.strip() == "":
        return dt.datetime(default.year, default.month, default.day, tzinfo=dt.timezone.utc)
    try:
        start = dt.datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ValueError(f"JOULEHOUSE_START_DATE={raw!r}: must be a day, YYYY-MM-DD (UTC)") from None
    return start.replace(tzinfo=dt.timezone.utc) if start.tzinfo is None else start.astimezone(dt.timezone.utc)


def catchup() -> bool:
    """Whether the scheduler builds every day from the start date on: only where
    JOULEHOUSE_START_DATE names that day. Without it the start date is a fixed default long past,
    and catchup from it made a fresh deployment walk every day since (each of them empty, each a
    failed run) before it reached yesterday; without catchup the scheduler builds the latest day
    only, and older days are a backfill someone asked for."""
    raw = os.environ.get("JOULEHOUSE_START_DATE")
    return raw is not None and raw.strip() != ""
