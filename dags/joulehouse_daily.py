"""The daily joulehouse pipeline: lake -> warehouse -> checks -> models -> carbon/cost ->
recommendations -> signed export -> report.

This file holds the schedule and the wiring only. Each task is a few lines that call
`joulehouse.daily`, imported inside the task, so parsing this file imports nothing heavy. Every
task reads and writes one day and can be re-run with the same result.

- Schedule: daily at 01:00 UTC on data intervals (CronDataIntervalTimetable): the
  run whose interval starts at D 01:00 runs at D+1 01:00 and processes day D, an hour after the
  day is over so that its last collector files (rolled every 300 s, shipped every 15 min) are in
  the lake. ("@daily" is a trigger timetable in Airflow 3: its run at D 00:00 would have processed
  the day just begun.) A backfill rebuilds the days from --from-date up to the day before
  --to-date (a run's logical date is 01:00 of its day). `dag_run.conf["day"]` overrides the day
  (what `joulehouse run --date` passes); `dag_run.conf["config"]`, else JOULEHOUSE_CONFIG, names
  the settings file; a malformed value fails the run at once, saying which key and what it takes
  (joulehouse.daily_conf). Catchup only where JOULEHOUSE_START_DATE names the first day to build
  (dag_env.catchup): otherwise the scheduler starts from the latest day.
- Data checks: `check_data` is the blocking gate, SQL only (warehouse.gate); `validate_data` runs
  Great Expectations' suites (the warning rules) beside the models, off the critical path, and the
  report waits for it (`warnings_done`, all_done): a GX failure is a failed task, and the report
  still renders, saying the warnings were not checked.
- The per-host work on the lake is mapped (one task per host, in parallel; the site's facility
  meter, stored under host=<site>, is one of them): inspect the day's files, then compact each
  dataset's files into one (warehouse.compact_lake; each task touches only its own host's folders). Every step that writes the DuckDB file
  writes a copy and publishes it by rename under the warehouse's writer lock (warehouse.publish), so
  analysts can hold it open; max_active_runs=1 keeps one run at a time.
- No second DAG for the hourly side: nodes push their finished files with a systemd timer
  (joulehouse ship), which works while this host is down and needs no access into the nodes.
- Outlets: the warehouse day (once its data checks passed) and the signed export are Assets, so a
  downstream DAG (e.g. joulehouse_publish, which puts the export where node agents fetch it) runs
  on fresh data; each event's extra says which day (`{"day": "YYYY-MM-DD"}`), as a backfill
  updates older days; the export's also says which settings file wrote it (`"config"`: the file
  `dag_run.conf` named, resolved, or null for JOULEHOUSE_CONFIG's), which joulehouse_publish
  publishes with.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os

from airflow.sdk import Asset, CronDataIntervalTimetable, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from joulehouse.dags import dag_env

WAREHOUSE_DAY = Asset(name="joulehouse_warehouse_day", uri="joulehouse://warehouse/daily")
RECOMMENDED_CONFIG = Asset(name="joulehouse_recommended_config", uri="joulehouse://export/recommended-config")
log = logging.getLogger("joulehouse.dag")


def _say_what_failed(context) -> None:
    """Failure callback: one line naming the task, the day, the try and the error; also one JSON
    line in $JOULEHOUSE_FAILURE_LOG when set (`joulehouse run` reads it to say why in one line)."""
    ti = context.get("task_instance") or context.get("ti")
    conf = (context["dag_run"].conf or {}) if context.get("dag_run") else {}
    interval_start = context.get("data_interval_start")
    day = conf.get("day") or (interval_start.date().isoformat() if interval_start else context.get("ds"))
    task_id, attempt, error = getattr(ti, "task_id", "?"), getattr(ti, "try_number", "?"), context.get("exception")
    if isinstance(error, AirflowFailException) and error.__cause__ is not None:
        error = error.__cause__  # what failed (BlockingCheckFailed, NoReadingsForDay), not the no-retry wrapper
    map_index = getattr(ti, "map_index", None)
    if isinstance(map_index, int) and map_index >= 0:  # one instance per host: say which
        task_id = f"{task_id}[{map_index}]"
    dag_id = getattr(context.get("dag"), "dag_id", None) or getattr(ti, "dag_id", "joulehouse")
    log.error("%s: task %s failed for day %s (try %s): %s", dag_id, task_id, day, attempt, error)
    if os.environ.get("JOULEHOUSE_FAILURE_LOG"):
        with open(os.environ["JOULEHOUSE_FAILURE_LOG"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"task": task_id, "day": str(day), "try": str(attempt),
                                  "error": f"{type(error).__name__}: {error}" if error else None}) + "\n")


DEFAULT_ARGS = {
    "owner": "joulehouse",
    # `joulehouse run` sets 0: a one-off run should fail fast, not wait out retry delays.
    "retries": dag_env.retries(default=2),
    "retry_delay": dt.timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "on_failure_callback": _say_what_failed,
}


def _day_and_config() -> tuple[str, str | None]:
    from joulehouse.daily_conf import RunConfError, run_config, run_day

    context = get_current_context()
    conf = (context["dag_run"].conf or {}) if context.get("dag_run") else {}
    try:
        return run_day(conf, context.get("data_interval_start")), run_config(conf, os.environ)
    except RunConfError as exc:
        # a malformed dag_run.conf is the same on every try: fail the run now, saying which key
        raise AirflowFailException(str(exc)) from exc


@dag(
    dag_id="joulehouse_daily",
    schedule=CronDataIntervalTimetable("0 1 * * *", timezone="UTC"),
    start_date=dag_env.start_date(default=dt.date(2026, 1, 1)),
    catchup=dag_env.catchup(),
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["joulehouse", "energy"],
    doc_md=__doc__,
)
def joulehouse_daily():
    @task
    def list_lake_hosts() -> list[str]:
        from joulehouse import daily
        from joulehouse.warehouse.lake_partitions import NoReadingsForDay

        try:
            return daily.list_lake_hosts(*_day_and_config())
        except NoReadingsForDay as exc:
            # No readings will not appear in a retry's minutes: each empty day of a catch-up took
            # its two retries' backoff, 6 min a day, before the next (review, helper-93).
            raise AirflowFailException(str(exc)) from exc

    @task
    def inspect_and_compact_lake_partition(host: str) -> dict:
        from joulehouse import daily

        return daily.inspect_and_compact_lake_partition(*_day_and_config(), host)

    @task
    def build_warehouse() -> dict:
        from joulehouse import daily

        return daily.build_warehouse(*_day_and_config())

    @task(outlets=[WAREHOUSE_DAY])
    def check_data() -> dict:
        from joulehouse import daily
        from joulehouse.warehouse.gate import BlockingCheckFailed

        day, config = _day_and_config()
        try:
            result = daily.check_data(day, config)
        except BlockingCheckFailed as exc:
            # Bad data will not get better on retry: stop the day's run with the checks' message.
            raise AirflowFailException(str(exc)) from exc
        # The warehouse day is fresh once it passed its checks; the event says which day.
        get_current_context()["outlet_events"][WAREHOUSE_DAY].extra = {"day": day}
        return result

    @task
    def validate_data() -> dict:
        from joulehouse import daily

        return daily.validate_data(*_day_and_config())

    @task
    def fit_power_models() -> dict:
        from joulehouse import daily

        return daily.fit_power_models(*_day_and_config())

    @task
    def measure_efficiency_and_outcomes() -> dict:
        from joulehouse import daily

        return daily.measure_efficiency_and_outcomes(*_day_and_config())

    @task
    def account_carbon_and_cost() -> dict:
        from joulehouse import daily

        return daily.account_carbon_and_cost(*_day_and_config())

    @task
    def recommend_power_limits() -> dict:
        from joulehouse import daily

        return daily.recommend_power_limits(*_day_and_config())

    @task(outlets=[RECOMMENDED_CONFIG])
    def export_recommended_config() -> dict:
        from joulehouse import daily
        from joulehouse.daily_conf import config_named_by_conf

        day, config = _day_and_config()
        result = daily.export_recommended_config(day, config)
        context = get_current_context()
        # joulehouse_publish publishes with the settings file the export was written with: a run
        # given another fleet's (dag_run.conf["config"]) wrote into that fleet's out_dir, and
        # without it the publish copied JOULEHOUSE_CONFIG's. None: JOULEHOUSE_CONFIG's, as before.
        named = config_named_by_conf(context["dag_run"].conf or {}, os.environ)
        context["outlet_events"][RECOMMENDED_CONFIG].extra = {"day": day, "config": named}
        return result

    @task
    def render_report() -> dict:
        from joulehouse import daily

        return daily.render_report(*_day_and_config())

    @task(trigger_rule="all_done")
    def warnings_done() -> None:
        """Waits for the warning checks, whatever became of them: the report shows their results,
        or says they did not run. Straight after them, a Great Expectations failure (an import,
        a suite) left the day without a report while its signed export had shipped."""

    inspected = inspect_and_compact_lake_partition.expand(host=list_lake_hosts())
    chain = [build_warehouse(), check_data(), fit_power_models(), measure_efficiency_and_outcomes(),
             account_carbon_and_cost(), recommend_power_limits(), export_recommended_config(), render_report()]
    inspected >> chain[0]
    # The analytic steps run in sequence even though some are independent: each writes a copy of
    # the warehouse under its writer lock (warehouse.publish), and in sequence none waits for it.
    for upstream, downstream in zip(chain, chain[1:]):
        upstream >> downstream
    # Great Expectations' suites (warnings) are off the critical path: after the SQL gate, beside
    # the models, and before the report that shows their results (or says they failed).
    chain[1] >> validate_data() >> warnings_done() >> chain[-1]


joulehouse_daily()
