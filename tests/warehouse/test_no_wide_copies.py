"""The build's per-reading SQL never copies every reading into a temporary CTE result.

DuckDB materialises a CTE that has more than one reader (after it inlines the CTEs with one). Over
the day's wide readings that copy was the largest single cost of the build: in
int_gpu_samples_checked, `window_rows` (three readers) cost 3.6 -> 2.2 s per batch of 3.1 M
readings once marked NOT MATERIALIZED; in fct_gpu_energy_hourly, `intervals` (two readers once
`bridged`'s chain is inlined) 0.75 -> 0.55 s (warehouse/SCALING.md). The plans are read from
DuckDB itself (EXPLAIN of each relation's SQL with the day's bound parameters), so the test fails
when an edit makes DuckDB copy a per-reading CTE again, and names it."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from warehouse_lakes import DAY, NOW, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse import build
from joulehouse.warehouse.catalog import relations
from joulehouse.warehouse.lake_contract import narrowed

# The CTEs allowed a copy: small by construction. duplicate_keys: only keys seen twice; streams:
# one row per GPU; repeat_streams: one row per stream whose counter repeats; repeat_intervals: the
# narrow intervals of those streams only, copied rather than sorted twice; readings (node and PUE
# energy): BMC and meter readings, 1-60 s apart per server; stream_summary, minute_winners and
# hour_streams: one row per stream-minute, GPU-minute and stream-hour (the per-minute source choice);
# stream_flags: one row per stream that repeats or steps back; counter_dips: the dipped readings
# only; gpu_hours and node (the reconciliation): one row per GPU-hour and server-hour.
SMALL_CTES = {"int_gpu_samples_checked": {"duplicate_keys"}, "fct_gpu_coverage_daily": {"streams"},
              "fct_gpu_energy_hourly": {"stream_flags", "repeat_streams", "counter_dips", "repeat_intervals",
                                        "stream_summary", "minute_winners", "hour_streams"},
              "fct_node_energy_hourly": {"readings"}, "fct_pue_hourly": {"readings"},
              "fct_node_reconciliation_hourly": {"gpu_hours", "node"}}


def _materialised_ctes(con, settings: WarehouseSettings) -> dict[str, set[str]]:
    with tempfile.TemporaryDirectory() as scratch:
        inventory, _ = build.inventory_file(settings.inventory_path, Path(scratch))
        params = {**build.build_parameters(DAY, settings, NOW, inventory),
                  "hosts": [h for (h,) in con.execute("SELECT DISTINCT host FROM stg_gpu_samples").fetchall()]}
        with narrowed(con, build._day_files(con, DAY, Path(scratch))[0]):
            found = {}
            for rel in relations():
                if rel.kind == "view":
                    continue
                plan = "".join(row[1] for row in con.execute("EXPLAIN " + build._body(rel),
                                                             build._bound(rel, params)).fetchall())
                found[rel.name] = set(re.findall(r"CTE Name: (\w+)", plan))
    return found


def test_no_relation_of_the_build_copies_its_readings_into_a_cte(lake, warehouse):
    rows = gpu_rows(range(0, 3600, 5), 120.0, counter_mj=lambda t: int(t * 120_000))
    rows += gpu_rows(range(0, 3600, 5), 80.0, uuid="GPU-1", source="dcgm")
    write(lake, rows + [dict(rows[3])])  # a duplicate: the duplicate branch is planned too
    con = warehouse()
    found = _materialised_ctes(con, WarehouseSettings())
    assert found["int_gpu_samples_checked"] and "fct_gpu_energy_hourly" in found  # the plans were read
    copied = {name: ctes - SMALL_CTES.get(name, set()) for name, ctes in found.items()}
    assert not {name: ctes for name, ctes in copied.items() if ctes}, "CTEs copied in full (mark them NOT MATERIALIZED)"
