"""Compacting a host's day of small collector files into one: every row kept, fewer bytes, the
same warehouse day, and a compaction that died part-way finished (or dropped) by the next."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warehouse_lakes import DAY, at, gpu_rows, write

from collectors.writer import partition_dir, write_parquet_atomic
from warehouse.lake_compact import CompactionError, compact_host_day, compact_partition, finish_interrupted

RELATIONS = ("fct_gpu_energy_hourly", "fct_gpu_coverage_daily", "quarantine_gpu_samples")


def _rolled_day(lake, host="node-01", roll_s=300, hours=3):
    """A collector's day as it rolls files: one file per `roll_s`, two GPUs, counters, one bad row."""
    for start in range(0, hours * 3600, roll_s):
        rows = []
        for gpu, watts in (("GPU-A", 250.0), ("GPU-B", 410.5)):
            rows += gpu_rows(range(start, start + roll_s), watts + start / 3600, uuid=gpu, host=host,
                             counter_mj=lambda t, w=watts: int(t * w * 1000), temp_c=40.0 + start / 600)
        if start == 600:
            rows.append(dict(rows[3], power_w=-1.0, sampled_at=rows[3]["sampled_at"].replace(microsecond=1)))
        write(lake, rows)
    for t, watts in ((30.0, 900.0), (90.0, 905.0)):
        write(lake, [dict(sampled_at=at(t), host=host, power_w=watts, source="ipmi")], dataset="node_samples")


def _folder(lake, host="node-01", dataset="gpu_samples"):
    return partition_dir(lake, dataset, DAY.isoformat(), host)


def _sorted_rows(folder):
    table = pa.concat_tables([pq.ParquetFile(p).read() for p in sorted(folder.glob("*.parquet"))])
    return sorted(table.to_pylist(), key=repr)


def _snapshot(con):
    return {rel: sorted(con.execute(f"SELECT * FROM {rel}").fetchall(), key=repr) for rel in RELATIONS}


def test_a_host_day_of_small_files_becomes_one_file_with_every_row_and_the_same_warehouse(lake, warehouse):
    _rolled_day(lake)
    folder = _folder(lake)
    before_rows, before_files = _sorted_rows(folder), len(list(folder.glob("*.parquet")))
    before = _snapshot(warehouse())

    reports = {r.dataset: r for r in compact_host_day(lake, DAY, "node-01")}

    assert before_files == 36 and len(list(folder.glob("*.parquet"))) == 1
    assert _sorted_rows(folder) == before_rows, "every row kept, values unchanged"
    gpu = reports["gpu_samples"]
    assert (gpu.files_before, gpu.files_after, gpu.rows) == (36, 1, len(before_rows))
    assert gpu.bytes_after < gpu.bytes_before
    assert gpu.bytes_after == sum(p.stat().st_size for p in folder.glob("*.parquet"))
    assert reports["node_samples"].files_after == 1 and reports["node_samples"].rows == 2
    assert not list(folder.glob("_compaction-*")), "no intent left behind"
    assert _snapshot(warehouse()) == before, "the day builds to the same rows, the bad one still quarantined"
    again = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert (again.files_before, again.files_after) == (1, 1), "a compacted partition is left alone"


def test_a_file_that_does_not_open_is_left_in_place_and_named(lake):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    (folder / "part-0000000000000001-torn.parquet").write_bytes(b"PAR1 not a parquet file")
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert report.files_before == 13 and report.files_after == 2
    assert len(report.left_unreadable) == 1 and report.left_unreadable[0].startswith("part-0000000000000001-torn")
    assert (folder / "part-0000000000000001-torn.parquet").exists()
    again = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert again.files_after == 2 and len(again.left_unreadable) == 1, "named again on the next run"


def test_an_interrupted_compaction_is_finished_when_its_new_file_landed(lake):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    rows = _sorted_rows(folder)
    olds = sorted(folder.glob("*.parquet"))
    late = olds[-1]  # arrived after the compaction listed the files: not in its plan, must stay
    planned = olds[:-1]
    merged = pa.concat_tables([pq.ParquetFile(p).read() for p in planned])
    write_parquet_atomic(merged, folder / "part-0000000000000000-merged.parquet")
    (folder / "_compaction-x.json").write_text(json.dumps(
        {"replaces": [p.name for p in planned], "new": "part-0000000000000000-merged.parquet"}))
    # died here: the new file and the old ones side by side

    assert finish_interrupted(folder) == 1
    assert sorted(p.name for p in folder.glob("*.parquet")) == sorted(["part-0000000000000000-merged.parquet", late.name])
    assert _sorted_rows(folder) == rows and not list(folder.glob("_compaction-*"))


def test_an_interrupted_compaction_whose_new_file_never_landed_changes_nothing(lake):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    names, rows = sorted(p.name for p in folder.glob("*.parquet")), _sorted_rows(folder)
    (folder / "_compaction-y.json").write_text(json.dumps({"replaces": names, "new": "part-9-never.parquet"}))
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert report.finished_interrupted == 1 and report.files_after == 1
    assert _sorted_rows(folder) == rows


def test_an_unreadable_intent_stops_with_the_file_named(lake):
    _rolled_day(lake, hours=1)
    (_folder(lake) / "_compaction-z.json").write_text("{not json")
    with pytest.raises(CompactionError, match="_compaction-z.json"):
        compact_partition(lake, DAY, "node-01", "gpu_samples")


def test_an_object_store_lake_is_refused_with_the_setting_named():
    with pytest.raises(CompactionError, match="compact_lake"):
        compact_host_day("s3://bucket/lake", DAY, "node-01")
