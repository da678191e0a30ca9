"""Logs written in local time across a daylight-saving change (America/New_York, 2026: clocks go
forward 2026-03-08 02:00 EST -> 03:00 EDT and back 2026-11-01 02:00 EDT -> 01:00 EST), and logs whose
header comes again part-way through (logs concatenated, nvidia-smi restarted with other fields)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import given, strategies as st

from joulehouse.collectors.ingest.local_time import LogClock, local_timestamp, wall_time
from joulehouse.collectors.ingest.nvidia_smi import NvidiaSmiError, read_nvidia_smi_csv
from joulehouse.collectors.ingest.slurm import read_sacct
from joulehouse.collectors.writer import write_dataset

UTC = timezone.utc
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _smi_log(path, instants: list[datetime], gpus: int = 1) -> list[datetime]:
    """An nvidia-smi log as a New York machine writes it: local wall time, no offset, one row per
    GPU per sweep. Returns the true UTC instant of each row, in the log's order."""
    lines, truth = ["timestamp, index, power.draw [W]"], []
    for at in instants:
        for gpu in range(gpus):
            taken = at + timedelta(milliseconds=3 * gpu)
            lines.append(f"{taken.astimezone(NEW_YORK):%Y/%m/%d %H:%M:%S.%f}"[:-3] + f", {gpu}, {200 + gpu}.00 W")
            truth.append(taken)
    path.write_text("\n".join(lines) + "\n")
    return truth


def _every_minute(first: datetime, last: datetime) -> list[datetime]:
    return [first + timedelta(minutes=m) for m in range(int((last - first).total_seconds() // 60) + 1)]


def test_the_hour_repeated_when_clocks_go_back_keeps_both_passes(tmp_path):
    # 00:30 EDT to 02:30 EST local: 01:00-01:59 is written twice, an hour apart in UTC.
    truth = _smi_log(tmp_path / "smi.csv", _every_minute(datetime(2026, 11, 1, 4, 30, tzinfo=UTC),
                                                         datetime(2026, 11, 1, 7, 30, tzinfo=UTC)), gpus=2)
    result = read_nvidia_smi_csv(tmp_path / "smi.csv", host="h", assume_tz="America/New_York", now=NOW)
    assert result.rejected == []
    assert result.table.column("sampled_at").to_pylist() == truth
    assert any("240 timestamps in an hour America/New_York repeats" in n and "120 read as taken after" in n
               for n in result.notes)


def test_a_log_slightly_out_of_order_in_the_repeated_hour_stays_in_its_pass(tmp_path):
    # 01:30:05 then 01:30:03 (first pass, EDT): a few seconds back is disorder, not the clock going back.
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, power.draw [W]\n2026/11/01 01:30:05.000, 0, 200 W\n"
                   "2026/11/01 01:30:03.000, 0, 201 W\n2026/11/01 01:00:01.000, 0, 202 W\n")
    result = read_nvidia_smi_csv(log, host="h", assume_tz="America/New_York", now=NOW)
    assert result.table.column("sampled_at").to_pylist() == [
        datetime(2026, 11, 1, 5, 30, 5, tzinfo=UTC), datetime(2026, 11, 1, 5, 30, 3, tzinfo=UTC),
        datetime(2026, 11, 1, 6, 0, 1, tzinfo=UTC)]


def test_the_skipped_hour_is_not_a_time_of_the_zone(tmp_path):
    # A New York clock reads 01:59 then 03:00: a log that holds 02:30 was not written in New York.
    truth = _smi_log(tmp_path / "smi.csv", _every_minute(datetime(2026, 3, 8, 6, 30, tzinfo=UTC),
                                                         datetime(2026, 3, 8, 7, 30, tzinfo=UTC)))
    result = read_nvidia_smi_csv(tmp_path / "smi.csv", host="h", assume_tz="America/New_York", now=NOW)
    assert result.rejected == [] and result.table.column("sampled_at").to_pylist() == truth
    with (tmp_path / "smi.csv").open("a") as log:
        log.write("2026/03/08 02:30:00.000, 0, 250 W\n")
    result = read_nvidia_smi_csv(tmp_path / "smi.csv", host="h", assume_tz="America/New_York", now=NOW)
    [rejected] = result.rejected
    assert rejected.line == 63 and "2026-03-08 02:30:00 never happened in America/New_York" in rejected.reason
    assert result.good_rows == 61
    with pytest.raises(ValueError, match="never happened"):
        local_timestamp("2026-03-08T02:00:00", NEW_YORK)


def test_times_with_an_offset_need_no_guess():
    clock = LogClock(NEW_YORK)
    assert clock.utc("2026-11-01T01:30:00-05:00", 0) == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    assert clock.utc("2026-11-01T01:10:00-04:00", 0) == datetime(2026, 11, 1, 5, 10, tzinfo=UTC)
    assert clock.ambiguous == 0


def _lake_read_at(tmp_path, sampled_at: datetime):
    """A lake where node-01's GPU was read once, at `sampled_at`: sacct's nodes map to GPUs by it."""
    lake = tmp_path / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist([
        {"sampled_at": sampled_at, "host": "node-01", "gpu_index": 0, "gpu_uuid": "GPU-0", "power_w": 300.0,
         "source": "nvml"}]))
    return lake


def test_a_slurm_job_starting_in_the_skipped_hour_is_quarantined(tmp_path):
    lake, path = _lake_read_at(tmp_path, datetime(2026, 3, 8, 8, tzinfo=UTC)), tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|User|Account|Partition|State|Start|End|NodeList|AllocTRES\n"
                    "7|x|u|a|p|COMPLETED|2026-03-08T02:15:00|2026-03-08T05:00:00|node-01|gres/gpu=1\n"
                    "8|y|u|a|p|COMPLETED|2026-03-08T03:15:00|2026-03-08T05:00:00|node-01|gres/gpu=1\n")
    result, _ = read_sacct(path, lake=lake, assume_tz="America/New_York", now=NOW)
    [rejected] = result.rejected
    assert rejected.line == 2 and rejected.reason.startswith("Start: 2026-03-08 02:15:00 never happened")
    [row] = result.table.to_pylist()
    assert row["started_at"] == datetime(2026, 3, 8, 7, 15, tzinfo=UTC)


