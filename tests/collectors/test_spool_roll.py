"""Segments an older collector left, some of whose rows today's lake refuses: the rows it takes
land, the refused ones alone are set aside (collectors/spool_roll.py). Segments written by hand
with pyarrow, in an older collector's own column types."""

from __future__ import annotations

import datetime as dt
import errno
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joulehouse.collectors import spool_roll
from joulehouse.collectors.spool import read_segment, recover

START = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
OLD_SCHEMA = pa.schema([("sampled_at", pa.timestamp("us", "UTC")), ("host", pa.string()), ("gpu_index", pa.int64()),
                        ("gpu_uuid", pa.string()), ("power_w", pa.float64()), ("mem_used_mib", pa.int64()),
                        ("source", pa.string())])


def _old_segment(spool_dir: Path, n_rows: int, bad: set[int], schema: pa.Schema = OLD_SCHEMA,
                 extra: dict | None = None) -> Path:
    """A segment of `n_rows` readings (8 GPUs, one a second each) whose rows `bad` carry a GPU
    index past int16, as an older collector wrote it."""
    spool_dir.mkdir(exist_ok=True)
    rows = [{"sampled_at": START + dt.timedelta(seconds=i // 8), "host": "node-01",
             "gpu_index": 70_000 if i in bad else i % 8, "gpu_uuid": f"GPU-{i % 8}", "power_w": 300.0 + i % 7,
             "mem_used_mib": 1024, "source": "nvml", **(extra or {})} for i in range(n_rows)]
    segment = spool_dir / "gpu_samples-00000000000000000001-0ld5e9me.arrows"
    with pa.OSFile(str(segment), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(pa.Table.from_pylist(rows, schema=schema), max_chunksize=1000)
    return segment


def _lake_rows(lake: Path) -> list[dict]:
    return [r for f in sorted(lake.rglob("*.parquet")) for r in pq.read_table(f, columns=["sampled_at", "gpu_uuid"]).to_pylist()]


def test_one_bad_value_in_an_older_collectors_segment_sets_aside_that_row_alone(tmp_path, lake):
    """One value today's schema refuses (a GPU index past int16): the conversion failed for the
    whole segment, and its 999 good readings were set aside with the bad one."""
    segment = _old_segment(tmp_path / "spool", 1000, {417})
    recover(segment.parent, lake)
    landed = _lake_rows(lake)
    assert len(landed) == 999 and (START + dt.timedelta(seconds=417 // 8), "GPU-1") not in {
        (r["sampled_at"], r["gpu_uuid"]) for r in landed}
    [kept] = read_segment(segment.with_suffix(".rejected")).to_pylist()
    assert kept["gpu_index"] == 70_000 and kept["gpu_uuid"] == "GPU-1"
    assert "1 row: gpu_samples.gpu_index: cannot store int64 as int16" in segment.with_suffix(".rejected.reason").read_text()
    assert not segment.exists()


@pytest.mark.parametrize("pattern", ["a bunch at the start", "one GPU of eight"])
def test_the_good_rows_land_whatever_the_pattern_of_the_bad_ones(tmp_path, lake, pattern):
    """Halved depth first with a budget of conversions, a large segment whose bad rows came in a
    bunch (the first 5,000 of 100,000) or from one GPU of eight set aside 97,957 and 25,219 good
    rows untried (review, helper-99). Breadth first, every part of a size is tried before any is
    halved again, within the default budget."""
    n_rows, bad = (100_000, set(range(5_000))) if pattern == "a bunch at the start" else (16_000, set(range(3, 16_000, 8)))
    segment = _old_segment(tmp_path / "spool", n_rows, bad)
    recover(segment.parent, lake)
    assert len(_lake_rows(lake)) == n_rows - len(bad)
    kept = read_segment(segment.with_suffix(".rejected"))
    assert kept.num_rows == len(bad) and set(kept.column("gpu_index").to_pylist()) == {70_000}


TEXT_POWER = OLD_SCHEMA.set(OLD_SCHEMA.get_field_index("power_w"), pa.field("power_w", pa.string()))


def _text_power_segment(spool_dir: Path, n_rows: int, bad: set[int]) -> Path:
    """A segment whose power_w an older tool wrote as text, 'n/a' in the rows `bad`: a cause no
    mask finds, so the halving does."""
    segment = _old_segment(spool_dir, n_rows, set())
    table = read_segment(segment)
    text = pa.array(["n/a" if i in bad else f"{v:.1f}" for i, v in enumerate(table.column("power_w").to_pylist())])
    table = table.set_column(table.schema.get_field_index("power_w"), "power_w", text)
    with pa.OSFile(str(segment), "wb") as sink, pa.ipc.new_stream(sink, TEXT_POWER) as writer:
        writer.write_table(table.cast(TEXT_POWER), max_chunksize=1000)
    return segment


def test_a_cause_no_mask_finds_is_halved_breadth_first_and_every_good_row_lands(tmp_path, lake):
    segment = _text_power_segment(tmp_path / "spool", 4_000, set(range(3, 4_000, 8)))
    recover(segment.parent, lake)
    assert len(_lake_rows(lake)) == 3_500
    kept = read_segment(segment.with_suffix(".rejected"))
    assert set(kept.column("power_w").to_pylist()) == {"n/a"} and kept.num_rows == 500


def test_past_the_budget_a_part_still_refused_is_set_aside_whole_and_said(tmp_path, lake, monkeypatch):
    monkeypatch.setattr(spool_roll, "MAX_CONVERSIONS", 8)
    segment = _text_power_segment(tmp_path / "spool", 4_000, set(range(3, 4_000, 8)))
    recover(segment.parent, lake)
    landed, kept = len(_lake_rows(lake)), read_segment(segment.with_suffix(".rejected")).num_rows
    assert landed + kept == 4_000 and kept >= 500  # nothing lost, every bad row aside
    assert "not checked row by row" in segment.with_suffix(".rejected.reason").read_text()


def test_a_full_size_segment_with_a_bad_gpu_lands_its_good_rows_at_once(tmp_path, lake):
    """500,000 rows (the spool's roll_max_rows), one GPU of eight past int16, and a host no folder
    can carry: found by looking at the columns, not by a million halvings (44 s a segment at a
    collector's start, and 95% of the good rows set aside past the budget; review, helper-102)."""
    segment = _old_segment(tmp_path / "spool", 500_000, set(range(3, 500_000, 8)))
    recover(segment.parent, lake)
    assert len(_lake_rows(lake)) == 437_500
    assert "62500 rows: gpu_samples.gpu_index: cannot store int64 as int16" in segment.with_suffix(
        ".rejected.reason").read_text()


def test_a_full_spool_disk_while_setting_rows_aside_keeps_the_segment_for_a_retry(tmp_path, lake, monkeypatch):
    """The set-aside's own write raised ENOSPC out of recover(), and the collector died at every
    start (review, helper-99): it is a write the lake could not take, the segment kept; the retry
    writes the same lake files, nothing twice."""
    segment = _old_segment(tmp_path / "spool", 1000, {417})
    real_write = spool_roll.lakefs.write_file_atomically

    def full(path, data, mode):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool_roll.lakefs, "write_file_atomically", full)
    left: dict[str, list[Path]] = {}
    recover(segment.parent, lake, left)
    assert left == {"gpu_samples": [segment]} and segment.exists() and not segment.with_suffix(".rejected").exists()
    monkeypatch.setattr(spool_roll.lakefs, "write_file_atomically", real_write)
    recover(segment.parent, lake)
    assert len(_lake_rows(lake)) == 999 and read_segment(segment.with_suffix(".rejected")).num_rows == 1
    assert not segment.exists()


def test_an_extra_column_parquet_cannot_hold_sets_the_segment_aside_instead_of_failing_every_start(tmp_path, lake):
    """An extra column of a type Parquet has no place for (an interval) failed the lake write with
    ArrowNotImplementedError, which no one caught: every start died on it (review, helper-99)."""
    schema = OLD_SCHEMA.append(pa.field("step", pa.month_day_nano_interval()))
    segment = _old_segment(tmp_path / "spool", 100, set(), schema, {"step": pa.scalar((0, 0, 1), pa.month_day_nano_interval()).as_py()})
    recover(segment.parent, lake)
    assert _lake_rows(lake) == [] and read_segment(segment.with_suffix(".rejected")).num_rows == 100
    assert "100 rows: gpu_samples: a column Parquet cannot store" in segment.with_suffix(".rejected.reason").read_text()


def test_a_segment_naming_a_column_twice_is_set_aside_instead_of_failing_every_start(tmp_path, lake):
    """An Arrow stream may name a field twice; conform's lookup raised KeyError, which no one
    caught: every start died on the segment (review, helper-102)."""
    schema = OLD_SCHEMA.append(pa.field("power_w", pa.float64()))
    segment = _old_segment(tmp_path / "spool", 10, set(), OLD_SCHEMA)
    table = read_segment(segment)
    doubled = pa.Table.from_arrays(table.columns + [table.column("power_w")], schema=schema)
    with pa.OSFile(str(segment), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(doubled)
    recover(segment.parent, lake)
    assert _lake_rows(lake) == [] and read_segment(segment.with_suffix(".rejected")).num_rows == 10
    assert "gpu_samples: column(s) power_w named more than once" in segment.with_suffix(".rejected.reason").read_text()


def test_a_set_aside_cut_short_leaves_no_temporary_file_behind(tmp_path, lake):
    """A kill while the refused rows were written left `.<segment>.rejected.*.tmp` in the spool for
    good: nothing removed it (review, helper-102). The segment itself was still there: the next
    start sets the rows aside again and removes the leftover."""
    segment = _old_segment(tmp_path / "spool", 100, {7})
    leftover = segment.parent / f".{segment.with_suffix('.rejected').name}.abc123.tmp"
    leftover.write_bytes(b"half a stream")
    recover(segment.parent, lake)
    assert not leftover.exists() and read_segment(segment.with_suffix(".rejected")).num_rows == 1


def _segment_of(spool_dir: Path, schema: pa.Schema, rows: list[dict]) -> Path:
    spool_dir.mkdir(exist_ok=True)
    segment = spool_dir / "gpu_samples-00000000000000000001-0ld5e9me.arrows"
    with pa.OSFile(str(segment), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    return segment


@pytest.mark.parametrize("case", ["uint64 counter past int64", "dictionary host, one bad", "binary host, a NULL uuid"])
def test_the_masks_take_the_types_an_older_writer_used(tmp_path, lake, case):
    """The masks met types conform takes and they did not: a uint64 counter and a dictionary host
    raised out of recover() at every start, and a binary host made every host look bad, 100 good
    rows set aside under another row's reason (review, helper-103). One row of 100 is refused."""
    base = [(n, t) for n, t in zip(OLD_SCHEMA.names, OLD_SCHEMA.types) if n != "mem_used_mib"]
    rows = [{"sampled_at": START + dt.timedelta(seconds=i), "host": "node-01", "gpu_index": i % 8,
             "gpu_uuid": f"GPU-{i % 8}", "power_w": 300.0, "source": "nvml"} for i in range(100)]
    if case == "uint64 counter past int64":
        schema = pa.schema(base + [("energy_mj_total", pa.uint64())])
        rows = [{**r, "energy_mj_total": 2**64 - 1 if i == 5 else 1000 + i} for i, r in enumerate(rows)]
        why = "gpu_samples.energy_mj_total: cannot store uint64 as int64"
    elif case == "dictionary host, one bad":
        schema = pa.schema([(n, pa.dictionary(pa.int32(), pa.string()) if n == "host" else t) for n, t in base])
        rows = [{**r, "host": "bad/host" if i == 5 else "node-01"} for i, r in enumerate(rows)]
        why = "host 'bad/host' cannot name a partition folder"
    else:
        schema = pa.schema([(n, pa.binary() if n == "host" else t) for n, t in base])
        rows = [{**r, "host": b"node-01", "gpu_uuid": None if i == 0 else r["gpu_uuid"]} for i, r in enumerate(rows)]
        why = "gpu_samples.gpu_uuid: NULL values in a required column"
    segment = _segment_of(tmp_path / "spool", schema, rows)
    recover(segment.parent, lake)
    assert len(_lake_rows(lake)) == 99 and read_segment(segment.with_suffix(".rejected")).num_rows == 1
    assert f"1 row: {why}" in segment.with_suffix(".rejected.reason").read_text()
