"""Opening the warehouse: one DuckDB file whose raw_* views read the Parquet lake.

Views cannot take prepared parameters, so the lake path lives in the DuckDB variable `jh_lake`
(`getvariable('jh_lake')` in raw_*.sql); a session that sets none (the plain `duckdb` CLI) reads
the lake the views were last made from, which they hold as a literal (build_sql/lake_view.sql). A writable open stores the path in the one-row table
`jh_meta`, so that a read-only open (the `joulehouse sql` command) can set the variable without
being told where the lake is. The session time zone is UTC: `date_trunc('hour', ...)` and
TIMESTAMPTZ -> DATE casts then follow UTC hours and days, whatever the machine's zone.

A lake on object storage (`s3://bucket/lake`) is read through fsspec: DuckDB's httpfs extension
cannot be installed offline, so the lake's fsspec filesystem (s3fs, configured from the
environment: see collectors.lakefs) is registered with the connection, and every
`read_parquet(getvariable('jh_lake') || ...)` goes through it with the same globs and Hive
partition pruning as on a local folder.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.warehouse.sqlio import quoted_relation, string_literal

META_TABLE = "jh_meta"


class WarehouseError(RuntimeError):
    """The warehouse file or the lake it points to cannot be used as asked."""


def _lake_text(lake: str | Path | None) -> str | None:
    if lake is None:
        return None
    text = str(lake)
    if "://" in text:
        return text.rstrip("/")
    return str(Path(text).expanduser().resolve())


def connect(
    db_path: str | Path,
    lake: str | Path | None,
    *,
    read_only: bool = False,
    threads: int | None = None,
    memory_limit: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse at `db_path` with `getvariable('jh_lake')` set to `lake`.

    `lake` may be None on a read-only open: the path stored by the last writable open is used.
    Loads only built-in extensions (parquet, json, icu); never installs anything.
    """
    db_path = Path(db_path)
    if read_only and not db_path.exists():
        raise WarehouseError(f"warehouse file {db_path} does not exist; build a day first (joulehouse run)")
    if not read_only:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    if db_path.is_dir():
        raise WarehouseError(f"warehouse file {db_path} is a folder; expected a DuckDB file ([warehouse] db_path, --db)")
    try:
        con = _open_read_only(db_path) if read_only else duckdb.connect(str(db_path))
    except duckdb.CatalogException as exc:
        if "in-memory" not in str(exc):
            raise WarehouseError(f"cannot open warehouse file {db_path}: {exc}") from None
        con = None  # a CSV or Parquet file opened read-only: said below
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot open warehouse file {db_path}: {exc}") from None
    # DuckDB opens an existing CSV, Parquet or JSON file as an in-memory database with the file as
    # a view: a build would have run in memory and kept nothing, a query read the file as a table.
    if con is None or con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                                  ).fetchone()[0] is None:
        if con is not None:
            con.close()
        raise WarehouseError(f"warehouse file {db_path} is not a DuckDB database (a data file?); "
                             "give the warehouse's .duckdb file ([warehouse] db_path, --db)")
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute("SET threads = ?", [int(threads)])
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    lake_text = _lake_text(lake)
    if read_only:
        if lake_text is None:
            lake_text = _stored_lake(con)
    else:
        con.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (lake_path VARCHAR, updated_at TIMESTAMPTZ)")
        if lake_text is not None:
            con.execute(f"DELETE FROM {META_TABLE}")
            con.execute(f"INSERT INTO {META_TABLE} VALUES (?, now())", [lake_text])
        else:
            lake_text = _stored_lake(con)
    if lake_text is not None:
        if lakefs.is_url(lake_text):
            register_lake_filesystem(con, lake_text)
        con.execute("SET VARIABLE jh_lake = ?", [lake_text])
    return con


# Names an attached database cannot take: DuckDB's own catalogs.
_RESERVED_CATALOGS = {"memory", "system", "temp", "main"}


def _open_read_only(db_path: Path) -> duckdb.DuckDBPyConnection:
    """A private in-memory session with the file attached read-only under its usual name (its
    stem) and in use. duckdb.connect(path, read_only=True) hands back the database this process
    already holds open for that path: a notebook holding the warehouse kept every later read-only
    step of the same process (validate_data, the report, the export) on the replaced file, and the
    checks validated the old day. ATTACH opens the file as it is now."""
    con = duckdb.connect(":memory:")
    stem = db_path.stem
    plain = stem.isidentifier() and stem.isascii() and stem.lower() not in _RESERVED_CATALOGS
    name = quoted_relation(stem if plain else "warehouse")
    try:
        con.execute(f"ATTACH {string_literal(str(db_path))} AS {name} (READ_ONLY)")
        con.execute(f"USE {name}")
    except BaseException:
        con.close()
        raise
    return con


def register_lake_filesystem(con: duckdb.DuckDBPyConnection, lake: str) -> None:
    """Let `con` read the object-store `lake` (a URL) through its fsspec filesystem."""
    try:
        fs = lakefs.filesystem(lake)
    except ImportError as exc:
        raise WarehouseError(str(exc)) from None
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if not any(con.filesystem_is_registered(p) for p in protocols):
        con.register_filesystem(fs)


def _stored_lake(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        row = con.execute(f"SELECT lake_path FROM {META_TABLE} LIMIT 1").fetchone()
    except duckdb.CatalogException:
        return None
    return row[0] if row else None

