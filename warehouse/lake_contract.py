"""What the build requires of the lake's files, and the typed stand-ins that make the rest optional.

The contract (ARCHITECTURE.md, "The lake") is what the warehouse requires, no more: per dataset the
columns of `collectors.schema.REQUIRED_COLUMNS` (and one of each `REQUIRED_ONE_OF` group); every
other documented column may be missing from a file (NULL), files of one day may differ in their
optional and extra columns, and a file written by another tool builds like the writer's own.
`jh_contract_<dataset>` is a typed, empty view of the documented columns: the raw_* views and the
build's day view put it first in a UNION ALL BY NAME with the files, so a column no file has is
still there, NULL, with its documented type. A file that lacks a required column stops the day
with one line naming the file and the column (`check_required`).

The raw_* views read the files with union_by_name, which opens every file's footer when a query
is bound, so a build narrows them to the partitions it reads (`narrowed`): the DuckDB variable
`jh_build_files_<dataset>` holds the day's files, or an empty typed stand-in file where there are
none (read_parquet refuses an empty list), and is NULL again after the build. The views are also
created against the stand-ins (`stand_in_files`): creating a view binds it.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from joulehouse.collectors.schema import DATASETS, PARTITION_HOST_COLUMN, REQUIRED_COLUMNS, REQUIRED_ONE_OF
from joulehouse.warehouse.sqlio import SqlFiles, string_literal

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")
DUCK_TYPES = {
    "timestamp[us, tz=UTC]": "TIMESTAMPTZ", "string": "VARCHAR", "int8": "TINYINT",
    "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "float": "FLOAT",
    "double": "DOUBLE", "bool": "BOOLEAN",
}


class LakeContractError(ValueError):
    """A lake file lacks a column the warehouse requires; the message names the file and the column."""


def contract_view(dataset: str) -> str:
    """The name of the typed, empty stand-in of `dataset`'s documented columns (and `date`)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(DATASETS)}")
    return f"jh_contract_{dataset}"


def lake_view(dataset: str) -> str:
    """The name of the view over `dataset`'s files read by the contract: every documented column
    (NULL where a file lacks it) and any extra ones, the whole lake or the build's narrowed files."""
    contract_view(dataset)
    return f"jh_lake_{dataset}"


