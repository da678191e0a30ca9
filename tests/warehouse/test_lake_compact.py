"""Compacting a host's day of small collector files into one: every row kept, fewer bytes, the
same warehouse day, and a compaction that died part-way finished (or dropped) by the next."""

from __future__ import annotations

import fcntl

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warehouse_lakes import DAY, at, gpu_rows, write

from joulehouse.collectors.schema import DATASETS
from joulehouse.collectors.ship import ship_lake
from joulehouse.collectors.writer import partition_dir, write_parquet_atomic
from joulehouse.warehouse import lake_compact
from joulehouse.warehouse.lake_compact import CompactionError, compact_host_day, compact_partition

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
    tables = [pq.ParquetFile(p).read() for p in sorted(folder.glob("*.parquet"))]
    table = pa.concat_tables(tables, promote_options="permissive")
    return sorted(table.to_pylist(), key=repr)


def _snapshot(con):
    return {rel: sorted(con.execute(f"SELECT * FROM {rel}").fetchall(), key=repr) for rel in RELATIONS}


@pytest.mark.slow
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


class Crash(BaseException):
    """The process dying at a chosen point (not an Exception: nothing may catch and tidy up)."""


def _die(*_args, **_kwargs):
    raise Crash()


@pytest.mark.slow
def test_a_compaction_that_died_after_its_new_file_landed_is_finished_by_the_next(lake, monkeypatch):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    rows = _sorted_rows(folder)
    with monkeypatch.context() as patch:
        patch.setattr(lake_compact, "_remove_replaced", _die)
        with pytest.raises(Crash):
            compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert len(list(folder.glob("*.parquet"))) == 13 and len(list(folder.glob("_compaction-*.json"))) == 1
    # a file that arrives now is not in the dead compaction's plan, and must stay
    write(lake, gpu_rows([3700.0], 123.0, uuid="GPU-LATE"))
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert report.finished_interrupted == 1
    assert len(list(folder.glob("*.parquet"))) == 1 and not list(folder.glob("_compaction-*.json"))
    assert _sorted_rows(folder) == sorted(rows + _rows_of(gpu_rows([3700.0], 123.0, uuid="GPU-LATE")), key=repr)


def test_a_compaction_that_died_before_its_new_file_landed_changes_nothing(lake, monkeypatch):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    names, rows = sorted(p.name for p in folder.glob("*.parquet")), _sorted_rows(folder)
    with monkeypatch.context() as patch:
        patch.setattr(lake_compact, "write_parquet_atomic", _die)
        with pytest.raises(Crash):
            compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert sorted(p.name for p in folder.glob("*.parquet")) == names
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert report.finished_interrupted == 1 and report.files_after == 1
    assert _sorted_rows(folder) == rows


def test_a_file_replaced_while_being_compacted_is_kept(lake, monkeypatch):
    # ship re-sends a file under the same name after the compaction read it: its new rows stay
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    with monkeypatch.context() as patch:
        patch.setattr(lake_compact, "_remove_replaced", _die)
        with pytest.raises(Crash):
            compact_partition(lake, DAY, "node-01", "gpu_samples")
    resent = sorted(folder.glob("part-*.parquet"))[5]
    write_parquet_atomic(pa.Table.from_pylist(gpu_rows([7000.0], 99.0, uuid="GPU-RESENT")), resent)
    compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert resent.exists()
    assert any(r["gpu_uuid"] == "GPU-RESENT" for r in _sorted_rows(folder))


def test_a_file_replaced_while_it_is_read_stays_with_its_new_rows(lake, monkeypatch):
    """Ship's rename landed while compaction read the file: the hash was taken after the read, of
    the new bytes, so the new file matched 'its' hash and was removed; its rows were lost."""
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    resent = sorted(folder.glob("part-*.parquet"))[5]
    read_bytes, done = type(resent).read_bytes, []

    def replaced_after_read(path):
        data = read_bytes(path)
        if path.name == resent.name and not done:  # the concurrent ship's rename, just after the read
            done.append(write_parquet_atomic(pa.Table.from_pylist(gpu_rows([7000.0], 99.0, uuid="GPU-RESENT")), resent))
        return data

    monkeypatch.setattr(type(resent), "read_bytes", replaced_after_read)
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    monkeypatch.undo()
    assert done and resent.exists() and "replaced while it was read" in " ".join(report.left_unreadable)
    assert any(r["gpu_uuid"] == "GPU-RESENT" for r in _sorted_rows(folder))


