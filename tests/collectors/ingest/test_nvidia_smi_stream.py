"""`ingest_nvidia_smi` streams: a log lands a chunk of rows at a time, in the memory of a chunk,
with the same rows, rejects, duplicates, files and replacement as when the log was read whole."""

from __future__ import annotations

import json
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

import joulehouse.collectors.ingest.nvidia_smi as smi
from joulehouse.cli.ingest import register
from joulehouse.collectors.ingest.lake_import import LOG_ID_COLUMN
from joulehouse.collectors.ingest.nvidia_smi import NvidiaSmiError, ingest_nvidia_smi, read_nvidia_smi_csv
from joulehouse.collectors.schema import SORT_KEYS
from joulehouse.collectors.writer import write_lake_file

UTC = timezone.utc
NOW = datetime(2026, 3, 1, tzinfo=UTC)
T0 = datetime(2026, 1, 2, 22)
HEADER = "timestamp, index, uuid, power.draw [W]\n"


def _row(at: datetime, gpu: int, power: str) -> str:
    return f"{at:%Y/%m/%d %H:%M:%S.%f}"[:-3] + f", {gpu}, GPU-{gpu:04d}, {power}\n"


def _sweeps(path: Path, sweeps: int, *, gpus: int = 2, period_s: float = 60.0) -> Path:
    """A log of `gpus` GPUs read every `period_s`; of its first 500 rows, every 100th has a
    malformed power."""
    with path.open("w") as log:
        log.write(HEADER)
        for s in range(sweeps):
            for gpu in range(gpus):
                bad = (s * gpus + gpu) % 100 == 7 and s * gpus + gpu < 500
                log.write(_row(T0 + timedelta(seconds=period_s * s, milliseconds=3 * gpu), gpu,
                               "oops W" if bad else f"{100 + s % 200}.5 W"))
    return path


def _lake_rows(lake: Path) -> list[dict]:
    table = ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table(
        columns=["sampled_at", "gpu_index", "gpu_uuid", "power_w"])
    return sorted(table.to_pylist(), key=lambda r: (r["sampled_at"], r["gpu_index"]))


def _peak_bytes(path: Path, lake: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        result = ingest_nvidia_smi(path, lake=lake, host="h", now=NOW)
        return tracemalloc.get_traced_memory()[1], result.good_rows
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # 4,500 rows parsed under tracemalloc (about 3 s)
def test_memory_is_bounded_by_the_chunk_not_the_log(tmp_path, monkeypatch):
    """Before: every parsed row (~0.4 KB of Python values here, ~1 KB with every field) stayed in
    memory until the whole log was read: a month of 8 GPUs at 1 Hz is ~20 GB. Eight times the rows
    must not take much more memory at its peak (both logs span more than the duplicate window,
    cover two days and hold the same 5 rejected rows). The old import: 3x for 4x the rows."""
    monkeypatch.setattr(smi, "CHUNK_ROWS", 100, raising=False)
    _peak_bytes(_sweeps(tmp_path / "warm.csv", 50), tmp_path / "warm")  # imports and caches, once
    small, small_rows = _peak_bytes(_sweeps(tmp_path / "small.csv", 250), tmp_path / "lake-small")
    large, large_rows = _peak_bytes(_sweeps(tmp_path / "large.csv", 2000), tmp_path / "lake-large")
    assert (small_rows, large_rows) == (495, 3995)
    # a margin for what tracemalloc counts of caches that grow once (a 1.2 bound read 1.203 once)
    assert large < 1.5 * small, f"peak {large:,} B for 4,000 rows against {small:,} B for 500"
    assert len(_lake_rows(tmp_path / "lake-large")) == 3995
    quarantined = next((tmp_path / "lake-large" / "_quarantine" / "nvidia_smi").glob("*.jsonl")).read_text()
    assert len(quarantined.splitlines()) == 5


def test_chunks_land_what_the_whole_log_gives_and_duplicates_are_found_across_them(tmp_path, lake):
    at = [T0 + timedelta(seconds=s) for s in range(6)]
    log = tmp_path / "smi.csv"
    log.write_text(HEADER + "".join(_row(t, g, f"{200 + i} W") for i, (t, g) in enumerate(
        (t, g) for t in at for g in (0, 1)))
        + _row(at[1], 1, "999 W")  # a duplicate of line 5, four chunks of 3 rows later
        + _row(at[1], 0, "[N/A]")  # and of line 4: "[N/A]" is no value, the row is still a reading
        + _row(at[5] + timedelta(seconds=1), 1, "12 kW"))
    whole = read_nvidia_smi_csv(log, host="h", now=NOW)
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=3)
    assert [(r.line, r.reason.split(" already")[0]) for r in res.rejected] == [
        (14, "duplicate: GPU 1 GPU-0001"), (15, "duplicate: GPU 0 GPU-0000"),
        (16, "power.draw: '12 kW' is not in W")]
    assert (res.good_rows, res.bad_rows, res.reasons()) == (12, 3, {"duplicate": 2, "power.draw": 1})
    assert [(r.line, r.reason) for r in whole.rejected] == [(r.line, r.reason) for r in res.rejected]
    expected = whole.table.select(["sampled_at", "gpu_index", "gpu_uuid", "power_w"]).to_pylist()
    assert _lake_rows(lake) == sorted(expected, key=lambda r: (r["sampled_at"], r["gpu_index"]))
    assert [w.rows for w in res.written] == [12]  # one file for the day, made of four chunks
    assert res.table.num_rows == 12 and LOG_ID_COLUMN not in res.table.column_names
    lines = [json.loads(x) for x in res.quarantine_path.read_text().splitlines()]
    assert [(q["line"], q["host"], q["source_file"]) for q in lines] == [(14, "h", str(log)), (15, "h", str(log)),
                                                                          (16, "h", str(log))]
    assert not (lake / ".import-staging").exists()  # nothing staged is left, not even the folder



