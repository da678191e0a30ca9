"""A lake file that arrives after its day was built: the gate judges the day on what the build
read, and a separate 'rebuild' result says which day's files changed since and that a re-run of
that day takes them in."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warehouse_lakes import DAY, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.gate import BlockingCheckFailed, run_gate

LOST = "expect_column_pair_values_to_be_equal(raw_rows,clean_plus_quarantined_rows)"
NEXT_DAY = DAY + dt.timedelta(days=1)


def _rebuild_results(con) -> dict[dt.date, tuple[bool, str]]:
    rows = con.execute("SELECT day, success, observed_value FROM fct_check_results WHERE severity = 'rebuild'").fetchall()
    return {day: (success, said) for day, success, said in rows}


def test_a_node_that_ships_between_build_and_gate_does_not_fail_a_good_day(lake, warehouse):
    """node-02 shipped its day after the build listed the lake: the gate counted 1,200 raw rows
    against the 600 the build had read, and stopped a day whose facts were whole for what it read."""
    write(lake, gpu_rows(range(0, 600), 100.0))
    con = warehouse()
    write(lake, gpu_rows(range(0, 600), 100.0, uuid="GPU-late", host="node-02"))
    gate = run_gate(con, DAY, WarehouseSettings())
    assert not gate.failed_blocking
    lost = next(r for r in gate.results if r.expectation == LOST)
    assert lost.observed_value.startswith("600 raw rows")
    ok, said = _rebuild_results(con)[DAY]
    assert not ok
    assert (f"gpu_samples date={DAY}: 600 readings when built, 1,200 now; hosts when built: node-01; now: node-01, "
            "node-02 (1 file when built, 2 files now)") in said
    assert f"joulehouse run --date {DAY}" in said


def test_readings_the_build_read_and_lost_still_stop_the_day(lake, warehouse):
    """Counted from the build's own record, a build that lost readings is still caught."""
    from warehouse_lakes import MIDNIGHT, readings_as_table

    write(lake, gpu_rows(range(0, 600), 100.0))
    con = warehouse()
    readings_as_table(con)
    con.execute("DELETE FROM stg_gpu_samples WHERE sampled_at < ?", [MIDNIGHT + dt.timedelta(seconds=10)])
    with pytest.raises(BlockingCheckFailed, match="600 raw rows read by the build"):
        run_gate(con, DAY, WarehouseSettings())


def test_an_unchanged_lake_is_a_passed_rebuild_check_and_a_rebuild_takes_late_files_in(lake, warehouse):
    write(lake, gpu_rows(range(0, 600), 100.0))
    con = warehouse()
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert ok and "as the build of" in said
    write(lake, gpu_rows(range(600, 1200), 100.0))
    run_gate(con, DAY, WarehouseSettings())
    assert not _rebuild_results(con)[DAY][0]
    con = warehouse()  # the daily run of the day again
    run_gate(con, DAY, WarehouseSettings())
    assert _rebuild_results(con)[DAY][0]
    assert con.execute("SELECT count(*) FROM stg_gpu_samples").fetchone()[0] == 1200


def test_the_next_days_folder_arriving_late_makes_the_day_before_stale(lake, warehouse):
    """DAY was built before the next day's folder existed; node-01 then shipped 23:55..00:05: the
    readings after midnight bridge DAY's last minutes. The gate of the next day says DAY changed."""
    write(lake, gpu_rows(range(0, 86100, 10), 100.0))
    warehouse(DAY)
    write(lake, gpu_rows(range(86100, 86700, 10), 100.0))
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    results = _rebuild_results(con)
    assert results[NEXT_DAY][0]
    ok, said = results[DAY]
    assert not ok and f"gpu_samples date={DAY}: 8,610 readings when built, 8,640 now" in said
    assert (f"gpu_samples date={NEXT_DAY}: hosts reaching across midnight when built: none; now: node-01 "
            "(0 files when built, 1 file now)") in said


def test_the_next_days_files_of_later_hours_do_not_make_the_day_stale(lake, warehouse):
    """The next day's folder grows all day; only its files that reach back into the day's margin
    are part of what the day's build read. A file of 06:00 changes nothing of the day before."""
    write(lake, gpu_rows(range(0, 86400 + 600, 10), 100.0))
    con = warehouse(DAY)
    write(lake, gpu_rows(range(86400 + 6 * 3600, 86400 + 7 * 3600, 10), 100.0))
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    assert _rebuild_results(con)[DAY][0]


