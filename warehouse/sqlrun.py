"""Read-only SQL for people: ad hoc queries, saved queries by name, and relation descriptions.

Whoever can run `joulehouse sql` is treated as a careless or hostile user, so a query runs in a
sandbox (`open_read_only`), enforced by DuckDB itself, not by reading the text:
- one statement per call, and only a read: SELECT (with WITH, VALUES, FROM-first, PIVOT with an
  IN list), DESCRIBE, SHOW, SUMMARIZE (which DuckDB parses as SELECT) and EXPLAIN [ANALYZE] of
  one of those (EXPLAIN ANALYZE runs its statement, so `EXPLAIN ANALYZE COPY ...` would write).
  The check reads DuckDB's parsed statements and the statement executed is the one checked;
- files: only the lake, the warehouse file and the warehouse's folder beside it (`sandbox_paths`:
  `warehouse.duckdb` -> `warehouse/`; never the folder that holds the file, where a deployment
  keeps its keys). `enable_external_access = false` with `allowed_directories`/`allowed_paths`,
  then `lock_configuration`, so no statement can widen it again;
- the database is opened read-only, so a write into it fails even if it got this far;
- resources: a query may use `query_memory_limit` of memory and `query_spill_limit` of disk (in a
  private temporary folder, deleted with the connection) and run `query_timeout_s`, fetching
  included ([warehouse] settings): a careless cross join stops with one line instead of taking
  the memory, disk or hours of the host the daily run shares. DuckDB's binder and optimizer never
  check for the interrupt; `joulehouse sql` ends its own process where they run past the limit
  (joulehouse/cli/query_process.py).

Results are fetched in batches (`fetchmany`), never all at once, so a query over the whole lake
prints without holding its result in memory. Parameters are bound (`$day` in the SQL, given as
`day=2026-01-02`), never pasted into the text; their names match case-insensitively, as DuckDB
binds them (`$Day` is `$day`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from joulehouse.warehouse.catalog import LAYER_TITLES, public_by_layer, relation, saved_queries
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.readings import follow_moved_files
from joulehouse.warehouse.settings import WarehouseSettings

BATCH_ROWS = 2048


class QueryError(ValueError):
    """A query, its parameters or a saved-query name is wrong; the message says what to pass."""


class ReadOnlyQueryError(QueryError):
    """The query is not one read (it writes, changes a setting, loads, attaches, or holds several
    statements), or reads a file outside the sandbox; `joulehouse sql` refuses it."""


READ_STATEMENTS = "SELECT, WITH, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE"
_SANDBOX_REFUSAL = "file system operations are disabled by configuration"


@dataclass
class QueryResult:
    """Column names and an iterator over batches of row tuples."""

    columns: list[str]
    batches: Iterator[list[tuple]]
    # raises QueryError once the query's time is past (for what is done with the rows after them)
    check_time: Callable[[], None] = lambda: None


def sandbox_paths(db_path: str | Path, lake: str | None) -> tuple[list[str], list[str]]:
    """(directories, files) a read-only session may open: the lake's datasets (a folder or a URL
    prefix each: the raw views read nothing else of the lake), the warehouse's folder beside its
    file (`warehouse.duckdb` -> `warehouse/`), and the file itself. Absolute, resolved paths:
    DuckDB compares the text of the path a query names. The lake comes from the warehouse file, so
    the lake's root was no bound: a file naming '/' as its lake opened the whole disk."""
    from joulehouse.collectors.schema import DATASETS

    db_file = Path(db_path).expanduser().resolve()
    directories = [str(db_file.with_suffix("")) + "/"]
    if lake:
        directories[:0] = [f"{lake.rstrip('/')}/{dataset}/" for dataset in DATASETS]
    return directories, [str(db_file)]


_TIMEOUT_VARIABLE = "jh_query_timeout_s"
# DuckDB's parser runs before the query's timer and no interrupt reaches it, and its time grows
# faster than the text: 53,000 CTEs in 1 MB parsed for 86 s under a 5 s limit, Ctrl-C unheard.
# 50,000 tokens parse within about a second (8,000 CTEs: 0.96 s; 12,000 UNION branches: 0.15 s).
MAX_QUERY_TOKENS = 50_000


