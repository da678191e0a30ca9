"""dcgm_pods: holdings from labelled series, and rows that survive redone and continued ranges."""

from __future__ import annotations

import pyarrow.parquet as pq

from joulehouse.collectors.sources.dcgm import series_key
from joulehouse.collectors.sources.dcgm_pods import PodJobs, pod_holdings

T0 = 1_767_225_600.0
LABELS = {"Hostname": "node-01", "UUID": "GPU-a", "gpu": "0", "pod": "p1", "namespace": "ns", "container": "c"}


def series(labels: dict, times: list[float]):
    return (series_key(labels), labels, times)


def rows(lake):
    found = []
    for path in sorted((lake / "jobs").rglob("*.parquet")):
        found += pq.read_table(path).to_pylist()
    return sorted(found, key=lambda r: r["started_at"])


def test_a_gap_of_more_than_two_steps_splits_a_holding_and_free_gpus_hold_nothing():
    free = {k: v for k, v in LABELS.items() if k not in ("pod", "namespace", "container")}
    holdings = pod_holdings([series(LABELS, [T0, T0 + 1, T0 + 2, T0 + 10, T0 + 11]), series(free, [T0 + 20])], 1.0)
    assert [(h.first_s - T0, h.last_s - T0, h.job_id) for h in holdings] == [(0, 2, "ns/p1"), (10, 11, "ns/p1")]


def test_ranges_redone_or_continued_leave_one_row_per_holding(tmp_path):
    jobs = PodJobs(tmp_path / "lake", tmp_path / "state" / "pods.json")
    first = pod_holdings([series(LABELS, [T0 + s for s in range(0, 60)])], 1.0)
    jobs.merge(first, 1.0, T0 + 59)
    jobs.merge(first, 1.0, T0 + 59)  # the same range redone after a crash
    [row] = rows(tmp_path / "lake")
    assert (row["started_at"].timestamp(), row["ended_at"].timestamp()) == (T0, T0 + 60)
    jobs.merge(pod_holdings([series(LABELS, [T0 + s for s in range(60, 120)])], 1.0), 1.0, T0 + 119)
    [row] = rows(tmp_path / "lake")
    assert (row["started_at"].timestamp(), row["ended_at"].timestamp()) == (T0, T0 + 120)
    assert (row["team"], row["job_id"], row["container"]) == ("ns", "ns/p1", "c")
    # Back after a long absence: a second holding, not a stretch of the first over the gap.
    jobs.merge(pod_holdings([series(LABELS, [T0 + 500, T0 + 501])], 1.0), 1.0, T0 + 501)
    assert [(r["started_at"].timestamp() - T0, r["ended_at"].timestamp() - T0) for r in rows(tmp_path / "lake")] == [
        (0, 120), (500, 502)]