def test_the_build_records_what_it_read(lake, warehouse):
    write(lake, gpu_rows(range(-30, 600), 100.0))
    con = warehouse()
    rows = con.execute("SELECT dataset, partition_date, n_files, size_bytes, files_md5 FROM fct_warehouse_build_lake_files "
                       "WHERE day = ? AND dataset = 'gpu_samples' ORDER BY partition_date", [DAY]).fetchall()
    files = sorted((lake / "gpu_samples").glob("date=*/*/*.parquet"))
    assert [(r[1], r[2], r[3]) for r in rows] == [
        (DAY - dt.timedelta(days=1), 1, files[0].stat().st_size), (DAY, 1, files[1].stat().st_size), (NEXT_DAY, 0, 0)]
    assert con.execute("SELECT n_raw_gpu_samples FROM fct_warehouse_build_daily").fetchone()[0] == 600


def test_an_unreadable_late_file_is_a_changed_file_not_a_failed_gate(lake, warehouse):
    write(lake, gpu_rows(range(0, 86400, 10), 100.0))
    con = warehouse()
    broken = lake / "gpu_samples" / f"date={NEXT_DAY}" / "host=node-01" / "part-0-broken.parquet"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"PAR1 not a parquet file")
    gate = run_gate(con, DAY, WarehouseSettings())
    assert not gate.failed_blocking
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and f"gpu_samples date={NEXT_DAY}: hosts reaching across midnight when built: none; now: node-01" in said


def test_compacting_the_next_day_after_the_build_leaves_the_day_as_read(lake, warehouse):
    """The DAG compacts day D+1 after D was built: the D+1 files D's build read near midnight were
    replaced by one file of the same readings, and every day was reported stale, every day (review,
    helper-100). Compaction leaves the readings and the hosts reaching across midnight as they were."""
    from joulehouse.warehouse.lake_compact import compact_host_day

    for start in range(0, 86400 + 3 * 3600, 1800):  # 30-minute collector files, into the next day
        write(lake, gpu_rows(range(start, start + 1800, 10), 100.0))
    warehouse(DAY)
    compact_host_day(lake, NEXT_DAY, "node-01")
    assert len(list((lake / "gpu_samples" / f"date={NEXT_DAY}" / "host=node-01").glob("*.parquet"))) == 1
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert ok, said


def test_a_next_day_file_without_time_statistics_from_a_host_already_read_changes_nothing(lake, warehouse):
    """A file whose footer has no time statistics (Spark's INT96 timestamps, statistics off) counts
    as reaching into the day, whatever its hours: a 06:00 file from such a writer made the day
    stale. The host already reached across midnight; its readings of 06:00 change nothing of DAY."""
    write(lake, gpu_rows(range(0, 86400 + 600, 10), 100.0))
    warehouse(DAY)
    later = pa.Table.from_pylist(gpu_rows(range(86400 + 6 * 3600, 86400 + 7 * 3600, 10), 100.0))
    folder = lake / "gpu_samples" / f"date={NEXT_DAY}" / "host=node-01"
    pq.write_table(later, folder / "part-spark-0000.parquet", write_statistics=False)
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    assert _rebuild_results(con)[DAY][0]


def test_an_unreadable_file_of_a_host_already_read_across_midnight_is_a_change(lake, warehouse):
    """The host already reached across midnight, so its host list was unchanged: a truncated late
    file there (readings of any hour, none can tell) passed as the lake the build read."""
    write(lake, gpu_rows(range(0, 86400 + 600, 10), 100.0))
    con = warehouse()
    broken = lake / "gpu_samples" / f"date={NEXT_DAY}" / "host=node-01" / "part-0-broken.parquet"
    broken.write_bytes(b"PAR1" + b"\0" * 100)
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and "when built: node-01; now: node-01, node-01 (a file unreadable)" in said


