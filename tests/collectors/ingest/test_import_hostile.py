"""nvidia-smi logs as careless and hostile hands make them: two files of one name, a byte that is not
UTF-8, a byte-order mark, numbers too large for their column, clocks that were never set."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.collectors.ingest.nvidia_smi import ingest_nvidia_smi, read_nvidia_smi_csv
from joulehouse.cli.ingest import register

UTC = timezone.utc
NOW = datetime(2026, 1, 10, tzinfo=UTC)
HEADER = "timestamp, index, power.draw [W]\n"


def _log(path: Path, *rows: str, header: str = HEADER) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join(r + "\n" for r in rows))
    return path


def lake_rows(lake: Path) -> list[dict]:
    table = ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table(
        columns=["sampled_at", "gpu_index", "power_w"])
    return sorted(table.to_pylist(), key=lambda r: (r["sampled_at"], r["gpu_index"]))


def test_two_logs_of_the_same_name_on_one_host_and_day_both_stay(tmp_path, lake):
    a = _log(tmp_path / "a" / "gpu.csv", "2026/01/02 00:00:00.000, 0, 100 W", "2026/01/02 00:00:01.000, 0, oops W")
    b = _log(tmp_path / "b" / "gpu.csv", "2026/01/02 05:00:00.000, 1, 200 W", "2026/01/02 05:00:01.000, 1, ?? W")
    first = ingest_nvidia_smi(a, lake=lake, host="h1", now=NOW)
    second = ingest_nvidia_smi(b, lake=lake, host="h1", now=NOW)
    assert [(r["gpu_index"], r["power_w"]) for r in lake_rows(lake)] == [(0, 100.0), (1, 200.0)]
    assert first.quarantine_path != second.quarantine_path
    assert first.quarantine_path.exists() and second.quarantine_path.exists(), "b's import kept a's quarantine"
    _log(a, "2026/01/02 00:00:00.000, 0, 110 W", "2026/01/02 00:00:01.000, 0, 111 W")  # a corrected
    again = ingest_nvidia_smi(a, lake=lake, host="h1", now=NOW)
    assert [(r["gpu_index"], r["power_w"]) for r in lake_rows(lake)] == [(0, 110.0), (0, 111.0), (1, 200.0)]
    assert again.quarantine_path is None and not first.quarantine_path.exists() and second.quarantine_path.exists()
    # the re-import says it replaced, not added (it printed only "wrote ... rows"); the first did not
    assert not [n for n in first.notes + second.notes if "imported before" in n]
    assert ("this log was imported before: its earlier rows (1 day partition(s)) are replaced, not added to"
            in again.notes)


def test_the_same_log_by_another_path_spelling_is_the_same_log(tmp_path, lake, monkeypatch):
    log = _log(tmp_path / "logs" / "gpu.csv", "2026/01/02 00:00:00.000, 0, 100 W")
    ingest_nvidia_smi(log, lake=lake, host="h1", now=NOW)
    monkeypatch.chdir(tmp_path / "logs")
    ingest_nvidia_smi(Path("gpu.csv"), lake=lake, host="h1", now=NOW)
    assert len(lake_rows(lake)) == 1


def test_a_day_the_log_no_longer_covers_loses_its_rows(tmp_path, lake):
    log = _log(tmp_path / "gpu.csv", "2026/01/02 23:59:59.000, 0, 100 W", "2026/01/03 00:00:00.000, 0, 100 W")
    ingest_nvidia_smi(log, lake=lake, host="h1", now=NOW)
    _log(log, "2026/01/02 23:59:59.000, 0, 100 W")  # the wrong second line taken out
    ingest_nvidia_smi(log, lake=lake, host="h1", now=NOW)
    assert [r["sampled_at"].day for r in lake_rows(lake)] == [2]


def test_a_byte_that_is_not_utf8_rejects_its_row_only(tmp_path, lake):
    log = tmp_path / "smi.csv"
    log.write_bytes(HEADER.encode() + b"2026/01/02 00:00:00.000, 0, 100 W\n2026/01/02 00:00:01.000, 0, 10\xff W\n"
                    b"2026/01/02 00:00:02.000, 0, 102 W\n")
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW)
    assert res.good_rows == 2
    assert [(r.line, r.reason) for r in res.rejected] == [(3, "encoding: byte 0xff in field 3 is not UTF-8")]
    [kept] = [json.loads(x) for x in res.quarantine_path.read_text().splitlines()]
    assert kept["text"] == "2026/01/02 00:00:01.000, 0, 10\\xff W" and kept["source_file"] == str(log)


def test_a_byte_order_mark_opening_a_log_is_skipped_and_one_inside_a_row_rejects_it(tmp_path):
    """Two logs cat'ed: the second's header opens with its byte-order mark. Rejected as bad bytes,
    its columns were never read, and where they came in another order the rows after it were
    stored by the first header's (power as temperature)."""
    log = tmp_path / "smi.csv"
    log.write_bytes(b"\xef\xbb\xbf" + HEADER.encode() + b"2026/01/02 00:00:00.000, 0, 100 W\n"
                    + b"\xef\xbb\xbftimestamp, power.draw [W], index\n2026/01/02 00:00:01.000, 101 W, 0\n"
                    + b"2026/01/02 00:00:02.000, 0\xef\xbb\xbf, 102 W\n")
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.good_rows == 2 and res.table.column("power_w").to_pylist() == [100.0, 101.0]
    assert "the file opens with a UTF-8 byte-order mark: skipped" in res.notes
    assert "line 3: a byte-order mark before a header (logs concatenated): skipped" in res.notes
    assert [(r.line, r.reason) for r in res.rejected] == [
        (5, "encoding: a UTF-8 byte-order mark in field 2 (logs concatenated?)")]