def open_read_only(db_path: str | Path, settings: WarehouseSettings | None = None) -> duckdb.DuckDBPyConnection:
    """Open the warehouse read-only, in the sandbox of the module docstring, with the query limits
    of `settings` (default: the defaults); raw_* views read the lake path stored at the last build."""
    settings = settings or WarehouseSettings()
    con = connect(db_path, None, read_only=True, threads=settings.threads, memory_limit=settings.query_memory_limit)
    follow_moved_files(con)
    spill = tempfile.mkdtemp(prefix="jh-sql-spill-")
    weakref.finalize(con, shutil.rmtree, spill, ignore_errors=True)
    try:
        con.execute("SET temp_directory = ?", [spill])
        con.execute("SET max_temp_directory_size = ?", [settings.query_spill_limit])
        con.execute(f"SET VARIABLE {_TIMEOUT_VARIABLE} = ?", [float(settings.query_timeout_s)])
        lake = con.execute("SELECT getvariable('jh_lake')").fetchone()[0]
        directories, files = sandbox_paths(db_path, lake)
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET allowed_directories = ?", [directories])
        con.execute("SET allowed_paths = ?", [files])
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _is_sandboxed(con: duckdb.DuckDBPyConnection) -> bool:
    locked, external = con.execute(
        "SELECT current_setting('lock_configuration'), current_setting('enable_external_access')").fetchone()
    return bool(locked) and not bool(external)


def _no_set_hint(text: str) -> str:
    """DuckDB's hint to SET a deeper limit is one the sandbox refuses: say what to do instead."""
    return text.replace('Use "SET max_expression_depth TO x" to increase the maximum expression depth.',
                        "Nest less: a CTE or a list function in place of thousands of brackets or operators.")


def read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    """The one read statement of `sql`, as DuckDB parsed it; ReadOnlyQueryError (one line) for
    anything else: several statements, or a statement that is not a read."""
    tokens = len(duckdb.tokenize(sql))
    if tokens > MAX_QUERY_TOKENS:
        raise QueryError(f"the query has {tokens:,} tokens; joulehouse sql parses at most {MAX_QUERY_TOKENS:,}: "
                         "write it with fewer CTEs, UNION branches or terms (a list in a table, a range)")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query does not parse: {_no_set_hint(_first_line(exc))}") from None
    if not statements:
        raise QueryError("the query is empty; give one statement (" + READ_STATEMENTS + ")")
    if len(statements) > 1:
        raise ReadOnlyQueryError(f"the query holds {len(statements)} statements; joulehouse sql runs one at a time")
    statement = statements[0]
    if _kind(statement) is None:
        raise ReadOnlyQueryError(_refusal(statement.query, None))
    if statement.type == duckdb.StatementType.EXPLAIN:
        _explained(con, statement.query)
    elif statement.type == duckdb.StatementType.MULTI:  # a PIVOT that first creates an ENUM of its values
        raise ReadOnlyQueryError("this PIVOT runs several statements (it creates a type of its values); "
                                 "name them instead: PIVOT ... ON column IN ('a', 'b') USING ...")
    elif statement.type != duckdb.StatementType.SELECT:
        raise ReadOnlyQueryError(_refusal(statement.query, statement.type))
    return statement


