"""The DCGM watermark file lost, or put back from an older backup, while the lake keeps what it
wrote. The watermark was then the initial lookback (or the backup's), ranges already in the lake
were read again under other file names, and the lake held their readings twice (16 rows after two
syncs; a removed state file and one more sync: 27 rows for 17 readings). The sync now goes on from
the newest range the lake holds for the source: each reading once, none skipped."""

from __future__ import annotations

import shutil

import pytest
from test_dcgm import FakePrometheus, fake_source, stored_times

from joulehouse.collectors.sources import dcgm as dcgm_module

NOW_S = 1_700_000_000
MIDNIGHT_S = 1_700_006_400  # 2023-11-15T00:00:00Z: a range across it writes two date partitions


def every_scrape(first_s: int, last_s: int) -> list[float]:
    """The fake's scrape instants (every 10 s) in [first_s, last_s], each once."""
    return [float(t) for t in range(first_s, last_s + 1, 10)]


def test_a_removed_state_file_reads_no_range_the_lake_holds_again(tmp_path):
    # as the state file's own error message advised for a corrupt one
    src = fake_source(tmp_path, FakePrometheus())
    src.sync(now_s=NOW_S)
    src.sync(now_s=NOW_S + 50)
    assert len(stored_times(tmp_path / "lake")) == 16
    src.state.path.unlink()
    src.sync(now_s=NOW_S + 60)
    assert stored_times(tmp_path / "lake") == every_scrape(NOW_S - 100, NOW_S + 60)


def test_an_older_backup_of_the_state_file_reads_no_range_the_lake_holds_again(tmp_path):
    src = fake_source(tmp_path, FakePrometheus())
    src.sync(now_s=NOW_S)
    shutil.copy(src.state.path, tmp_path / "backup.json")
    for minutes in range(1, 6):
        src.sync(now_s=NOW_S + 60 * minutes)
    shutil.copy(tmp_path / "backup.json", src.state.path)
    src.sync(now_s=NOW_S + 330)
    assert stored_times(tmp_path / "lake") == every_scrape(NOW_S - 100, NOW_S + 330)


def test_a_state_file_lost_after_a_long_stop_reads_what_came_after_the_lake_not_only_the_lookback(tmp_path):
    """Stopped for two hours, then started without its state: the initial lookback (100 s here)
    alone left the 7,100 s between the lake's last range and it unread for good."""
    src = fake_source(tmp_path, FakePrometheus())
    src.sync(now_s=NOW_S)
    src.state.path.unlink()
    src.sync(now_s=NOW_S + 7200)
    assert stored_times(tmp_path / "lake") == every_scrape(NOW_S - 100, NOW_S + 7200)


def test_a_range_cut_short_by_a_crash_and_then_a_lost_state_file_is_completed(tmp_path, monkeypatch):
    """A crash after the first of a range's two date partitions was written, and the state file
    (which said the range was pending) lost before the restart: the second day's readings of that
    range are still written, once."""
    src = fake_source(tmp_path, FakePrometheus())
    src.sync(now_s=MIDNIGHT_S - 30)
    real_write = dcgm_module.write_parquet_atomic
    calls = []

    def crash_on_second_partition(table, path):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_write(table, path)

    monkeypatch.setattr(dcgm_module, "write_parquet_atomic", crash_on_second_partition)
    with pytest.raises(KeyboardInterrupt):
        src.sync(now_s=MIDNIGHT_S + 30)
    monkeypatch.setattr(dcgm_module, "write_parquet_atomic", real_write)
    src.state.path.unlink()
    src.sync(now_s=MIDNIGHT_S + 60)
    assert stored_times(tmp_path / "lake") == every_scrape(MIDNIGHT_S - 130, MIDNIGHT_S + 60)


def test_a_state_file_newer_than_the_lake_is_kept(tmp_path):
    """The node's retention removed the lake's files (shipped): the state's watermark still holds,
    and nothing before it is read again."""
    client = FakePrometheus()
    src = fake_source(tmp_path, client)
    src.sync(now_s=NOW_S)
    shutil.rmtree(tmp_path / "lake")
    src.sync(now_s=NOW_S + 60)
    assert stored_times(tmp_path / "lake") == every_scrape(NOW_S + 10, NOW_S + 60)


def test_a_running_source_lists_the_lake_only_when_its_state_file_changed_under_it(tmp_path, monkeypatch):
    # Listing the newest date folder of a node (~10,000 files) took ~100 ms: once a start, not every sync.
    from joulehouse.collectors.sources import dcgm_resume

    listed = []
    real_newest = dcgm_resume.newest_ranges
    monkeypatch.setattr(dcgm_resume, "newest_ranges", lambda *a: listed.append(a) or real_newest(*a))
    src = fake_source(tmp_path, FakePrometheus())
    for minutes in range(5):
        src.sync(now_s=NOW_S + 60 * minutes)
    assert len(listed) == 1
    src.state.path.unlink()
    src.sync(now_s=NOW_S + 300)
    assert len(listed) == 2
    assert stored_times(tmp_path / "lake") == every_scrape(NOW_S - 100, NOW_S + 300)