@pytest.mark.parametrize("header, value, reason", [
    ("timestamp, index, clocks.sm [MHz]", "9999999999 MHz", "clocks.sm: '9999999999 MHz' is too large for sm_clock_mhz (int32)"),
    ("timestamp, index, memory.used [MiB]", "99999999999999999999999 MiB",
     "memory.used: '99999999999999999999999 MiB' is too large for mem_used_mib (int32)"),
    ("timestamp, index, clocks_event_reasons.active", "0xFFFFFFFFFFFFFFFF",
     "clocks_event_reasons.active: '0xFFFFFFFFFFFFFFFF' is too large for clock_event_reasons (int64)"),
    ("timestamp, index, power.draw [W]", "1" + "0" * 40 + " W", "power.draw: '1" + "0" * 40 + " W' is too large for power_w (float32)"),
])
def test_a_value_too_large_for_its_column_rejects_its_row(tmp_path, header, value, reason):
    log = _log(tmp_path / "smi.csv", f"2026/01/02 00:00:00.000, 0, {value}", "2026/01/02 00:00:01.000, 0, [N/A]",
               header=header + "\n")
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.good_rows == 1 and [(r.line, r.reason) for r in res.rejected] == [(2, reason)]


def test_timestamps_far_from_now_are_rejected_and_make_no_partitions(tmp_path, lake):
    log = _log(tmp_path / "smi.csv", "1970/01/01 00:00:00.000, 0, 100 W", "2099/06/01 00:00:00.000, 0, 100 W",
               "2026/01/10 12:30:00.000, 0, 100 W",  # half a day ahead: a node clock behind the log's, kept
               "2026/01/02 00:00:00.000, 0, 100 W")
    res = ingest_nvidia_smi(log, lake=lake, host="h", now=NOW)
    assert res.good_rows == 2
    assert [r.reason.split(" is ")[1].split(",")[0] for r in res.rejected] == [
        "before 2010-01-01", "more than 1 day after now (2026-01-10T00:00:00+00:00): a clock running ahead?"]
    days = sorted(p.name for p in (lake / "gpu_samples").iterdir())
    assert days == ["date=2026-01-02", "date=2026-01-10"]


def test_the_command_names_the_file_and_line_of_each_kind_of_reject(tmp_path, lake):
    log = tmp_path / "smi.csv"
    log.write_bytes(HEADER.encode() + b"1970/01/01 00:00:00.000, 0, 100 W\n2026/01/02 00:00:01.000, 0, 10\xff W\n")
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h"])
    assert out.exit_code == 0, out.output
    assert f"rejected 1 x encoding (e.g. {log}:3: encoding: byte 0xff in field 3 is not UTF-8)" in out.output
    assert f"rejected 1 x timestamp (e.g. {log}:2: timestamp: 1970-01-01T00:00:00+00:00 is before" in out.output