def test_a_header_in_another_order_part_way_through_reads_the_rows_after_it_by_its_columns(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, clocks.sm [MHz], clocks.mem [MHz]\n"
                   "2026/01/01 00:00:00.000, 0, 1410 MHz, 1593 MHz\n"
                   "timestamp, index, clocks.mem [MHz], clocks.sm [MHz], power.draw [W]\n"
                   "2026/01/01 00:00:01.000, 0, 1593 MHz, 1400 MHz, 300 W\n"
                   "timestamp, index, clocks.mem [MHz], clocks.sm [MHz], power.draw [W]\n"
                   "2026/01/01 00:00:02.000, 0, 1593 MHz, 1395 MHz, 310 W\n")
    result = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert result.rejected == []
    assert result.table.column("sm_clock_mhz").to_pylist() == [1410, 1400, 1395]
    assert result.table.column("mem_clock_mhz").to_pylist() == [1593, 1593, 1593]
    assert result.table.column("power_w").to_pylist() == [None, 300.0, 310.0]
    assert "line 3: a new header; the rows after it are read by its columns" in result.notes
    assert "2 header lines after the first (logs concatenated?): read as headers, not rows" in result.notes


def test_a_later_header_in_units_the_column_is_not_stored_in_refuses_the_file(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, power.draw [W]\n2026/01/01 00:00:00.000, 300 W\n"
                   "timestamp, power.draw [kW]\n2026/01/01 00:00:01.000, 0.3 kW\n")
    with pytest.raises(NvidiaSmiError, match=r"line 3: column 'power.draw' is in \[kW\], expected \[W\]"):
        read_nvidia_smi_csv(log, host="h", now=NOW)


def test_slurm_times_in_the_repeated_hour_are_read_as_its_first_pass_and_said_so(tmp_path):
    lake, path = _lake_read_at(tmp_path, datetime(2026, 11, 1, 5, tzinfo=UTC)), tmp_path / "sacct.txt"
    path.write_text("JobID|JobName|User|Account|Partition|State|Start|End|NodeList|AllocTRES\n"
                    "7|x|u|a|p|COMPLETED|2026-11-01T00:15:00|2026-11-01T01:30:00|node-01|gres/gpu=1\n")
    result, _ = read_sacct(path, lake=lake, assume_tz="America/New_York", now=NOW)
    [row] = result.table.to_pylist()
    assert row["ended_at"] == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    assert any(n.startswith("1 Start/End times fall in an hour America/New_York repeats") for n in result.notes)