def _explained(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """Refuse an EXPLAIN whose statement is not a read: EXPLAIN ANALYZE runs it. The statement is
    what follows EXPLAIN and its ANALYZE keyword or (option list), found by DuckDB's tokenizer."""
    tokens = _tokens(text)
    at = 1  # tokens[0] is EXPLAIN
    if at < len(tokens) and tokens[at][1] in ("ANALYZE", "ANALYSE"):
        at += 1
    elif at < len(tokens) and tokens[at][1] == "(":
        depth = 0
        while at < len(tokens):
            depth += {"(": 1, ")": -1}.get(tokens[at][1], 0)
            at += 1
            if depth == 0:
                break
    try:
        inner = con.extract_statements(_after(text, tokens[at][0])) if at < len(tokens) else []
    except duckdb.Error as exc:
        raise QueryError(f"query does not parse: {_first_line(exc)}") from None
    if len(inner) != 1 or _kind(inner[0]) != duckdb.StatementType.SELECT:
        raise ReadOnlyQueryError("EXPLAIN " + (_refusal(inner[0].query, _kind(inner[0])) if len(inner) == 1
                                               else "takes one query: EXPLAIN [ANALYZE] SELECT ..."))


def _kind(statement: duckdb.Statement) -> duckdb.StatementType | None:
    """The statement's type, None for one this Python binding has no name for (UPDATE EXTENSIONS
    raised ValueError, a traceback): never a read."""
    try:
        return statement.type
    except ValueError:
        return None


def _tokens(text: str) -> list[tuple[int, str]]:
    """(position in UTF-8 bytes, upper-cased text) of each token of `text` outside comments, as
    DuckDB's tokenizer splits it. Its positions count bytes: taken as characters, a comment of
    accented letters before ANALYZE moved the statement checked past the one run (an EXPLAIN
    ANALYZE COPY read as a SELECT, and the file written)."""
    raw = text.encode("utf-8")
    found = duckdb.tokenize(text)
    ends = [pos for pos, _ in found[1:]] + [len(raw)]
    return [(pos, raw[pos:end].decode("utf-8", "replace").strip().upper()) for (pos, kind), end in zip(found, ends)
            if kind != duckdb.token_type.comment]


def _after(text: str, byte_position: int) -> str:
    """`text` from the token at `byte_position` (a _tokens position) on."""
    return text.encode("utf-8")[byte_position:].decode("utf-8")


def _refusal(text: str, kind: duckdb.StatementType | None) -> str:
    """One line refusing the statement `text`, named by its own first word (INSTALL parses as LOAD),
    or by its kind where that word is WITH (WITH ... DELETE is a DELETE: WITH is a read's word too)."""
    verb = next((word for _, word in _tokens(text)), "this")
    if verb in ("WITH", "(") and kind is not None:
        verb = f"{kind.name} (after WITH)" if verb == "WITH" else kind.name
    return f"{verb} statements are refused: joulehouse sql is read-only and runs {READ_STATEMENTS}"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _one_line(exc: BaseException) -> str:
    """DuckDB's message on one line: its hint ('Did you mean "x"?') kept, the query's echo and
    caret ('LINE 3: ...' then '^') folded into '(line 3)'."""
    said, where = [], None
    for line in str(exc).strip().splitlines():
        if line.startswith("LINE "):
            where = line.split(":", 1)[0].lower()
            break
        if line.strip():
            said.append(line.strip())
    return (" ".join(said) or type(exc).__name__) + (f" ({where})" if where else "")


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, str] | None = None,
              batch_rows: int = BATCH_ROWS) -> QueryResult:
    """Execute the one read statement `sql` with named parameters `params` (names match
    case-insensitively) on a connection from `open_read_only`; results come back in batches."""
    if not _is_sandboxed(con):
        raise QueryError("run_query takes a connection from open_read_only (the sandboxed, read-only session)")
    statement = read_statement(con, sql)
    given: dict[str, str] = {}
    for name, value in (params or {}).items():
        if name.lower() in given:
            raise QueryError(f"--param {name}: given twice (names match case-insensitively, as $name in the SQL)")
        given[name.lower()] = value
    used = sorted({name.lower() for name in statement.named_parameters})  # parsed once (used_parameters' rule)
    missing = [p for p in used if p not in given]
    if missing:
        raise QueryError(f"the query uses {', '.join('$' + p for p in missing)}; pass "
                         + " ".join(f"--param {p}=VALUE" for p in missing))
    unused = [p for p in given if p not in used]
    if unused:
        raise QueryError(f"--param {', '.join(unused)} not used by the query (it uses: {', '.join(used) or 'none'})")
    limits = _Limits(con)
    try:
        cursor = con.execute(statement, {p: given[p] for p in used}) if used else con.execute(statement)
    except duckdb.PermissionException as exc:
        limits.cancel()
        raise ReadOnlyQueryError(_outside_sandbox(con, exc)) from None
    except duckdb.Error as exc:
        limits.cancel()
        message = str(exc)
        if "read-only" in message or "read only" in message:
            raise ReadOnlyQueryError(
                "the warehouse is opened read-only: this statement would change it; "
                f"joulehouse sql runs {READ_STATEMENTS}"
            ) from None
        raise QueryError(limits.explain(exc) or f"query failed: {_no_set_hint(_one_line(exc))}") from None
    columns = [d[0] for d in cursor.description] if cursor.description else []

    def batches() -> Iterator[list[tuple]]:
        try:
            while rows := cursor.fetchmany(batch_rows):
                yield rows
        except duckdb.Error as exc:
            raise QueryError(limits.explain(exc) or f"query failed: {_first_line(exc)}") from None
        except (OverflowError, ValueError) as exc:  # a value Python cannot hold: a traceback before
            raise QueryError(f"a value of the result cannot be shown ({_first_line(exc)}); cast it to VARCHAR "
                             "in the query") from None
        finally:
            limits.cancel()

    return QueryResult(columns=columns, batches=batches(), check_time=limits.check)


