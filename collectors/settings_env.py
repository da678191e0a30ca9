"""Which JOULEHOUSE_* environment variables a settings load accepts, and the one line refusing the rest.

pydantic-settings reads JOULEHOUSE_<SECTION>__<FIELD> and silently ignores every other name, so
JOULEHOUSE_COLLECTOR_INTERVAL_S=5 (one underscore) left the collector on its default interval
with nobody told. A load therefore refuses every JOULEHOUSE_* variable that names no setting,
except the few the project reads itself outside the settings (NOT_SETTINGS), suggesting the
spelling meant when the name is a near miss. A value refused is said in one line naming the
setting and where it came from: the variable, else the file (`describe_errors`).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from pydantic import ValidationError

ENV_PREFIX = "JOULEHOUSE_"
ENV_DELIMITER = "__"

# JOULEHOUSE_* variables that are not settings: the project reads them itself (os.environ), and
# they sit in the same environment as the settings when those are loaded (the Airflow worker's,
# a systemd EnvironmentFile, a test's), so a load lets them through by name. Each says who reads it.
NOT_SETTINGS: Mapping[str, str] = {
    "JOULEHOUSE_CONFIG": "the settings file the DAGs load (dags/joulehouse_daily.py, dags/joulehouse_publish.py)",
    "JOULEHOUSE_CONFIG_DIRS": "the folders a triggered DAG run's dag_run.conf['config'] may name a file in "
                              "(joulehouse/daily_conf.py; `joulehouse run` sets its --config's)",
    "JOULEHOUSE_START_DATE": "the daily DAG's start_date (dags/joulehouse_daily.py; `joulehouse run` sets it)",
    "JOULEHOUSE_DAG_RETRIES": "the DAGs' task retries (`joulehouse run` sets 0 for its Airflow child)",
    "JOULEHOUSE_FAILURE_LOG": "where a failed DAG task writes its one line for `joulehouse run` (cli/dagrun.py)",
    "JOULEHOUSE_RUN_PARENT_PID": "the Airflow child of `joulehouse run` stops when that pid dies (cli/run_lock.py)",
    "JOULEHOUSE_SHIP_TO": "the ship unit's --to, from /etc/joulehouse/ship.env (infra/systemd/joulehouse-ship.service)",
    "JOULEHOUSE_NVML_STUB_STATE": "the stub libnvidia-ml of the tests and bench/collector.py reads its state from it (tests/nvml_stub)",
}
# A suggestion must be this close (difflib's ratio) to be offered: a near miss, not a guess.
CLOSE_ENOUGH = 0.8


def unknown_variables(environ: Iterable[str], sections: Mapping[str, frozenset[str]],
                      foreign_sections: frozenset[str]) -> str | None:
    """One line naming every JOULEHOUSE_* variable of `environ` that is no setting of `sections`
    (section -> its field names), of a foreign section (any field: that side checks it) or of
    NOT_SETTINGS; None when all are. Matched case-insensitively, as pydantic-settings reads them."""
    settings = {f"{ENV_PREFIX}{s}{ENV_DELIMITER}{f}".upper() for s, fields in sections.items() for f in fields}
    known_sections = {s.upper() for s in (*sections, *foreign_sections)}
    problems = []
    for key in sorted(environ):
        name = key.upper()
        if not name.startswith(ENV_PREFIX) or name in settings or name in NOT_SETTINGS:
            continue
        section, _, field = name[len(ENV_PREFIX):].partition(ENV_DELIMITER)
        if section.lower() in foreign_sections and field and ENV_DELIMITER not in field:
            continue
        problems.append(_refusal(key, name, section, settings, {s.upper() for s in sections}, known_sections))
    return "; ".join(problems) or None


def _refusal(key: str, name: str, section: str, settings: set[str], own_sections: set[str],
             known_sections: set[str]) -> str:
    """The line for one variable: what is wrong with it and, for a near miss, the name meant."""
    if section in known_sections and name == f"{ENV_PREFIX}{section}":
        return f"{key} names a settings section, not a setting; set {key}{ENV_DELIMITER}<FIELD> for each field"
    meant = _meant(name, settings, own_sections, known_sections)
    if ENV_DELIMITER in name[len(ENV_PREFIX):] and section not in known_sections:
        # the words the loader has always used for this case (tests and runbooks quote them)
        what = f"{key}: unknown settings section {section.lower()!r}"
        if not meant:
            return f"{what}; expected one of {sorted(s.lower() for s in known_sections)}"
    else:
        what = f"{key} names no setting"
    if meant:
        return f"{what}; did you mean {meant}?"
    return what + ("" if ENV_DELIMITER in name else f" (settings are {ENV_PREFIX}<SECTION>{ENV_DELIMITER}<FIELD>)")


def _meant(name: str, settings: set[str], own_sections: set[str], known_sections: set[str]) -> str | None:
    """The setting (or NOT_SETTINGS variable) `name` was most likely meant to be, if any is close."""
    rest = name[len(ENV_PREFIX):]
    for section in sorted(known_sections, key=len, reverse=True):
        # one underscore where two belong: JOULEHOUSE_COLLECTOR_INTERVAL_S -> ..._COLLECTOR__INTERVAL_S
        if rest.startswith(section + "_") and not rest.startswith(section + ENV_DELIMITER):
            repaired = f"{ENV_PREFIX}{section}{ENV_DELIMITER}{rest[len(section) + 1:]}"
            if repaired in settings or section not in own_sections:
                return repaired  # a setting here, or a field of a section that another side checks
    # compared without the prefix they all share, which would make any two names look alike
    names = {candidate[len(ENV_PREFIX):]: candidate for candidate in settings | set(NOT_SETTINGS)}
    close = difflib.get_close_matches(rest, sorted(names), n=1, cutoff=CLOSE_ENOUGH)
    return names[close[0]] if close else None


def setting_source(loc: tuple, environ: Mapping[str, str], path: str | Path | None) -> str:
    """Which source gave the setting at `loc`: the environment variable, else the file."""
    if len(loc) >= 2:
        wanted = (ENV_PREFIX + ENV_DELIMITER.join(str(p) for p in loc[:2])).upper()
        for key in environ:
            if key.upper() == wanted:
                return f" (from {key})"
    return f" (in {path})" if path is not None else ""


def describe_errors(exc: ValidationError, environ: Mapping[str, str] | None = None, path: str | Path | None = None) -> str:
    """pydantic's errors as one line, each naming the setting ([section].field), the value and its source."""
    environ = environ or {}
    out = []
    for err in exc.errors():
        loc, msg = tuple(err["loc"]), err["msg"].removeprefix("Value error, ")
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            what = f"unknown settings section [{loc[0]}]" if len(loc) == 1 else f"[{loc[0]}]: unknown key {loc[-1]!r}"
            out.append(what + setting_source(loc, environ, path))
            continue
        if not loc:
            out.append(msg)
            continue
        name = f"[{loc[0]}]" + (f".{loc[1]}" if len(loc) > 1 else "") + "".join(f"[{p}]" for p in loc[2:])
        value = err.get("input")
        shown = "" if isinstance(value, Mapping) or value is None else f" = {value!r}"
        out.append(f"{name}{shown}{setting_source(loc, environ, path)}: {msg[:1].lower()}{msg[1:]}")
    return "; ".join(out)