def _strptime_wall_time(text: str) -> datetime | None:
    """What wall_time gave before its fast path (the two strptime formats, then ISO 8601), but a
    fraction of 7 to 9 digits cut to microseconds (strptime refused it, fromisoformat cuts it)."""
    head, dot, fraction = text.strip().rpartition(".")
    if dot and fraction.isascii() and fraction.isdigit() and 7 <= len(fraction) <= 9:
        text = f"{head}.{fraction[:6]}"
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text.strip(), fmt)
        except ValueError:
            pass
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


@given(st.integers(0, 10_000), st.integers(0, 14), st.integers(0, 33), st.integers(0, 25), st.integers(0, 61),
       st.integers(0, 61), st.sampled_from(["", ".5", ".05", ".123", ".123456", ".1234567", ".123456789",
                                            ".1234567890", "."]),
       st.sampled_from(["", " ", "  "]))
def test_nvidia_smi_times_read_without_strptime_read_as_strptime_reads_them(year, month, day, hour, minute, second,
                                                                            fraction, pad):
    """The fast path gives strptime's instant for every text strptime reads (single-digit fields,
    1..6 fraction digits right-padded), and refuses what strptime refuses (month 13, 24:00, :60)."""
    text = f"{pad}{year:04d}/{month}/{day:02d} {hour}:{minute:02d}:{second:02d}{fraction}{pad}"
    expected = _strptime_wall_time(text)
    if expected is None:
        with pytest.raises(ValueError, match="neither"):
            wall_time(text)
    else:
        assert wall_time(text) == expected


def test_only_ascii_digits_make_a_time_and_an_hour_only_offset_is_an_offset():
    """Fullwidth or Arabic-Indic digits read as a time once strptime was gone (it refused them);
    and '+05' is an offset, where the notes said such times were read in the zone assumed."""
    from joulehouse.collectors.ingest.nvidia_smi_values import is_naive

    fullwidth = "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in "2026/06/11 15:24:31")
    for text in (fullwidth, "2026/06/11 15:24:31.\u0662\u0666\u0669"):
        with pytest.raises(ValueError, match="neither"):
            wall_time(text)
    assert not is_naive("2026-06-11T15:24:31+05") and not is_naive("2026-06-11T15:24:31Z")
    assert is_naive("2026/06/11 15:24:31.269") and is_naive("2026-06-11T15:24:31")


@pytest.mark.parametrize("zone", ["America/New_York", "Australia/Lord_Howe", "Europe/Dublin", "Asia/Kolkata"])
def test_log_clock_remembering_a_minute_s_offsets_reads_every_time_as_the_zone_does(zone):
    """Every 7 s across a year's both changes (Lord Howe moves by 30 minutes; Dublin's winter time is
    its 'negative' DST): the clock's remembered offsets give the zone's own first pass, and refuse
    exactly the skipped times, naming each."""
    tz, clock = ZoneInfo(zone), LogClock(ZoneInfo(zone))
    hours = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=h) for h in range(365 * 24)]
    changes = [at for before, at in zip(hours, hours[1:]) if before.astimezone(tz).utcoffset() != at.astimezone(tz).utcoffset()]
    assert len(changes) == (0 if zone == "Asia/Kolkata" else 2)
    walls = sorted({(start + timedelta(seconds=7 * k)).astimezone(tz).replace(tzinfo=None)
                    for start in changes or hours[:1] for k in range(-1600, 1600)})
    walls += [wall + timedelta(minutes=30) for wall in walls]  # wall times in the hour skipped, too
    skipped = read = 0
    for wall in walls:
        first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        text = f"{wall:%Y/%m/%d %H:%M:%S}"
        if first.astimezone(tz).replace(tzinfo=None) != wall:
            skipped += 1
            with pytest.raises(ValueError, match=f"{wall:%H:%M:%S} never happened in {zone}"):
                clock.utc(text, ("gpu", wall))  # a stream of its own: the first pass is the answer
        else:
            read += 1
            assert clock.utc(text, ("gpu", wall)) == first
    assert read > 3_000 and (skipped > 0) == (zone != "Asia/Kolkata")