def ensure_contract_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create jh_contract_<dataset> and jh_lake_<dataset> for every dataset, from
    collectors/schema.py. The text is generated: the column names and types come from the schema
    and the dataset names from its keys (the code's own allow-list); jh_lake_* from one template
    (build_sql/lake_view.sql), so every raw_* view reads its files the same way."""
    template = BUILD_SQL.text("lake_view")
    # the lake the views are made from, as a literal (a view takes no parameters): what they read
    # where no jh_lake is set, as in a plain `duckdb` session on the published file
    (lake,) = con.execute("SELECT getvariable('jh_lake')").fetchone()
    fallback = "NULL::VARCHAR" if lake is None else string_literal(str(lake))
    for dataset, schema in DATASETS.items():
        cols = [f'CAST(NULL AS {DUCK_TYPES[str(f.type)]}) AS "{f.name}"' for f in schema]
        cols.append("CAST(NULL AS DATE) AS date")
        # every timestamp column of the contract is required, so each file has it: cast in the
        # files' own SELECT, a file in nanoseconds (pandas' default) or without a time zone reads
        # as the writer's TIMESTAMPTZ (a no-op, elided, where every file is the writer's)
        casts = [f'CAST("{f.name}" AS TIMESTAMPTZ) AS "{f.name}"' for f in schema
                 if DUCK_TYPES[str(f.type)] == "TIMESTAMPTZ" and f.name in REQUIRED_COLUMNS[dataset]]
        con.execute(f"CREATE OR REPLACE VIEW {contract_view(dataset)} AS SELECT {', '.join(cols)} WHERE false")
        con.execute(f"CREATE OR REPLACE VIEW {lake_view(dataset)} AS "
                    + template.replace("{dataset}", dataset).replace("{contract_view}", contract_view(dataset))
                    .replace("{timestamp_casts}", f" REPLACE ({', '.join(casts)})" if casts else "")
                    .replace("{lake_fallback}", fallback))  # last: a path's own braces are left as they are


def build_dates(day: dt.date) -> list[dt.date]:
    """The date= partitions a build of `day` reads: the day and its neighbours (across midnight)."""
    return [day - dt.timedelta(days=1), day, day + dt.timedelta(days=1)]


def day_files(con: duckdb.DuckDBPyConnection, dataset: str, dates: list[dt.date]) -> list[str]:
    """The Parquet files of `dataset` in the date= partitions `dates`, sorted (a listing only)."""
    contract_view(dataset)  # a known dataset: its name goes into a path
    return [f for (f,) in BUILD_SQL.execute(con, "day_files", {"dataset": dataset, "dates": dates}).fetchall()]


def missing_required(dataset: str, columns: set[str]) -> str | None:
    """The first required column (or group, `a or b`) of `dataset` that `columns` lacks; None when complete."""
    for name in REQUIRED_COLUMNS[dataset]:
        if name not in columns:
            return name
    for group in REQUIRED_ONE_OF.get(dataset, ()):
        if not columns.intersection(group):
            return " or ".join(group)
    return None


def check_required(con: duckdb.DuckDBPyConnection, dataset: str, files: list[str]) -> None:
    """Raise LakeContractError for the first of `files` that lacks a required column of `dataset`,
    or stores one of its documented columns as another kind of value (power_w as text: the build
    would stop on a binder error naming neither the file nor the column). The host= partition
    counts as the host column (DuckDB reads it from the path)."""
    if not files:
        return
    from_path = {"host"} if PARTITION_HOST_COLUMN[dataset] == "host" else set()
    elements: dict[str, list[tuple]] = {}
    for path, *element in BUILD_SQL.execute(con, "file_columns", {"files": files}).fetchall():
        elements.setdefault(path, []).append(tuple(element))
    stored = {path: _top_level_kinds(rows) for path, rows in elements.items()}
    narrow = {path: _top_level_narrow_floats(rows) for path, rows in elements.items()}
    counters = {f.name for f in DATASETS[dataset] if f.name.endswith("_total") and pa.types.is_integer(f.type)}
    documented = {f.name: _documented_kind(DUCK_TYPES[str(f.type)]) for f in DATASETS[dataset]}
    for path in files:
        columns = stored.get(path, {})
        missing = missing_required(dataset, set(columns) | from_path)
        if missing is not None:
            required = ", ".join([*REQUIRED_COLUMNS[dataset], *(" or ".join(g) for g in REQUIRED_ONE_OF.get(dataset, ()))])
            raise LakeContractError(f"lake file {path} lacks the required column {missing} of {dataset} "
                                    f"(required: {required})")
        for name, kind in columns.items():
            if name in documented and kind not in (documented[name], NOTHING_BUT_NULL):
                raise LakeContractError(f"lake file {path}: column {name} of {dataset} is stored as {kind}, "
                                        f"expected {documented[name]}")
        for name in sorted(counters & narrow.get(path, set())):
            # one such file made DuckDB read the counter of every file of the day as a 32-bit float
            # (union_by_name widens BIGINT and FLOAT to FLOAT): 2e13 mJ counters off by 0.2%
            raise LakeContractError(f"lake file {path}: counter {name} of {dataset} is stored as a 16- or 32-bit "
                                    "float, which cannot hold a counter's value to the unit; expected an integer "
                                    "or a 64-bit float")


# A column another tool wrote with no value at all (pyarrow's null type, as pandas writes a column of
# None): any documented column may hold it. Read as "a number", it stopped every build of the day.
NOTHING_BUT_NULL = "nothing but NULL"


def _top_level(elements: list[tuple]) -> Iterator[tuple]:
    """A file's top-level columns' schema elements (name, type, num_children, converted, logical),
    from all of them in footer order: the root first, then depth first, so a nested struct's own
    `host` is never taken for the file's."""
    pending = [elements[0][2]] if elements else []  # children still to come, per open group; the root's first
    for element in elements[1:]:
        if len(pending) == 1:  # a child of the root: a column
            yield element
        pending[-1] -= 1
        if element[2]:
            pending.append(element[2])
        while len(pending) > 1 and pending[-1] == 0:
            pending.pop()


def _top_level_kinds(elements: list[tuple]) -> dict[str, str]:
    """{column: what it holds} of a file's top-level columns (_stored_kind's words)."""
    kinds: dict[str, str] = {}
    for name, physical, _, converted, logical in _top_level(elements):
        kinds.setdefault(name, _stored_kind(physical, converted, logical))
    return kinds


def _top_level_narrow_floats(elements: list[tuple]) -> set[str]:
    """The file's top-level columns stored as 16- or 32-bit floats."""
    return {name for name, physical, _, _, logical in _top_level(elements)
            if physical == "FLOAT" or (logical or "").startswith("Float16Type")}


def _stored_kind(physical: str | None, converted: str | None, logical: str | None) -> str:
    """What a Parquet column holds, in the words the contract's check uses."""
    converted, logical = converted or "", logical or ""
    if logical.startswith("NullType"):
        return NOTHING_BUT_NULL
    if physical is None:
        return "a nested value (list or struct)"
    if converted == "DECIMAL" or logical.startswith(("DecimalType", "Float16Type")):
        return "a number"  # a float16 is a 2-byte FIXED_LEN_BYTE_ARRAY that DuckDB reads as FLOAT
    if physical in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
        return "text" if converted in ("UTF8", "ENUM", "JSON") or logical.startswith(("StringType", "EnumType")) else "bytes"
    if physical == "INT96" or converted.startswith("TIMESTAMP") or logical.startswith("TimestampType"):
        return "a timestamp"
    if converted == "DATE" or logical.startswith("DateType"):
        return "a date"
    if converted.startswith("TIME") or logical.startswith("TimeType"):
        return "a time of day"
    return "a true/false value" if physical == "BOOLEAN" else "a number"


def _documented_kind(duck_type: str) -> str:
    """The stored kind (_stored_kind's words) a documented column of DuckDB type `duck_type` is read from."""
    return {"TIMESTAMPTZ": "a timestamp", "VARCHAR": "text", "BOOLEAN": "a true/false value"}.get(duck_type, "a number")


def files_variable(dataset: str) -> str:
    """The DuckDB variable that narrows raw_<dataset> to a list of files (NULL: the whole lake)."""
    contract_view(dataset)
    return f"jh_build_files_{dataset}"


def stand_in_files(folder: Path) -> dict[str, str]:
    """An empty Parquet file per dataset with its documented schema, under `folder` in the lake's
    layout (the view's Hive partitions then bind as they do over the lake); dataset -> path."""
    paths = {}
    for dataset, schema in DATASETS.items():
        part = folder / dataset / "date=1970-01-01" / "host=_stand-in"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(schema.empty_table(), part / "stand-in.parquet")
        paths[dataset] = str(part / "stand-in.parquet")
    return paths


@contextmanager
def narrowed(con: duckdb.DuckDBPyConnection, files: Mapping[str, list[str]]) -> Iterator[None]:
    """Within the block, raw_<dataset> reads only `files[dataset]` (for every dataset); after it,
    the whole lake again."""
    try:
        for dataset, paths in files.items():
            con.execute(f"SET VARIABLE {files_variable(dataset)} = ?", [list(paths)])
        yield
    finally:
        for dataset in files:
            con.execute(f"SET VARIABLE {files_variable(dataset)} = NULL")


@contextmanager
def reading_own_day(con: duckdb.DuckDBPyConnection, day: dt.date, dataset: str = "gpu_samples") -> Iterator[None]:
    """Within the block, raw_<dataset> reads only `day`'s own date= partition (an empty stand-in
    where it has no file): a check of the day opens no other day's files. Over the whole lake, one
    stray file in an old day (no host= folder, a date=latest folder) failed every later day's gate.
    A session without a lake (raw_<dataset> a table someone made) is left as it is."""
    with reading_partitions(con, dataset, day, day, check=False):
        yield


@contextmanager
def reading_partitions(con: duckdb.DuckDBPyConnection, dataset: str, first: dt.date | None, last: dt.date,
                       *, check: bool = True) -> Iterator[None]:
    """Within the block, raw_<dataset> reads only the date= partitions `first`..`last` (every one
    when `first` is None; an empty stand-in where they hold no file), each file checked against
    the contract first (check_required) unless `check` is False: for a step that reads raw_<dataset>
    beyond the days the build checked (the jobs of the last job_max_days, the agent's audit of the
    last weeks). Unchecked over the whole lake, a jobs file without ended_at anywhere in its history
    failed the view's binding naming no file, one in the window built and its job vanished from the
    facts, and one with started_at as text stopped the power fit on a cast. A session without a
    lake (raw_<dataset> a table someone made) is left as it is."""
    if con.execute("SELECT getvariable('jh_lake')").fetchone()[0] is None:
        yield
        return
    contract_view(dataset)  # a known dataset: its name goes into a path
    if first is None:
        files = [f for (f,) in BUILD_SQL.execute(con, "dataset_files", {"dataset": dataset}).fetchall()]
    else:
        files = day_files(con, dataset, [first + dt.timedelta(days=k) for k in range((last - first).days + 1)])
    if check:
        check_required(con, dataset, files)
    if files:
        with narrowed(con, {dataset: files}):
            yield
        return
    with tempfile.TemporaryDirectory(prefix="jh-stand-in-") as folder:
        with narrowed(con, {dataset: [stand_in_files(Path(folder))[dataset]]}):
            yield
