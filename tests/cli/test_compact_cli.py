"""`joulehouse compact`: a day's small files become one per host and dataset, the summary says
what moved, and an object-store lake or a bad date is refused with exit 2."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.dataset as ds
from typer.testing import CliRunner

from joulehouse.collectors.writer import write_dataset
from joulehouse.cli.main import app

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)


def _roll(lake, host: str, files: int) -> None:
    for k in range(files):
        rows = [dict(sampled_at=START + dt.timedelta(seconds=300 * k + s), host=host, gpu_index=0,
                     gpu_uuid=f"GPU-{host}", gpu_model="NVIDIA H100 80GB HBM3", power_w=300.0 + s % 7,
                     source="nvml") for s in range(300)]
        write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))


def test_compact_a_day_of_two_hosts(tmp_path):
    lake = tmp_path / "lake"
    _roll(lake, "node-01", 5)
    _roll(lake, "node-02", 3)
    before = ds.dataset(lake / "gpu_samples", partitioning="hive").to_table().num_rows
    result = CliRunner().invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat()])
    assert result.exit_code == 0, result.output
    assert "2 hosts, 8 files -> 2" in result.output and "2,400 rows kept" in result.output
    assert result.output.splitlines()[0].startswith("2026-"), "piped, the bar left a blank first line"
    for host in ("node-01", "node-02"):
        assert len(list((lake / "gpu_samples" / f"date={DAY}" / f"host={host}").glob("*.parquet"))) == 1
    assert ds.dataset(lake / "gpu_samples", partitioning="hive").to_table().num_rows == before


def test_one_host_only(tmp_path):
    lake = tmp_path / "lake"
    _roll(lake, "node-01", 2)
    _roll(lake, "node-02", 2)
    result = CliRunner().invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat(), "--host", "node-02"])
    assert result.exit_code == 0, result.output
    assert len(list((lake / "gpu_samples" / f"date={DAY}" / "host=node-01").glob("*.parquet"))) == 2
    assert len(list((lake / "gpu_samples" / f"date={DAY}" / "host=node-02").glob("*.parquet"))) == 1


def test_a_host_named_twice_is_compacted_and_counted_once(tmp_path):
    lake = tmp_path / "lake"
    _roll(lake, "node-01", 2)
    result = CliRunner().invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat(),
                                      "--host", "node-01", "--host", "node-01"])
    assert result.exit_code == 0, result.output
    assert "1 host" in result.output and "2 hosts" not in result.output


def test_object_store_lake_bad_date_open_day_and_unknown_host_are_refused(tmp_path):
    runner = CliRunner()
    lake = tmp_path / "lake"
    _roll(lake, "node-01", 2)
    result = runner.invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat(), "--host", "node-9"])
    assert result.exit_code == 2 and "node-9" in result.output
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    result = runner.invoke(app, ["compact", "--lake", str(lake), "--date", today])
    assert result.exit_code == 2 and "not over yet" in result.output
    result = runner.invoke(app, ["compact", "--lake", "s3://bucket/lake", "--date", DAY.isoformat()])
    assert result.exit_code == 2 and "compact_lake" in result.output
    result = runner.invoke(app, ["compact", "--lake", str(lake), "--date", "April 1"])
    assert result.exit_code == 2 and "not a date" in result.output
    result = runner.invoke(app, ["compact", "--lake", str(tmp_path / "typo"), "--date", DAY.isoformat()])
    assert result.exit_code == 2 and "is not a lake" in result.output
    result = runner.invoke(app, ["compact", "--lake", str(tmp_path / "typo"), "--date", today])  # the typo named first
    assert result.exit_code == 2 and "is not a lake" in result.output
    result = runner.invoke(app, ["compact", "--lake", str(lake), "--date", "2026-03-31"])
    assert result.exit_code == 0 and "nothing to compact" in result.output


def test_a_host_that_cannot_be_compacted_does_not_stop_the_others(tmp_path):
    import fcntl

    from joulehouse.warehouse.lake_compact import LOCK_NAME

    lake = tmp_path / "lake"
    _roll(lake, "node-01", 3)
    _roll(lake, "node-02", 3)
    busy = lake / "gpu_samples" / f"date={DAY}" / "host=node-01"
    with open(busy / LOCK_NAME, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = CliRunner().invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat()])
    assert result.exit_code == 2 and "another compaction" in result.output and "host=node-01" in result.output
    assert len(list(busy.glob("*.parquet"))) == 3
    assert len(list((lake / "gpu_samples" / f"date={DAY}" / "host=node-02").glob("*.parquet"))) == 1


def test_a_host_folder_that_names_no_host_is_one_error_and_the_hosts_after_it_are_compacted(tmp_path):
    """An escaped IPv6 folder (host=fd00%3A%3A7, from another tool) raised a traceback, exit 1,
    and every host after it stayed as it was."""
    import shutil

    lake = tmp_path / "lake"
    for host in ("a1", "zz9"):
        _roll(lake, host, 2)
    day = lake / "gpu_samples" / f"date={DAY}"
    shutil.copytree(day / "host=a1", day / "host=fd00%3A%3A7")
    result = CliRunner().invoke(app, ["compact", "--lake", str(lake), "--date", DAY.isoformat()])
    assert result.exit_code == 2 and "host=fd00%3A%3A7 of 2026-04-01 is not compacted" in result.output
    assert "Traceback" not in result.output
    assert [len(list((day / f"host={h}").glob("*.parquet"))) for h in ("a1", "zz9", "fd00%3A%3A7")] == [1, 1, 2]