def test_a_file_rewritten_with_corrected_readings_is_a_change_though_as_many(lake, warehouse):
    """A re-import with a corrected log rewrites its file under its own name with as many readings:
    compared by readings and hosts alone, the day's 2.40 kWh passed for the 7.20 a rebuild gives
    (review, helper-102). The file changed otherwise than by a compaction: a change."""
    write(lake, gpu_rows(range(0, 86400, 10), 100.0))
    con = warehouse()
    [path] = (lake / "gpu_samples" / f"date={DAY}" / "host=node-01").glob("*.parquet")
    table = pq.read_table(path)
    corrected = table.set_column(table.schema.get_field_index("power_w"), "power_w",
                                 pa.array([300.0] * table.num_rows, table.schema.field("power_w").type))
    pq.write_table(corrected, path)
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and (f"files changed, not by a compaction: gpu_samples/date={DAY}/host=node-01/{path.name} "
                       "(1 file when built, 1 file now)") in said


def test_compacting_the_days_own_folder_after_the_build_is_no_change(lake, warehouse):
    """`joulehouse compact` of a built day rewrites its files into one with the same readings."""
    from joulehouse.warehouse.lake_compact import compact_host_day

    for start in range(0, 86400, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    compact_host_day(lake, DAY, "node-01")
    run_gate(con, DAY, WarehouseSettings())
    assert _rebuild_results(con)[DAY][0]


def test_a_late_file_beside_a_compaction_is_still_a_change(lake, warehouse):
    """The ledger excuses the files a compaction merged, not a file that came beside it."""
    from joulehouse.warehouse.lake_compact import compact_host_day

    for start in range(0, 43200, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    compact_host_day(lake, DAY, "node-01")
    write(lake, gpu_rows(range(43200, 46800, 10), 100.0))
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and "4,320 readings when built, 4,680 now" in said


def test_a_file_rewritten_in_place_then_compacted_is_still_a_change(lake, warehouse):
    """The ledger excused a file the build read by its name and size alone: rewritten in place with
    as many bytes (corrected readings), then compacted, it passed as unchanged (2.40 kWh stood for
    4.80; review, helper-103). The ledger now says the time of the file merged, and only the very
    file the build read is excused."""
    from joulehouse.collectors.writer import write_parquet_atomic
    from joulehouse.warehouse.lake_compact import compact_host_day

    for start in (0, 43200):
        write(lake, gpu_rows(range(start, start + 43200, 10), 100.0))
    con = warehouse()
    path = sorted((lake / "gpu_samples" / f"date={DAY}" / "host=node-01").glob("*.parquet"))[0]
    table = pq.read_table(path)
    size = path.stat().st_size
    write_parquet_atomic(table.set_column(table.schema.get_field_index("power_w"), "power_w",
                                          pa.array([300.0] * table.num_rows, table.schema.field("power_w").type)), path)
    assert path.stat().st_size == size
    compact_host_day(lake, DAY, "node-01")
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and "files changed, not by a compaction" in said


def test_a_record_from_before_the_file_lists_does_not_stop_the_next_build(lake, warehouse):
    """A warehouse whose record of the lake files lacks the file lists failed every later build
    with a binder error, and its gate with a KeyError (review, helper-103)."""
    write(lake, gpu_rows(range(0, 86400 + 600, 10), 100.0))
    con = warehouse()
    con.execute("ALTER TABLE fct_warehouse_build_lake_files DROP COLUMN files")
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    results = _rebuild_results(con)
    assert results[NEXT_DAY][0] and DAY not in results  # the day before: built before the record


def test_a_gate_reads_each_lake_footer_once_for_the_three_days_it_checks(lake, warehouse, monkeypatch):
    """The gate checks the three built days whose builds read its day's folder; their folders
    overlap, and each check read every footer again: three reads of a day's footers a gate, one
    query per file on an uncompacted lake (review, helper-104)."""
    from collections import Counter

    from joulehouse.warehouse import lake_fingerprint

    write(lake, gpu_rows(range(-600, 2 * 86400 + 600, 10), 100.0))
    warehouse(DAY - dt.timedelta(days=1))
    warehouse(DAY)
    con = warehouse(NEXT_DAY)
    read = Counter()
    real = lake_fingerprint._read_footers

    def counting(con, files):
        read.update(files)
        return real(con, files)

    monkeypatch.setattr(lake_fingerprint, "_read_footers", counting)
    run_gate(con, DAY, WarehouseSettings())
    results = _rebuild_results(con)
    assert all(results[d][0] for d in (DAY - dt.timedelta(days=1), DAY, NEXT_DAY))
    assert read and max(read.values()) == 1, read
