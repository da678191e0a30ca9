"""The DAG's per-host lake task: it inspects, then compacts the host's day, and a compaction that
cannot run is reported in the task's summary instead of stopping the day."""

from __future__ import annotations

import datetime as dt
import fcntl

import pyarrow as pa
import pytest

from joulehouse.settings import LakeSettings, Settings, WarehouseSettings, settings_to_toml
from joulehouse.collectors.writer import write_dataset
from joulehouse import daily
from joulehouse.warehouse.lake_compact import LOCK_NAME
from joulehouse.warehouse.lake_partitions import NoReadingsForDay

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)


def _site(tmp_path, compact: bool = True):
    lake = tmp_path / "lake"
    for k in range(4):
        rows = [dict(sampled_at=START + dt.timedelta(seconds=300 * k + s), host="node-01", gpu_index=0,
                     gpu_uuid="GPU-1", gpu_model="NVIDIA H100 80GB HBM3", power_w=250.0, source="nvml")
                for s in range(0, 300, 10)]
        write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(Settings(lake=LakeSettings(path=str(lake)), warehouse=WarehouseSettings(
        db_path=str(tmp_path / "w.duckdb"), compact_lake=compact))))
    return lake / "gpu_samples" / f"date={DAY}" / "host=node-01", str(config)


def test_the_per_host_task_inspects_then_compacts(tmp_path):
    folder, config = _site(tmp_path)
    summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    assert summary["gpu_samples"]["files"] == 4 and summary["gpu_samples"]["rows"] == 120
    (gpu,) = summary["compacted"]
    assert (gpu["files_before"], gpu["files_after"], gpu["rows"]) == (4, 1, 120)
    assert len(list(folder.glob("*.parquet"))) == 1


def _facility_files(lake, files: int) -> None:
    for k in range(files):
        rows = [dict(sampled_at=START + dt.timedelta(seconds=300 * k + s), site="site-a",
                     facility_power_w=120_000.0 + s, it_power_w=100_000.0, source="bms") for s in range(0, 300, 60)]
        write_dataset(lake, "facility_samples", pa.Table.from_pylist(rows))


def test_the_site_facility_meter_is_mapped_and_compacted_like_a_host(tmp_path):
    folder, config = _site(tmp_path)
    lake = folder.parents[2]
    _facility_files(lake, 3)
    assert daily.list_lake_hosts(DAY.isoformat(), config) == ["node-01", "site-a"]

    summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "site-a")
    assert set(summary) >= {"facility_samples"} and "gpu_samples" not in summary
    assert (summary["facility_samples"]["files"], summary["facility_samples"]["rows"]) == (3, 15)
    (facility,) = summary["compacted"]
    assert (facility["dataset"], facility["files_before"], facility["files_after"], facility["rows"]) == (
        "facility_samples", 3, 1, 15)
    site_folder = lake / "facility_samples" / f"date={DAY}" / "host=site-a"
    assert len(list(site_folder.glob("*.parquet"))) == 1
    # the host's own task still sees only the host's datasets
    assert set(daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")) == {
        "gpu_samples", "compacted"}


def test_a_day_without_gpu_readings_fails_the_run_saying_where_it_looked(tmp_path):
    folder, config = _site(tmp_path)
    _facility_files(folder.parents[2], 1)  # a meter alone is not a day to build
    with pytest.raises(NoReadingsForDay, match=r"no GPU readings for 2026-04-02 .*gpu_samples/date=2026-04-02"):
        daily.list_lake_hosts("2026-04-02", config)
    other_day = START + dt.timedelta(days=1)
    write_dataset(folder.parents[2], "facility_samples", pa.Table.from_pylist([dict(
        sampled_at=other_day, site="site-a", facility_power_w=1.0e5, source="bms")]))
    with pytest.raises(NoReadingsForDay):
        daily.list_lake_hosts("2026-04-02", config)


def test_compaction_off_leaves_the_files(tmp_path):
    folder, config = _site(tmp_path, compact=False)
    summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    assert summary["compacted"] == [] and len(list(folder.glob("*.parquet"))) == 4


def test_a_compaction_that_cannot_run_is_reported_and_the_day_goes_on(tmp_path):
    folder, config = _site(tmp_path)
    with open(folder / LOCK_NAME, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    assert "another compaction" in summary["compaction_error"]
    assert summary["gpu_samples"]["rows"] == 120 and len(list(folder.glob("*.parquet"))) == 4


def test_a_lake_path_that_is_a_file_or_missing_is_said_so(tmp_path):
    """An operator's trial: a lake path naming a file read "no host= folder under <file>/gpu_samples/...",
    16 s into the run, as if the nodes had not shipped."""
    from joulehouse.warehouse.lake_partitions import gpu_hosts_or_raise

    afile = tmp_path / "lake.txt"
    afile.write_text("not a lake")
    with pytest.raises(NoReadingsForDay, match=rf"the lake {afile} \(\[lake\] path\) is a file, not the lake's folder"):
        gpu_hosts_or_raise(afile, DAY)
    with pytest.raises(NoReadingsForDay, match=r"\(\[lake\] path\) does not exist"):
        gpu_hosts_or_raise(tmp_path / "nowhere", DAY)


def test_a_host_folder_our_writer_would_not_name_is_inspected_and_left_uncompacted(tmp_path):
    """Spark writes host=fd00%3A%3A7 for an IPv6 host: compaction refused the name with a ValueError
    the task did not catch, and the whole day stopped although its numbers do not depend on it."""
    import pyarrow.parquet as pq

    folder, config = _site(tmp_path)
    odd = folder.parent / "host=fd00%3A%3A7"
    odd.mkdir()
    for k in range(2):
        pq.write_table(pa.Table.from_pylist([dict(sampled_at=START + dt.timedelta(seconds=k), host="fd00::7", gpu_index=0,
                                                  gpu_uuid="GPU-2", power_w=250.0, source="nvml")]), odd / f"part-{k}.parquet")
    assert "fd00%3A%3A7" in daily.list_lake_hosts(DAY.isoformat(), config)
    summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "fd00%3A%3A7")
    assert summary["gpu_samples"]["rows"] == 2 and summary["compacted"] == []
    assert "cannot name a partition folder" in summary["compaction_error"]
    assert len(list(odd.glob("*.parquet"))) == 2