def test_a_lake_that_cannot_be_written_is_one_line(tmp_path):
    log = _log(tmp_path / "smi.csv", "2026/01/02 00:00:00.000, 0, 100 W")
    (tmp_path / "blocked").write_text("a file where the lake's parent folder should be")
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(log), "--lake", str(tmp_path / "blocked" / "lake"),
                                   "--host", "h"])
    assert out.exit_code == 2
    assert out.output.startswith(f"error: cannot write the import of {log} into the lake {tmp_path}/blocked/lake: ")
    assert len(out.output.strip().splitlines()) == 1


@pytest.mark.parametrize("host", ["../../etc", "a/b", ".."])
def test_a_host_that_cannot_name_a_folder_is_refused_and_leaves_nothing(tmp_path, lake, host):
    """Before: the import was refused, but its ledger in _imports/ already listed the day as landed."""
    log = _log(tmp_path / "gpu.csv", "2026/01/02 00:00:00.000, 0, 100 W")
    with pytest.raises(ValueError, match="cannot name a partition folder"):
        ingest_nvidia_smi(log, lake=lake, host=host, now=NOW)
    assert not any(Path(lake).rglob("*.json")) and not any(Path(lake).rglob("*.parquet"))
    assert not (tmp_path / "etc").exists()


def test_a_file_of_random_bytes_is_called_not_text_in_one_short_line(tmp_path, lake):
    """A 50 MB file of random bytes named its 'header' back: 500 characters of escaped binary."""
    import random

    junk = tmp_path / "junk.csv"
    junk.write_bytes(random.Random(7).randbytes(2_000_000))
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(junk), "--lake", str(lake), "--host", "h"])
    assert out.exit_code == 2 and f"error: {junk} is not a text CSV" in out.output
    assert len(out.output.strip().splitlines()) == 1 and len(out.output) < 300
    assert not list(lake.rglob("*.parquet"))


@pytest.mark.parametrize("odd, said", [("\x07", "a character that is not printable ('\\x07')"),
                                       ("\udcff", "bytes that are not UTF-8 text")])
def test_a_later_header_with_an_odd_character_is_named_by_its_line(tmp_path, odd, said):
    """A BEL in the header of line 3 refused the log as 'its first line holds bytes that are not
    UTF-8 text': the wrong line, and BEL is UTF-8. The header still refuses the log (its rows would
    be read by the wrong columns), in words that say where and what."""
    log = tmp_path / "gpu.csv"
    text = ("timestamp, index, power.draw [W]\n2026/01/02 00:00:00.000, 0, 100 W\n"
            f"timestamp, index, power.draw [W]{odd}\n2026/01/02 00:00:01.000, 0, 101 W\n")
    log.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError) as refused:
        read_nvidia_smi_csv(log, host="h", now=NOW)
    assert str(refused.value).startswith(f"{log} is not a text CSV: line 3, a header, holds {said}; ")


def test_a_text_file_without_the_timestamp_column_shows_a_short_header(tmp_path, lake):
    wide = _log(tmp_path / "wide.csv", "1,2", header=",".join(f"column_{i}_" + "x" * 60 for i in range(50)) + "\n")
    with pytest.raises(Exception, match=r"no 'timestamp' column in header \['column_0_x{31}\.\.\.', .* and 44 more") as caught:
        read_nvidia_smi_csv(wide, host="h", now=NOW)
    assert len(str(caught.value)) < len(str(wide)) + 400  # six names of at most 40 characters, not fifty of 70


def test_a_quote_never_closed_refuses_the_log_instead_of_swallowing_the_rest(tmp_path):
    """The csv module reads an unclosed quote to the end of the file as one field: 1,400 good
    readings below it became one rejected row and the import said 'ok'."""
    from joulehouse.collectors.ingest.nvidia_smi import NvidiaSmiError

    good = [f"2026/01/02 00:{m:02d}:{s:02d}.000, 0, 100 W" for m in range(20) for s in range(60)]
    log = _log(tmp_path / "gpu.csv", *good[:3], '2026/01/02 01:00:00.000, 0,"100 W', *good[3:])
    with pytest.raises(NvidiaSmiError, match=r"line 5 opens a quote that is closed only at line 1202"):
        read_nvidia_smi_csv(log, host="h1", now=NOW)


