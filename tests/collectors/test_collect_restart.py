"""`joulehouse collect` after a kill -9, as README.md's node section has an operator follow it.

The restarted collector rolls what the killed one left in the spool into the lake. Its stop line
said "993 rows, 6 files" for a lake that had gained 1,280 rows: the 287 recovered rows were not
counted while their 2 files were, and the journal said only "recovered spool segment <name>", so
rows written could not be matched against rows read back. And the journal said nothing at all at
start: `journalctl -u joulehouse-collect -f` showed no line that it runs, where it writes, or
under which host name."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pyarrow.parquet as pq
import typer
from typer.testing import CliRunner

from joulehouse.cli.collect import register
from joulehouse.collectors.sources.sim import SimSource
from joulehouse.collectors.spool import Spool


def _collect(*args: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, list(args))


def _lake_rows(lake: Path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in lake.rglob("*.parquet"))


def _left_by_a_killed_collector(spool_dir: Path, lake: Path, polls: int) -> int:
    """Segments as a collector killed between two rolls leaves them: flushed, never rolled."""
    source = SimSource("node-01", gpus=2)
    spool = Spool(spool_dir, lake, "gpu_samples")
    for _ in range(polls):
        spool.append(source.read())
    spool.flush()
    spool._segment.sink.close()  # the process is gone: its file stays as the kill left it
    return 2 * polls


def test_the_stop_line_counts_the_rows_recovered_from_the_spool_beside_its_own(tmp_path):
    lake, spool_dir = tmp_path / "lake", tmp_path / "spool"
    left = _left_by_a_killed_collector(spool_dir, lake, polls=7)
    out = _collect("--source", "sim", "--sim-gpus", "2", "--host", "node-01", "--lake", str(lake),
                   "--interval", "10ms", "--max-polls", "3")
    assert out.exit_code == 0, out.output
    line = re.search(r"stopped: 3 polls, (\d+) rows, (\d+) files, .*recovered (\d+) rows in (\d+) files? a stopped "
                     r"collector left in the spool", out.output)
    assert line, out.output
    rows, files, recovered_rows, recovered_files = map(int, line.groups())
    assert (rows, recovered_rows, recovered_files) == (6, left, 1)
    assert rows + recovered_rows == _lake_rows(lake) == 6 + left  # the line adds up to what the lake holds
    assert files + recovered_files == len(list(lake.rglob("*.parquet")))


def test_the_log_says_what_runs_where_at_start_and_how_many_rows_a_segment_gave(tmp_path, caplog):
    lake, spool_dir = tmp_path / "lake", tmp_path / "spool"
    left = _left_by_a_killed_collector(spool_dir, lake, polls=4)
    with caplog.at_level(logging.INFO):
        out = _collect("--source", "sim", "--sim-gpus", "2", "--host", "NODE-01.cluster.example.com",
                       "--lake", str(lake), "--interval", "10ms", "--max-polls", "2")
    assert out.exit_code == 0, out.output
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("collecting ")]
    assert len(started) == 1, caplog.text
    # the name the lake gets, not the one given; the folders; the pace
    assert "host 'node-01'" in started[0] and str(lake) in started[0] and str(spool_dir) in started[0]
    assert "sim every 0.01 s" in started[0], started[0]
    recovered = [r.getMessage() for r in caplog.records if "recovered spool segment" in r.getMessage()]
    assert len(recovered) == 1 and f"{left} rows" in recovered[0], recovered