def test_a_staged_day_file_is_written_as_the_lake_writer_writes_one(tmp_path, lake):
    res = ingest_nvidia_smi(_sweeps(tmp_path / "smi.csv", 60, period_s=1.0), lake=lake, host="h", now=NOW,
                            chunk_rows=25)
    [written] = res.written
    streamed = pq.ParquetFile(written.path)
    by_writer = pq.ParquetFile(write_lake_file(streamed.read(), tmp_path / "x" / "y" / "z" / "ref.parquet").path)
    assert streamed.schema_arrow == by_writer.schema_arrow

    def settings(meta):
        group = meta.row_group(0)
        return {group.column(i).path_in_schema: (group.column(i).compression, sorted(group.column(i).encodings))
                for i in range(meta.num_columns)}

    assert settings(streamed.metadata) == settings(by_writer.metadata)
    assert streamed.metadata.num_row_groups == 5  # 119 rows in chunks of 25
    for group in range(streamed.metadata.num_row_groups):  # each sorted as the writer sorts a file
        rows = streamed.read_row_group(group)
        assert rows.equals(rows.sort_by(SORT_KEYS["gpu_samples"]))


def test_a_log_refused_part_way_leaves_the_lake_as_it_was(tmp_path, lake):
    log = _sweeps(tmp_path / "smi.csv", 30)
    first = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=5)
    before = {p.relative_to(lake): p.read_bytes() for p in lake.rglob("*") if p.is_file()}
    # The log grown, then a quote never closed below more than ten chunks of good rows: refused.
    with log.open("a") as grown:
        grown.writelines(_row(T0 + timedelta(days=2, seconds=s), 0, "50 W") for s in range(60))
        grown.write('2026/01/05 00:00:00.000, 0, GPU-0000,"50 W\n' + _row(T0 + timedelta(days=3), 0, "50 W"))
    with pytest.raises(NvidiaSmiError, match="opens a quote"):
        ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=5)
    after = {p.relative_to(lake): p.read_bytes() for p in lake.rglob("*") if p.is_file()}
    assert after == before and first.good_rows == 59
    assert not [p for p in lake.rglob("*") if p.is_dir() and "date=2026-01-04" in str(p)]


def test_a_partition_whose_file_was_closed_gets_one_file_of_its_segments(tmp_path, lake, monkeypatch):
    """A log that jumps between days (logs concatenated out of order) keeps at most
    MAX_OPEN_PARTITIONS staged files open; each day still lands as one file of all its rows."""
    from joulehouse.collectors.ingest import lake_stream

    monkeypatch.setattr(lake_stream, "MAX_OPEN_PARTITIONS", 2)
    log = tmp_path / "smi.csv"
    log.write_text(HEADER + "".join(_row(T0 + timedelta(days=(i * 3) % 5, seconds=i), 0, f"{100 + i} W")
                                    for i in range(40)))
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=4)
    assert sorted(w.rows for w in res.written) == [8] * 5 and res.good_rows == 40
    assert len(list(lake.rglob("*.parquet"))) == 5
    assert [r["power_w"] for r in _lake_rows(lake)] == sorted(
        (100.0 + i for i in range(40)), key=lambda p: (T0 + timedelta(days=((p - 100) * 3) % 5, seconds=p - 100)))
    again = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=4)  # replaced, not added to
    assert len(_lake_rows(lake)) == 40 and any("imported before" in n for n in again.notes)


def test_a_row_too_far_back_to_check_is_kept_and_counted(tmp_path, lake, monkeypatch):
    """The duplicate check holds the readings of the last DUPLICATE_WINDOW_S: a row further back
    is kept unchecked, and said so (the warehouse build quarantines a duplicate it turns out to be)."""
    monkeypatch.setattr(smi, "DUPLICATE_WINDOW_S", 60)
    log = tmp_path / "smi.csv"
    log.write_text(HEADER + _row(T0, 0, "100 W") + _row(T0 + timedelta(seconds=30), 0, "101 W")
                   + _row(T0, 0, "102 W")  # 30 s back: checked, a duplicate
                   + _row(T0 + timedelta(minutes=5), 0, "103 W") + _row(T0, 0, "104 W"))  # 5 min back: unchecked
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW, chunk_rows=2)
    assert [r.line for r in res.rejected] == [4] and res.good_rows == 4
    assert any(n.startswith("1 rows more than 0.0166667 h before the log's latest reading") for n in res.notes)


def test_an_import_keeps_a_bounded_number_of_rejects_but_counts_and_quarantines_all(tmp_path, lake, monkeypatch):
    from joulehouse.collectors.ingest import lake_stream

    monkeypatch.setattr(lake_stream, "KEPT_REJECTS", 3)
    log = tmp_path / "smi.csv"
    log.write_text(HEADER + "".join(_row(T0 + timedelta(seconds=i), 0, "oops W") for i in range(10))
                   + "2026/01/02 23:00:00.000, 0\n")  # a second kind, after the first 3 are kept
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h"])
    assert out.exit_code == 0, out.output
    assert "0 rows imported, 11 rejected" in out.output
    assert "rejected 10 x power.draw" in out.output and f"rejected 1 x field count (e.g. {log}:12:" in out.output
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW)
    assert (res.bad_rows, res.reasons(), [r.line for r in res.rejected]) == (
        11, {"power.draw": 10, "field count": 1}, [2, 3, 4, 12])
    assert len(res.quarantine_path.read_text().splitlines()) == 11
    assert res.table.num_rows == 0 and res.written == []
