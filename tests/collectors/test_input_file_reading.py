"""`reading`: what goes wrong while a reader reads its file is that reader's one line naming the
file (collectors.input_file); the reader's own refusals pass through as they are."""

from __future__ import annotations

import errno
import json

import pytest

from joulehouse.collectors.input_file import reading, regular_file


class OwnError(ValueError):
    pass


def test_a_read_that_fails_is_the_readers_error_naming_the_file(tmp_path):
    (tmp_path / "tariff.json").write_text("{}", encoding="utf-8")
    path = regular_file(tmp_path / "tariff.json", "tariff file", OwnError)
    with pytest.raises(OwnError, match=f"^cannot read tariff file {path}: Input/output error$"):
        with reading(path, "tariff file", OwnError):
            raise OSError(errno.EIO, "Input/output error")  # a disk failing under the read


def test_a_parser_error_says_the_file_is_not_what_was_expected_in_one_line(tmp_path):
    path = tmp_path / "tariff.json"
    path.write_text('{"items": [\n  1,\n', encoding="utf-8")
    with pytest.raises(OwnError, match=f"^tariff file {path} is not JSON: Expecting value: line 3") as raised:
        with reading(path, "tariff file", OwnError, parse_errors=(json.JSONDecodeError,), expected="JSON",
                     encoding="utf-8") as fh:
            json.loads(fh.read())
    assert "\n" not in str(raised.value)


def test_the_readers_own_refusal_and_other_errors_pass_through(tmp_path):
    path = tmp_path / "tariff.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(OwnError, match="^no rate records$"):
        with reading(path, "tariff file", OwnError, parse_errors=(ValueError,), expected="JSON"):
            raise OwnError("no rate records")
    with pytest.raises(KeyError):
        with reading(path, "tariff file", OwnError):
            raise KeyError("items")
