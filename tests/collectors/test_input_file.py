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