@pytest.mark.parametrize("header, row, assume_tz, reason", [
    (HEADER, "9999-12-31T23:00:00-05:00, 0, 100 W", "UTC", "beyond the dates a clock can show"),
    (HEADER, "0001-01-01T00:00:00+05:00, 0, 100 W", "UTC", "beyond the dates a clock can show"),
    (HEADER, "9999/12/31 23:00:00.000, 0, 100 W", "America/New_York", "beyond the dates a clock can show"),
    ("timestamp, index, memory.used [MiB]\n", "2026/01/02 00:00:00.000, 0, " + "9" * 309 + " MiB", "UTC",
     "is too large for any reading"),
])
def test_a_row_beyond_any_date_or_number_rejects_that_row_not_the_import(tmp_path, header, row, assume_tz, reason):
    """A year-9999 time with a negative offset is in year 10000 in UTC, and 309 nines are infinity:
    OverflowError, not the ValueError a row's reject is, ended the whole import in a traceback
    (review, helper-87)."""
    log = _log(tmp_path / "smi.csv", row, "2026/01/02 00:00:01.000, 0, [N/A]", header=header)
    res = read_nvidia_smi_csv(log, host="h", now=NOW, assume_tz=assume_tz)
    assert res.good_rows == 1 and len(res.rejected) == 1 and reason in res.rejected[0].reason


@pytest.mark.parametrize("header, row", [
    ("timestamp, index, uuid, power.draw [W]\n", "2026/01/02 00:00:00.000, 0, GPU-a\x00b, 100 W"),
    ("timestamp, index, name, power.draw [W]\n", "2026/01/02 00:00:00.000, 0, H100\x1b[2J, 100 W"),
    (HEADER, "2026/01/02 00:00:00.000, \u0663, 100 W"),   # an Arabic-Indic 3
    (HEADER, "2026/01/02 00:00:00.000, 0, \uff11\uff10\uff10 W"),  # full-width 100
])
def test_identities_with_control_characters_and_digits_of_other_scripts_are_rejected(tmp_path, header, row):
    """nvidia-smi writes ASCII digits and printable names: a uuid holding NUL made a phantom GPU, and
    int() and \\d took other scripts' digits as readings (review, helper-87)."""
    log = _log(tmp_path / "smi.csv", row, "2026/01/02 00:00:01.000, 0, " + ("GPU-a, 100 W" if "uuid" in header
                                                                             else "H100, 100 W" if "name" in header
                                                                             else "100 W"), header=header)
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.good_rows == 1 and [r.line for r in res.rejected] == [2]


def test_the_longest_names_accepted_still_name_files(tmp_path, lake):
    """A 253-character host passed the check, and "host=" made its folder 258 bytes; a log named
    with 230 characters made a lake file name past 255: 'File name too long' (review, helper-87)."""
    log = _log(tmp_path / ("g" * 230 + ".csv"), "2026/01/02 00:00:00.000, 0, 100 W")
    assert ingest_nvidia_smi(log, lake=lake, host="h" * 250, now=NOW).good_rows == 1
    assert len(lake_rows(lake)) == 1
    with pytest.raises(ValueError, match="at most 250 characters"):
        ingest_nvidia_smi(log, lake=lake, host="h" * 251, now=NOW)


def test_of_two_power_columns_the_average_is_the_logs_power_for_every_row(tmp_path):
    """power.draw and power.draw.instant: row by row the first not empty was stored, so an [N/A]
    average took the instant reading, two quantities in one column (review, helper-87)."""
    log = _log(tmp_path / "smi.csv", "2026/01/02 00:00:00.000, 0, 100 W, 5 W", "2026/01/02 00:00:01.000, 0, [N/A], 7 W",
               header="timestamp, index, power.draw [W], power.draw.instant [W]\n")
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.table.column("power_w").to_pylist() == [100.0, None]
    assert any("columns not stored: power.draw.instant" in note for note in res.notes)
