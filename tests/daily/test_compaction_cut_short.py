"""A compaction cut short after its compacted file landed (an old file that would not go) fails
the per-host task, so that its retry finishes the compaction before the day is built.

Before, the task logged "skipped" and succeeded, and the build read the compacted file beside the
files it replaces: a host's day of 11,520 readings in three files, one of them removed before the
error, was built from 19,200 raw rows with 7,680 quarantined as duplicate_key."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest

from joulehouse import daily
from joulehouse.collectors.writer import write_dataset
from joulehouse.settings import LakeSettings, Settings, WarehouseSettings, settings_to_toml
from joulehouse.warehouse.lake_compact import CompactionError

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)
FILES, ROWS_PER_FILE = 3, 360


def _site(tmp_path) -> tuple[Path, str]:
    lake = tmp_path / "lake"
    for k in range(FILES):  # three collector files of one host's day, an hour each
        rows = [dict(sampled_at=START + dt.timedelta(seconds=3600 * k + s), host="node-01", gpu_index=0,
                     gpu_uuid="GPU-1", gpu_model="NVIDIA H100 80GB HBM3", power_w=250.0 + s % 7, power_limit_w=700.0,
                     source="nvml") for s in range(0, 3600, 10)]
        write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(Settings(lake=LakeSettings(path=str(lake)), warehouse=WarehouseSettings(
        db_path=str(tmp_path / "warehouse.duckdb")))))
    return lake / "gpu_samples" / f"date={DAY}" / "host=node-01", str(config)


def _second_removal_refused():
    """Path.unlink that refuses the second replaced Parquet file (a file another user owns)."""
    real_unlink, removals = Path.unlink, []

    def unlink(path, *args, **kwargs):
        if path.suffix == ".parquet" and path.parent.name == "host=node-01":
            removals.append(path.name)
            if len(removals) == 2:
                raise PermissionError(13, "Permission denied", str(path))
        return real_unlink(path, *args, **kwargs)

    return mock.patch.object(Path, "unlink", unlink)


def test_a_compaction_cut_short_fails_the_task_and_its_retry_finishes_it_before_the_build(tmp_path):
    folder, config = _site(tmp_path)
    with _second_removal_refused(), pytest.raises(CompactionError, match="would be read twice by the build") as raised:
        daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    # it said "nothing of this partition was removed" where one replaced file was gone already
    assert "half done" in str(raised.value) and "nothing of this partition was removed" not in str(raised.value)
    assert len(list(folder.glob("*.parquet"))) == FILES, "the compacted file and two of the files it replaces"

    retried = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    assert "compaction_error" not in retried and len(list(folder.glob("*.parquet"))) == 1
    built = daily.build_warehouse(DAY.isoformat(), config)
    assert (built["raw_gpu_rows"], built["clean_gpu_rows"], built["quarantined_gpu_rows"]) == (
        FILES * ROWS_PER_FILE, FILES * ROWS_PER_FILE, 0)


def test_a_compaction_that_changed_nothing_still_lets_the_day_go_on(tmp_path):
    """A compaction whose compacted file could not be written leaves the originals as they were:
    the day's numbers do not depend on it, and the task still succeeds, saying why."""
    folder, config = _site(tmp_path)
    with mock.patch("joulehouse.warehouse.lake_compact.write_parquet_atomic", side_effect=OSError(28, "No space left")):
        summary = daily.inspect_and_compact_lake_partition(DAY.isoformat(), config, "node-01")
    assert "writing the compacted file failed" in summary["compaction_error"]
    assert len(list(folder.glob("*.parquet"))) == FILES and not list(folder.glob("_compaction-*.json"))