_ACTIVE_LIMITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Limits:
    """The query's wall-time limit, from execution to its last batch fetched (an interrupt when
    it passes), and the one-line messages of the limits a query ran into."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        # a result never fetched to its end leaves its timer running: it must not stop the next query
        if (earlier := _ACTIVE_LIMITS.get(con)) is not None:
            earlier.cancel()
        _ACTIVE_LIMITS[con] = self
        (self.timeout_s,) = con.execute(f"SELECT getvariable('{_TIMEOUT_VARIABLE}')").fetchone()
        self.memory, self.spill = con.execute(
            "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size')").fetchone()
        self.timed_out = threading.Event()
        self._timer = threading.Timer(float(self.timeout_s), self._interrupt, [con])
        self._timer.daemon = True
        self._timer.start()

    def _interrupt(self, con: duckdb.DuckDBPyConnection) -> None:
        self.timed_out.set()
        try:
            con.interrupt()
        except duckdb.Error:
            pass  # closed meanwhile: nothing left to stop

    def cancel(self) -> None:
        self._timer.cancel()

    def check(self) -> None:
        """QueryError once the time is past: for the work after the last fetch (drawing a table of
        500 columns ran 277 s past a 5 s limit, the interrupt having nothing left to stop)."""
        if self.timed_out.is_set():
            raise QueryError(self.timeout_message())

    def timeout_message(self) -> str:
        return timeout_message(self.timeout_s)

    def explain(self, exc: duckdb.Error) -> str | None:
        if isinstance(exc, duckdb.InterruptException) and self.timed_out.is_set():
            return self.timeout_message()
        if isinstance(exc, duckdb.OutOfMemoryException):
            which = ("query_spill_limit = " + self.spill if "max_temp_directory_size" in str(exc)
                     else "query_memory_limit = " + self.memory)
            return f"the query needs more than [warehouse] {which} and was stopped; narrow it or raise the setting"
        return None


def timeout_message(timeout_s: float) -> str:
    """The one line of a query stopped at its time limit."""
    return (f"the query ran past [warehouse] query_timeout_s = {timeout_s:g} s and was stopped; "
            "narrow it (a day, a host) or raise the setting")


def _outside_sandbox(con: duckdb.DuckDBPyConnection, exc: duckdb.Error) -> str:
    """One line for a file the sandbox refused: which file, and what may be read."""
    found = re.search(r'"([^"]*)"', str(exc))
    allowed = con.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
    what = f"{found[1]} is" if found and _SANDBOX_REFUSAL in str(exc) else "the file it names is"
    return (f"the query reads outside the warehouse: {what} not in the lake or the warehouse's own files "
            f"({', '.join(allowed)}); joulehouse sql reads only those")


def saved_query_sql(name: str) -> str:
    """The SQL text of the saved query `name` (warehouse/queries/<name>.sql)."""
    queries = saved_queries()
    if name not in queries:
        raise QueryError(f"no saved query {name!r}; known: {', '.join(queries)}")
    return queries[name].read_text()


def describe(name: str | None = None, extra_dirs: Iterable[str | Path] = ()) -> str:
    """A plain-text description: every public relation (name, kind, grain) grouped by layer, or one
    relation's columns with their units. `extra_dirs`: the SQL folders of later layers (models,
    reports) whose described relations are listed too (see warehouse.catalog)."""
    if name is None:
        lines = ["Public relations (joulehouse sql --describe NAME for columns):"]
        for layer, rs in public_by_layer(extra_dirs).items():
            lines.append(f"{LAYER_TITLES.get(layer, layer)}")
            lines.extend(f"  {r.name:<32} {r.kind:<8} {r.grain}" for r in rs)
        lines.append("Saved queries (joulehouse sql --saved NAME):")
        for q, path in saved_queries().items():
            first = path.read_text().splitlines()[0].removeprefix("--").strip()
            lines.append(f"  {q:<32} {first}")
        return "\n".join(lines)
    try:
        r = relation(name, extra_dirs)
    except KeyError as exc:
        raise QueryError(str(exc.args[0])) from None
    lines = [f"{r.name} ({r.kind}, {r.source}): {r.summary}", f"grain: {r.grain}"]
    if r.notes:
        lines.append(r.notes)
    for c in r.columns:
        lines.append(f"  {c.name:<24} [{c.unit}] {c.meaning}")
    return "\n".join(lines)