def test_a_lake_that_cannot_be_written_is_one_error_naming_the_partition(lake, monkeypatch):
    """A full disk (or a read-only lake) raised a bare OSError with a traceback, and stopped the
    partitions after it."""
    _rolled_day(lake, hours=1)
    before = sorted(p.name for p in _folder(lake).glob("*.parquet"))

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lake_compact, "write_bytes_atomic", full)
    with pytest.raises(CompactionError, match="No space left on device; nothing of this partition was removed") as err:
        compact_host_day(lake, DAY, "node-01")
    assert "gpu_samples" in str(err.value) and "node_samples" in str(err.value)  # each partition tried
    assert sorted(p.name for p in _folder(lake).glob("*.parquet")) == before


def test_a_file_copied_again_with_the_bytes_merged_goes_with_the_rest(lake, monkeypatch):
    """A resumed ship re-copies, onto the same name, a file it had copied before its manifest line:
    the same bytes, a new inode. Kept as 'changed', its rows stood twice in the lake for good."""
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    rows_before = len(_sorted_rows(folder))
    copied = sorted(folder.glob("part-*.parquet"))[5]
    real = lake_compact._remove_replaced

    def resumed_ship_first(folder_, replaces, new):
        data = copied.read_bytes()
        copied.unlink()
        copied.write_bytes(data)  # what ship's atomic copy leaves: the same bytes, another file
        return real(folder_, replaces, new)

    monkeypatch.setattr(lake_compact, "_remove_replaced", resumed_ship_first)
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert not copied.exists() and report.left_unreadable == [] and report.files_after == 1
    assert len(_sorted_rows(folder)) == rows_before


def test_rows_land_or_the_originals_stay(lake, monkeypatch):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    names = sorted(p.name for p in folder.glob("*.parquet"))
    real = lake_compact.pq.read_metadata

    class Short:
        def __init__(self, path):
            self.num_rows = real(path).num_rows - 1

    with monkeypatch.context() as patch:
        patch.setattr(lake_compact.pq, "read_metadata", Short)
        with pytest.raises(CompactionError, match="originals are kept"):
            compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert sorted(p.name for p in folder.glob("*.parquet")) == names and not list(folder.glob("_compaction-*.json"))


def test_a_second_compaction_of_the_same_partition_stops_at_once(lake):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    with open(folder / lake_compact.LOCK_NAME, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CompactionError, match="another compaction"):
            compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert len(list(folder.glob("*.parquet"))) == 12


def test_values_are_kept_as_stored_and_a_file_of_another_schema_stays(lake):
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    # an older writer's file: a ratio off the 2^-16 storage step, no temperature column
    odd = pa.Table.from_pylist([dict(r, sm_active_ratio=0.123456789) for r in gpu_rows([3601.0, 3602.0], 80.0)],
                               schema=_schema_without("temp_c"))
    write_parquet_atomic(odd, folder / "part-0000000000000002-old.parquet")
    wide_schema = pa.schema([f.with_type(pa.float64()) if f.name == "power_w" else f for f in _schema_of([])])
    wide = pa.Table.from_pylist(gpu_rows([3603.0], 80.0), schema=wide_schema)
    write_parquet_atomic(wide, folder / "part-0000000000000003-wide.parquet")
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert report.files_after == 2 and "part-0000000000000003-wide.parquet" in report.left_unreadable[0]
    assert "power_w" in report.left_unreadable[0]
    merged = pq.read_table(next(p for p in folder.glob("*.parquet") if "wide" not in p.name))
    ratios = [v for v in merged.column("sm_active_ratio").to_pylist() if v is not None]
    assert ratios == [pytest.approx(0.123456789, abs=1e-8)] * 2 and merged.schema == _schema_of(None)


def test_a_file_without_power_or_counter_stays_out_and_a_column_of_nulls_merges(lake):
    """Another tool's files: one with neither power_w nor energy_mj_total was merged (its readings
    became power-less rows, and the build's contract check, which names such a file, never saw it,
    as the DAG compacts first); one whose gpu_model pandas wrote as None (pyarrow's null type)."""
    _rolled_day(lake, hours=1)
    folder = _folder(lake)
    rows = [{k: v for k, v in r.items() if k not in ("power_w", "energy_mj_total")} for r in gpu_rows([3601.0], 80.0)]
    without = pa.schema([f for f in _schema_of([]) if f.name not in ("power_w", "energy_mj_total")])
    pq.write_table(pa.Table.from_pylist(rows, schema=without), folder / "part-other-tool.parquet")
    nulls = pa.Table.from_pylist(gpu_rows([3602.0, 3603.0], 80.0), schema=_schema_without("gpu_model"))
    pq.write_table(nulls.append_column("gpu_model", pa.nulls(2)), folder / "part-pandas.parquet")
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert [r.split(":")[0] for r in report.left_unreadable] == ["part-other-tool.parquet"]
    assert "none of the required columns power_w or energy_mj_total" in report.left_unreadable[0]
    merged = pq.read_table(next(p for p in folder.glob("*.parquet") if "other-tool" not in p.name))
    assert merged.schema.field("gpu_model").type == pa.string() and merged.num_rows == 3600 * 2 + 1 + 2  # the hour of two GPUs, its bad row, the two


