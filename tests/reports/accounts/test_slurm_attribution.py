"""Per-team energy on a real fleet's data: a lake with GPU readings only, Slurm accounting
imported with `ingest slurm`, the warehouse built, the carbon accounts run. Each account's
energy must be the energy its GPUs drew in the hours its jobs held them."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from joulehouse.collectors.ingest.slurm import ingest_slurm
from joulehouse.collectors.writer import write_dataset
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.settings import CarbonSettings, WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
DAY = dt.date(2026, 11, 30)
MIDNIGHT = dt.datetime(2026, 11, 30, tzinfo=UTC)
STEP_S = 60
HOSTS = {"node-01": 4, "node-02": 4}


def power_w(host: str, index: int) -> float:
    """Each GPU its own constant draw, so an account's energy says which GPUs it got."""
    return 100.0 + 40.0 * index + (25.0 if host == "node-02" else 0.0)


def uuid(host: str, index: int) -> str:
    return f"GPU-{host}-{index}"


@pytest.fixture()
def lake(tmp_path):
    lake = tmp_path / "lake"
    rows = []
    for host, n in HOSTS.items():
        for i in range(n):
            for k in range(-1, 24 * 3600 // STEP_S + 2):
                t = MIDNIGHT + dt.timedelta(seconds=k * STEP_S)
                rows.append({"sampled_at": t, "host": host, "gpu_index": i, "gpu_uuid": uuid(host, i),
                             "gpu_model": "NVIDIA H100 80GB HBM3", "power_w": power_w(host, i),
                             "energy_mj_total": round(power_w(host, i) * 1000 * (k + 10) * STEP_S), "source": "nvml"})
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    return lake


SACCT = """JobID|JobName|User|Account|Partition|State|Start|End|NodeList|AllocTRES
500|pretrain|ana|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T05:00:00|node-[01-02]|billing=8,cpu=64,gres/gpu=8,node=2
501|finetune|ben|nlp|gpu|COMPLETED|2026-11-30T06:00:00|2026-11-30T12:30:00|node-02|cpu=8,gres/gpu=2,node=1
502|eval|cy|nlp|gpu|TIMEOUT|2026-11-30T07:15:00|2026-11-30T09:15:00|node-02|cpu=4,gres/gpu=1,node=1
503|sweep|dan|search|gpu|CANCELLED by 1000|2026-11-30T13:00:00|2026-11-30T14:00:00|node-01|cpu=4,gres/gpu:h100=3,node=1
"""


def test_each_accounts_energy_is_its_gpus_hours_at_their_power(lake, tmp_path):
    export = tmp_path / "sacct.txt"
    export.write_text(SACCT)
    imported, _ = ingest_slurm(export, lake=lake, now=MIDNIGHT + dt.timedelta(days=1))
    assert imported.rejected == [] and imported.table.num_rows == 8 + 2 + 1 + 3
    # The expectation from the imported rows (which GPU, how long) and each GPU's draw.
    by_uuid = {uuid(h, i): power_w(h, i) for h, n in HOSTS.items() for i in range(n)}
    expected_kwh: dict[str, float] = {}
    expected_gpu_hours: dict[str, float] = {}
    for row in imported.table.to_pylist():
        hours = (row["ended_at"] - row["started_at"]).total_seconds() / 3600
        expected_kwh[row["team"]] = expected_kwh.get(row["team"], 0.0) + by_uuid[row["gpu_uuid"]] * hours / 1000
        expected_gpu_hours[row["team"]] = expected_gpu_hours.get(row["team"], 0.0) + hours
    con = connect(tmp_path / "warehouse.duckdb", lake)
    try:
        build_day(con, DAY, WarehouseSettings(), now=MIDNIGHT + dt.timedelta(days=2))
        summary = carbon_day(con, DAY, CarbonSettings(), None)
        accounts = dict(con.execute(
            "SELECT team, sum(energy_kwh) FROM rpt_carbon_daily WHERE day = ? GROUP BY team", [DAY]).fetchall())
        gpu_hours = dict(con.execute(
            "SELECT team, sum(gpu_hours) FROM rpt_carbon_daily WHERE day = ? GROUP BY team", [DAY]).fetchall())
    finally:
        con.close()
    assert set(accounts) == {"vision", "nlp", "search", "unallocated"}
    for team, kwh in expected_kwh.items():
        assert accounts[team] == pytest.approx(kwh, rel=1e-6), team
        assert gpu_hours[team] == pytest.approx(expected_gpu_hours[team], rel=1e-9), team
    # By hand: vision held all 8 GPUs (1380 W) 4 h; nlp GPUs 0-1 of node-02 (290 W) 6.5 h and,
    # beside them, GPU 2 (205 W) 2 h; search GPUs 0-2 of node-01 (420 W) 1 h.
    assert expected_kwh == pytest.approx({"vision": 5.52, "nlp": 1.885 + 0.41, "search": 0.42})
    fleet_kwh = sum(power_w(h, i) for h, n in HOSTS.items() for i in range(n)) * 24 / 1000
    assert sum(accounts.values()) == pytest.approx(fleet_kwh, rel=1e-6)  # nothing counted twice, nothing lost
    assert summary.unallocated_energy_kwh == pytest.approx(fleet_kwh - sum(expected_kwh.values()), rel=1e-6)


def test_a_row_extended_after_it_was_copied_counts_once_and_a_second_holding_counts_too():
    """A pod's row rewritten longer after the short copy was compacted or shipped: the longer one
    counts, once. The same job back on the GPU later that day (a StatefulSet pod recreated under
    its name, a requeued job) counts as well."""
    from accounting_world import DAY as WORLD_DAY, at, build_world

    con = build_world()
    insert = ("INSERT INTO raw_jobs VALUES (?, 'node-01', 'GPU-h100', ?, ?, NULL, 'search', NULL, 'throughput', "
              "false, NULL, NULL, NULL, NULL)")
    con.execute(insert, ["prep-1", at(3), at(4)])  # the stale, shorter copy of prep-1 (3 h to 6 h)
    con.execute(insert, ["serve-1", at(10), at(12)])  # serve-1 again, after it ended at 3 h
    carbon_day(con, WORLD_DAY, CarbonSettings(), None)
    hours = dict(con.execute("SELECT job_id, sum(gpu_hours) FROM rpt_carbon_daily GROUP BY job_id").fetchall())
    assert hours["prep-1"] == pytest.approx(3.0)
    assert hours["serve-1"] == pytest.approx(3.0 + 2.0)
