"""The daily joulehouse pipeline: lake -> warehouse -> checks -> models -> carbon/cost ->
recommendations -> report -> signed export.

This file holds the schedule and the wiring only. Each task is a few lines that call
`reports.daily`, imported inside the task so that parsing this file imports nothing heavy.
Every task reads and writes one day and can be re-run with the same result.

The day processed is `dag_run.conf["day"]` when given (what `joulehouse run --date` passes),
else the start of the run's data interval. The settings file is `dag_run.conf["config"]`, else
the JOULEHOUSE_CONFIG environment variable, else the built-in defaults.
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.sdk.exceptions import AirflowFailException
from airflow.sdk import dag, get_current_context, task

DEFAULT_ARGS = {
    "owner": "joulehouse",
    # `joulehouse run` sets 0: a one-off run should fail fast, not wait out retry delays.
    "retries": int(os.environ.get("JOULEHOUSE_DAG_RETRIES", "2")),
    "retry_delay": dt.timedelta(minutes=2),
    "retry_exponential_backoff": True,
}


def _day_and_config() -> tuple[str, str | None]:
    context = get_current_context()
    conf = (context["dag_run"].conf or {}) if context.get("dag_run") else {}
    day = conf.get("day") or context["data_interval_start"].date().isoformat()
    return day, conf.get("config") or os.environ.get("JOULEHOUSE_CONFIG")


@dag(
    dag_id="joulehouse_daily",
    schedule="@daily",
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["joulehouse", "energy"],
    doc_md=__doc__,
)
def joulehouse_daily():
    @task
    def build_warehouse() -> dict:
        from reports import daily

        return daily.build_warehouse(*_day_and_config())

    @task
    def check_data() -> dict:
        from reports import daily
        from warehouse.checks import BlockingCheckFailed

        try:
            return daily.check_data(*_day_and_config())
        except BlockingCheckFailed as exc:
            # Bad data will not get better on retry: stop the day's run with the checks' message.
            raise AirflowFailException(str(exc)) from exc

    @task
    def fit_power_models() -> dict:
        from reports import daily

        return daily.fit_power_models(*_day_and_config())

    @task
    def measure_efficiency_and_outcomes() -> dict:
        from reports import daily

        return daily.measure_efficiency_and_outcomes(*_day_and_config())

    @task
    def account_carbon_and_cost() -> dict:
        from reports import daily

        return daily.account_carbon_and_cost(*_day_and_config())

    @task
    def recommend_power_limits() -> dict:
        from reports import daily

        return daily.recommend_power_limits(*_day_and_config())

    @task
    def render_report() -> dict:
        from reports import daily

        return daily.render_report(*_day_and_config())

    @task
    def export_recommended_config() -> dict:
        from reports import daily

        return daily.export_recommended_config(*_day_and_config())

    built = build_warehouse()
    checked = check_data()
    fitted = fit_power_models()
    measured = measure_efficiency_and_outcomes()
    accounted = account_carbon_and_cost()
    recommended = recommend_power_limits()
    reported = render_report()
    exported = export_recommended_config()
    # One DuckDB writer at a time: the warehouse file takes a single writing process, so the
    # analytic steps run in sequence even though they are independent.
    built >> checked >> fitted >> measured >> accounted >> recommended >> exported >> reported


joulehouse_daily()