def test_a_collectors_own_columns_are_merged_and_kept(lake):
    """NVML's files carry running_pids and error beyond the dataset's columns (the writer keeps
    them), and power_limit_min_w, since 5cecacf one of the dataset's optional columns: they are
    compacted like any other, the collector's own columns kept after the dataset's."""
    folder = _folder(lake)
    extra = [pa.field("power_limit_min_w", pa.float32()), pa.field("running_pids", pa.list_(pa.int64())),
             pa.field("error", pa.string())]
    schema = pa.schema(list(_schema_of([])) + extra)
    expected = []
    for i in range(3):
        rows = [dict(r, power_limit_min_w=200.0, running_pids=[100 + i], error=None if i else "temp: Unknown Error")
                for r in gpu_rows([60.0 * i, 60.0 * i + 1], 300.0 + i)]
        write(lake, pa.Table.from_pylist(rows, schema=schema).to_pylist())
        expected += rows
    assert len(list(folder.glob("*.parquet"))) == 3
    report = compact_partition(lake, DAY, "node-01", "gpu_samples")
    assert (report.files_before, report.files_after, report.left_unreadable) == (3, 1, [])
    [merged] = [pq.read_table(p) for p in folder.glob("*.parquet")]
    assert merged.schema.names[-2:] == ["running_pids", "error"] and "power_limit_min_w" in merged.schema.names
    fields = ("sampled_at", "power_limit_min_w", "running_pids", "error")
    got = sorted((tuple(r[f] for f in fields) for r in merged.to_pylist()), key=repr)
    assert got == sorted((tuple(r[f] for f in fields) for r in expected), key=repr)


def test_a_file_shipped_again_after_its_partition_was_compacted_is_not_put_back(tmp_path):
    """A power cut tears ship's last manifest line, and the central partition is compacted before
    the node comes back: ship must not send that file again beside the rows that already hold it."""
    node, central, manifest = tmp_path / "node", tmp_path / "central", tmp_path / "state" / "manifest.jsonl"
    for i in range(2):
        write(node, [dict(sampled_at=at(float(i)), host="node-01", power_w=500.0 + i, source="ipmi")],
              dataset="node_samples")
    assert len(ship_lake(node, str(central), manifest).shipped) == 2
    text = manifest.read_bytes()
    manifest.write_bytes(text[:-40])  # the last line cut short
    report = compact_partition(central, DAY, "node-01", "node_samples")
    assert (report.files_before, report.files_after) == (2, 1)

    again = ship_lake(node, str(central), manifest)
    assert (len(again.shipped), again.already_compacted) == (0, 1)
    folder = _folder(central, dataset="node_samples")
    assert sum(pq.read_metadata(p).num_rows for p in folder.glob("*.parquet")) == 2
    assert ship_lake(node, str(central), manifest).already_compacted == 0  # recorded in the manifest

    # a file that did change since (same name, other bytes) is still sent
    changed = sorted((node / "node_samples").rglob("*.parquet"))[0]
    write_parquet_atomic(pa.Table.from_pylist([dict(sampled_at=at(0.0), host="node-01", power_w=999.0, source="ipmi")],
                                              schema=pq.read_schema(changed)), changed)
    assert len(ship_lake(node, str(central), manifest).shipped) == 1


def _rows_of(rows):
    return pa.Table.from_pylist(rows, schema=_schema_of(None)).to_pylist()


def _schema_of(columns):
    """gpu_samples' schema (columns=None) or just those columns' fields plus what gpu_rows writes."""
    schema = DATASETS["gpu_samples"]
    if columns is None:
        return schema
    keep = set(columns) | set(gpu_rows([0.0])[0])
    return pa.schema([f for f in schema if f.name in keep])


def _schema_without(column):
    keep = set(gpu_rows([0.0])[0]) | {"sm_active_ratio"}
    return pa.schema([f for f in DATASETS["gpu_samples"] if f.name in keep and f.name != column])


def test_an_unreadable_intent_stops_with_the_file_named(lake):
    _rolled_day(lake, hours=1)
    (_folder(lake) / "_compaction-z.json").write_text("{not json")
    with pytest.raises(CompactionError, match="_compaction-z.json"):
        compact_partition(lake, DAY, "node-01", "gpu_samples")


def test_an_object_store_lake_is_refused_with_the_setting_named():
    with pytest.raises(CompactionError, match="compact_lake"):
        compact_host_day("s3://bucket/lake", DAY, "node-01")
