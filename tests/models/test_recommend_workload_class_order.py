"""A GPU's workload class does not depend on the order its job rows arrive in."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.recommend_inputs import gpu_workload_classes

DAY = dt.date(2026, 3, 2)


def _at(hours: float) -> dt.datetime:
    return dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc) + dt.timedelta(hours=hours)


@pytest.mark.parametrize("latency_first", [True, False])
def test_a_job_shipped_twice_under_two_classes_takes_the_stricter_whatever_the_row_order(latency_first):
    """One job (same id, GPU, start and end) shipped as background and again as latency-sensitive
    (relabelled): the first copy read won, so the service was capped for the background class's
    25% slowdown bound when the background copy came first."""
    copies = [("latency-sensitive",), ("background",)]
    con = duckdb.connect()
    con.execute("CREATE TABLE stg_jobs (job_id VARCHAR, host VARCHAR, gpu_uuid VARCHAR, started_at TIMESTAMPTZ, "
                "ended_at TIMESTAMPTZ, workload_class VARCHAR)")
    for (workload_class,) in (copies if latency_first else copies[::-1]):
        con.execute("INSERT INTO stg_jobs VALUES ('serve', 'n1', 'GPU-1', ?, ?, ?)", [_at(0), _at(5), workload_class])
    classes, _ = gpu_workload_classes(con, DAY)
    assert classes == {"GPU-1": "latency-sensitive"}
