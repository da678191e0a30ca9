"""Publish the signed recommended-config file where node agents fetch it.

Runs whenever joulehouse_daily updates the RECOMMENDED_CONFIG asset. Each event that triggered
the run names the settings file its export was written with (extra "config"; null or absent:
JOULEHOUSE_CONFIG's), and each distinct file's export goes to that file's `[export] publish_url`
(a folder or any fsspec URL such as s3://bucket/config/); empty means the export folder itself is
served (e.g. by a web server) and nothing is copied. A named file outside the folders a daily run
may take settings from (JOULEHOUSE_CONFIG_DIRS, else JOULEHOUSE_CONFIG's folder) fails the run,
naming it, before any file is read or published (joulehouse.daily_conf.publish_configs).
Agents poll it with `joulehouse agent run --export-url URL`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os

from airflow.sdk import Asset, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

from joulehouse.dags import dag_env

RECOMMENDED_CONFIG = Asset(name="joulehouse_recommended_config", uri="joulehouse://export/recommended-config")
log = logging.getLogger("joulehouse.dag")


def _say_what_failed(context) -> None:
    """Failure callback: the task, the try and the error, in one line."""
    ti = context.get("task_instance") or context.get("ti")
    log.error("joulehouse_publish: task %s failed (try %s): %s; node agents keep the config they have",
              getattr(ti, "task_id", "?"), getattr(ti, "try_number", "?"), context.get("exception"))


@dag(
    dag_id="joulehouse_publish",
    schedule=[RECOMMENDED_CONFIG],
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
    catchup=False,
    default_args={"owner": "joulehouse", "retries": dag_env.retries(default=3),
                  "retry_delay": dt.timedelta(minutes=1), "retry_exponential_backoff": True,
                  "on_failure_callback": _say_what_failed},
    tags=["joulehouse", "export"],
    doc_md=__doc__,
)
def joulehouse_publish():
    @task
    def publish_recommended_config() -> list[dict]:
        from joulehouse import daily
        from joulehouse.daily_conf import RunConfError, publish_configs

        events = get_current_context()["triggering_asset_events"].get(RECOMMENDED_CONFIG, [])
        try:
            configs = publish_configs([event.extra for event in events], os.environ)
        except RunConfError as exc:
            # a settings file outside the allowed folders is refused on every try: fail now, unread
            raise AirflowFailException(str(exc)) from exc
        return [daily.publish_recommended_config(config) for config in configs]

    publish_recommended_config()


joulehouse_publish()
