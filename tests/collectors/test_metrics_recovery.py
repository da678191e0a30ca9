"""A collector killed with rows in its spool, then started again: its metrics account for what
the lake gained. Before, `joulehouse_collector_readings_written_total` counted rows read into
the spool (240 from a process killed before any reached the lake) and the restarted process said
nothing of the 240 rows it recovered into the lake (40 said, 280 gained)."""

from __future__ import annotations

import threading

import pyarrow.dataset as ds
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from joulehouse.collectors.collect import Collector
from joulehouse.collectors.metrics import CollectorStatsMetrics
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.sim import SimSource

SIM = (("dataset", "gpu_samples"), ("source", "sim"))


def scrape(collector: Collector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry()
    registry.register(CollectorStatsMetrics(collector))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode()) for s in family.samples}


def lake_rows(lake) -> int:
    return ds.dataset(lake / "gpu_samples", format="parquet").count_rows() if (lake / "gpu_samples").exists() else 0


def test_a_restart_that_recovers_a_spool_segment_accounts_for_every_row_the_lake_gained(tmp_path):
    lake, spool = tmp_path / "lake", tmp_path / "spool"
    now = [1_767_225_600.0]
    settings = CollectorSettings(interval_s=1.0, spool_flush_interval_s=1.0, roll_interval_s=1000.0)
    killed = Collector([SimSource("node-01", gpus=4, clock=lambda: now[0])], lake=lake, settings=settings,
                       spool_dir=spool, clock=lambda: now[0])
    for _ in range(6):  # flushed into a spool segment every poll, never rolled: then kill -9
        killed.poll()
        now[0] += 1.0
    before_kill = scrape(killed)
    assert lake_rows(lake) == 0
    assert before_kill[("joulehouse_collector_readings_spooled_total", SIM)] == 24
    assert before_kill[("joulehouse_collector_spool_rows_recovered_total", ())] == 0

    restarted = Collector([SimSource("node-01", gpus=4, clock=lambda: now[0])], lake=lake, settings=settings,
                          spool_dir=spool, clock=lambda: now[0])
    restarted.run(threading.Event(), max_polls=3)
    after = scrape(restarted)
    assert after[("joulehouse_collector_spool_rows_recovered_total", ())] == 24
    assert after[("joulehouse_collector_readings_spooled_total", SIM)] == 12
    # Stopped cleanly: nothing waits in the spool, so its own and the recovered rows are all the lake gained.
    assert after[("joulehouse_collector_spool_backlog_rows", ())] == 0
    assert lake_rows(lake) == (after[("joulehouse_collector_spool_rows_recovered_total", ())]
                               + after[("joulehouse_collector_readings_spooled_total", SIM)])
    # No series keeps the old name, which read as rows written into the lake.
    assert not [name for name, _ in after if name.startswith("joulehouse_collector_readings_written")]
