"""collectors.input_file: what is not a regular file is refused before it is opened, and a line
or a document past its bound is refused there, in one line, without reading the rest."""

from __future__ import annotations

import pytest

from joulehouse.collectors.input_file import InputFileError, read_bytes_at_most, regular_file, text_lines


class OwnError(ValueError):
    pass


def test_a_device_a_folder_and_a_missing_path_are_refused_by_what_they_are(tmp_path):
    with pytest.raises(OwnError, match=r"^log /dev/null is not a regular file \(a device, pipe or socket\)"):
        regular_file("/dev/null", "log", OwnError)
    with pytest.raises(InputFileError, match="is a folder; expected a file"):
        regular_file(tmp_path, "log")
    with pytest.raises(InputFileError, match="nope.csv does not exist"):
        regular_file(tmp_path / "nope.csv", "log")


def test_lines_up_to_the_bound_stream_and_a_longer_one_is_refused_naming_it(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(b"a,b\r\n" + b"x" * 10 + b"\r\n" + b"y" * 11 + b"\n" + b"z\n")
    seen = []
    with pytest.raises(OwnError, match=r"log.csv: line 3 is longer than 10 characters"):
        with text_lines(path, "log", 10, OwnError) as lines:
            seen.extend(lines)
    assert seen == ["a,b\r\n", "x" * 10 + "\r\n"]


def test_a_file_without_newlines_is_refused_at_the_bound_not_read_whole(tmp_path):
    path = tmp_path / "one-line.csv"
    path.write_bytes(b"x" * 300_000)
    with pytest.raises(InputFileError, match="line 1 is longer than 1000"):
        with text_lines(path, "log", 1000) as lines:
            next(lines)


def test_a_document_past_its_bound_is_refused(tmp_path):
    path = tmp_path / "key.pem"
    path.write_bytes(b"k" * 2048)
    assert read_bytes_at_most(path, "key", 2048) == b"k" * 2048
    with pytest.raises(OwnError, match="key .*key.pem is 2 KiB; expected at most 1 KiB"):
        read_bytes_at_most(path, "key", 1024, OwnError)
    with pytest.raises(InputFileError, match="not a regular file"):
        read_bytes_at_most("/dev/zero", "key", 1024)


def _fifo_after_the_check(monkeypatch, module, path):
    """`module.regular_file` checks `path`, then a FIFO takes its place (a hostile user's swap)."""
    import os

    real_check = module.regular_file

    def check_then_swap(*args, **kwargs):
        checked = real_check(*args, **kwargs)
        path.unlink()
        os.mkfifo(path)
        return checked

    monkeypatch.setattr(module, "regular_file", check_then_swap)


def _within(seconds, read):
    """What `read()` raised, run in a thread; a read still blocked after `seconds` fails the test
    (the thread stays blocked on the FIFO: a daemon, it does not hold pytest)."""
    import threading

    outcome = []

    def run():
        try:
            read()
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"the read was still blocked after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("reader", ["document", "lines", "price file", "grid file", "sweep file"])
def test_a_fifo_swapped_in_after_the_check_is_refused_not_waited_on(tmp_path, monkeypatch, reader):
    """The readers checked the path, then opened it plainly: a FIFO put there in between held the
    command on its open until someone wrote to it (for good, under a timer)."""
    from joulehouse.collectors import input_file
    from joulehouse.models import sweeps
    from joulehouse.reports.accounts import csv_cells, grid, prices

    path = tmp_path / "input.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    module, read = {  # the module whose check the reader calls (grid and price files: csv_cells.text_csv)
        "document": (input_file, lambda: read_bytes_at_most(path, "key", 1000)),
        "lines": (input_file, lambda: list(text_lines(path, "log", 100).__enter__())),
        "price file": (csv_cells, lambda: prices.load_pjm_lmp_csv(path, "PJM-RTO")),
        "grid file": (csv_cells, lambda: grid._read_csv(path)),
        "sweep file": (sweeps, lambda: sweeps.load_sweeps(path)),
    }[reader]
    _fifo_after_the_check(monkeypatch, module, path)
    raised = _within(5, read)
    assert raised is not None and "not a regular file (replaced while it was opened)" in str(raised)


@pytest.mark.parametrize("reader", ["price file", "grid file", "sweep file"])
def test_a_file_removed_after_the_check_is_the_readers_one_line_error(tmp_path, monkeypatch, reader):
    """The non-blocking open passed FileNotFoundError on as it was (for the agent's fetch, to
    which a missing file is an answer): the price, grid and sweep readers then ended their command
    with a traceback (review, helper-99)."""
    from joulehouse.models import sweeps
    from joulehouse.reports.accounts import csv_cells, grid, prices

    path = tmp_path / "input.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    module, read, error = {  # the module whose check the reader calls
        "price file": (csv_cells, lambda: prices.load_pjm_lmp_csv(path, "PJM-RTO"), prices.PriceFileError),
        "grid file": (csv_cells, lambda: grid._read_csv(path), grid.GridFileError),
        "sweep file": (sweeps, lambda: sweeps.load_sweeps(path), sweeps.SweepError),
    }[reader]
    real_check = module.regular_file

    def check_then_remove(*args, **kwargs):
        checked = real_check(*args, **kwargs)
        path.unlink()
        return checked

    monkeypatch.setattr(module, "regular_file", check_then_remove)
    with pytest.raises(error, match="does not exist"):
        read()
