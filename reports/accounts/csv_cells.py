"""Text cells of a reference CSV (grid intensities, prices) parsed into numbers and UTC times, with
one line naming the file, its line, the column and the value where a cell does not parse: polars'
own cast error names none of them."""

from __future__ import annotations

from pathlib import Path

import polars as pl


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
