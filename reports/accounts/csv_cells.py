"""Reference CSVs (grid intensities, prices): read within a size bound, every cell as text, and the
cells parsed into numbers and UTC times, with one line naming the file, its line, the column and
the value where a cell does not parse: polars' own errors name none of them."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from joulehouse.collectors.input_file import reading, regular_file

# A reference CSV is a year of one region's hours or five-minute steps (the shared ones: 0.9 to 4
# MB); one past this is not one (a whole market's nodes, a wrong file), and read whole as text it
# would take several times its size in memory.
MAX_REFERENCE_CSV_BYTES = 256 * 1024 * 1024


def text_csv(path: str | Path, what: str, error: type[Exception]) -> pl.DataFrame:
    """A regular CSV file of at most MAX_REFERENCE_CSV_BYTES (never more read, even if it grows meanwhile),
    every cell as text; a ragged row, an open quote, an empty or non-UTF-8 file raises `error`
    naming the file (polars' own error names none)."""
    max_bytes = MAX_REFERENCE_CSV_BYTES
    path = regular_file(path, what, error, max_bytes)
    with reading(path, what, error, expected="a CSV file that can be read",
                 parse_errors=(pl.exceptions.PolarsError, UnicodeDecodeError)) as fh:
        data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise error(f"{what} {path} grew past {max_bytes / 2**20:g} MiB while it was read; expected at most that")
        return pl.read_csv(io.BytesIO(data), infer_schema=False)


def number(column: str) -> pl.Expr:
    """A finite float; "nan", "inf" and the like parse to NULL, so `parsed` names the cell: one NaN
    hour would make a whole day's carbon or cost NaN, with no error anywhere."""
    value = pl.col(column).cast(pl.Float64, strict=False)
    return pl.when(value.is_finite()).then(value)


def utc_time(column: str, fmt: str | None = None) -> pl.Expr:
    """ISO-8601 with Z or an offset (converted to UTC), or naive in UTC; `fmt`: a strptime format
    of UTC wall times."""
    if fmt is None:
        return pl.col(column).str.to_datetime(time_zone="UTC", time_unit="us", strict=False)
    return pl.col(column).str.strptime(pl.Datetime("us"), fmt, strict=False).dt.replace_time_zone("UTC")


def parsed(path: Path, raw: pl.DataFrame, columns: dict[str, tuple[str | None, pl.Expr]],
           error: type[Exception]) -> pl.DataFrame:
    """`raw` (read with every cell as text) parsed: alias -> (the file's column, its non-strict
    parse; None: nothing to check). A cell that does not parse raises `error`; an empty cell is a
    missing value (NULL)."""
    frame = raw.select(*(expr.alias(alias) for alias, (_, expr) in columns.items()))
    for alias, (source, _) in columns.items():
        if source is None:
            continue
        failed = (raw[source].is_not_null() & frame[alias].is_null()).arg_true()
        if len(failed):
            row = int(failed[0])
            kind = "a number" if frame[alias].dtype == pl.Float64 else "a time (UTC)"
            raise error(f"{path} line {row + 2}: {source} = {raw[source][row]!r} is not {kind}")
    return frame
