"""The order of the days built, and what a person must do about it (day_warnings): the earlier
days a day's run leans on that the warehouse has not built, a day run before its predecessors (by
hand, out of order, or the first day of a warehouse over a lake with history).

The power fit reads `models.history_days` days ending on the day, the outcomes measure
yesterday's recommendations against the day, the demand charge is the month's peak so far. Built
first, the day's numbers leave those days out, and nothing said so (on a 4-GPU lake of three
days, day 3 built first fitted its A100 model on 8,064 readings instead of 24,188, and its
recommendations and costs differed); the day built later said only that day 3 must be restated.
"""

from __future__ import annotations

import datetime as dt

import duckdb


def earlier_days_not_built(con: duckdb.DuckDBPyConnection, lake: str, day: dt.date,
                           history_days: int) -> list[dt.date]:
    """The days before `day`, back to the fit's first day or the month's first (whichever is
    earlier, and yesterday at least), that the lake holds GPU readings for and the warehouse
    `con` has not built; ascending."""
    from joulehouse.warehouse.host_batches import BUILD_SQL
    from joulehouse.warehouse.lake_partitions import day_hosts
    from joulehouse.warehouse.sqlio import relation_exists

    first = min(day - dt.timedelta(days=max(history_days - 1, 1)), day.replace(day=1))
    built: set[dt.date] = set()
    if relation_exists(con, "fct_warehouse_build_daily", temporary=False):
        # the days built after the day before `first`: the window's, and later ones (left out below)
        since = first - dt.timedelta(days=1)
        built = {d for (d,) in BUILD_SQL.execute(con, "later_days_built", {"day": since}).fetchall()}
    window = (first + dt.timedelta(days=n) for n in range((day - first).days))
    return [d for d in window if d not in built and day_hosts(lake, d)]


def earlier_days_warning(day: dt.date | str, earlier: list[str], history_days: int | None) -> str:
    """What a person reads for `earlier` (the days `earlier_days_not_built` found, as text)."""
    window = f"a {history_days}-day window" if history_days else "its window"
    return (f"{day} was built before {len(earlier)} earlier day(s) the lake holds readings for ({earlier[0]} to "
            f"{earlier[-1]}), which this warehouse has not built: its power models ({window}), outcomes of the "
            "day before and the month's demand charge did not see them; build them first, in date order: "
            f"joulehouse run --date {earlier[0]} --through {day}")


def day_warnings(day: dt.date | str, summaries: dict[str, dict]) -> list[str]:
    """What a person must act on, from the day's task summaries ({task id: its returned dict}): the
    earlier days of the lake the day was built without (above), the later days a rebuild did not
    reach (the accounts' own note of it, in their summary and log, is the same act), and the built
    days whose lake files changed since (the gate's 'rebuild' rows). Said by the task's log and,
    after a `joulehouse run`, on the terminal: its Airflow child logs no warning, so a run of an
    earlier day had said nothing of them."""
    said = []
    built = summaries.get("build_warehouse") or {}
    if built.get("earlier_days_not_built"):
        said.append(earlier_days_warning(day, built["earlier_days_not_built"], built.get("history_days")))
    later = built.get("later_days_built") or []
    if later:
        said.append(f"{day} was built after {len(later)} later day(s) ({later[0]} to {later[-1]}): their power "
                    "models, recommendations, exports, demand charges and first-day baselines did not see it; "
                    f"restate them in date order: joulehouse run --date {later[0]} --through {later[-1]}")
    for stale in (summaries.get("check_data") or {}).get("days_to_rebuild") or []:
        said.append(f"lake files of {stale} came, went or changed since it was built (fct_check_results, severity "
                    f"'rebuild', says which): its facts stand for what its build read; to take them in: "
                    f"joulehouse run --date {stale}")
    return said
