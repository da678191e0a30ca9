"""The DuckDB SQL files rendered as Spark SQL with sqlglot: one source for both engines.

warehouse/spark_engine.py runs the warehouse's own relations (warehouse/sql/*.sql, DuckDB's
dialect) on Spark: each file is parsed by sqlglot as DuckDB, rewritten by the rules below where
sqlglot has no translation of its own, and written as Spark SQL. Nobody edits a Spark copy, so the
two engines cannot drift apart; a change to a DuckDB file reaches Spark on the next run.

The rules (each a function of the parsed tree; REWRITES lists them):
- epoch_us(t) -> unix_micros(t); epoch(t) -> unix_micros(t) / 1e6 (sqlglot writes Spark's
  unix_timestamp, which drops the fraction of a second that DuckDB's epoch() keeps);
- to_seconds(x) (an INTERVAL of x seconds) -> make_dt_interval(0, 0, 0, x);
- isfinite(x) -> NOT (isnan(x) OR abs(x) = 'Infinity'): NULL stays NULL, as in DuckDB;
- bitstring_agg(x, lo, hi), counted with bit_count(), -> collect_set(x) counted with size(): both
  count the distinct values of x (DuckDB sets one bit per value, Spark keeps the set);
- to_timestamp(s) -> timestamp_seconds(s) (sqlglot's from_unixtime round trip drops fractions);
- now() -> current_timestamp();
- `WITH x AS [NOT] MATERIALIZED (...)` -> `WITH x AS (...)`: a hint to DuckDB's planner (which copies
  a CTE with several readers unless told not to); Spark plans CTEs its own way;
- a file read in FROM (read_csv, read_parquet) -> the temp view the caller registered for it:
  on Spark the engine, not the SQL, opens files;
- getvariable('name') -> the bound parameter :name. A DuckDB view takes no bound parameters, so
  a view's file reads values bound with SET VARIABLE (sqlio.set_variables); on Spark the same
  value is bound to the statement under the variable's name;
- a call of a DuckDB macro (CREATE MACRO f(a, b) AS (expr), a file of the same folder named in
  `macros`) -> its expression with the call's arguments in place of its parameters: Spark has no
  SQL macros, and the macro stays the one definition (models/sql/power_dynamic_ratio.sql, shared
  by the fit and every prediction).
A DuckDB function that sqlglot does not know and no rule covers is an error naming the file and
the function (SparkDialectError), not a statement that fails later inside Spark: write the
construct so both engines accept it, or add a rule here.

Parameters stay bound: DuckDB's `$name` becomes Spark's `:name`; `parameters()` lists them.
Constructs that sqlglot cannot carry to Spark are written in the DuckDB files so both engines read
them alike: UNION ALL with the columns in one order (Spark SQL has no BY NAME), a QUALIFY over
named columns (sqlglot's subquery for it repeats the computed columns after a *). One difference
is left: DuckDB keeps FLOAT op literal as FLOAT (util_gpu_pct / 100.0), Spark widens it to DOUBLE,
so such a feature differs in its eighth digit; the power fit's sums agree within 1e-6 relative
(tests/warehouse/test_spark_engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from joulehouse.warehouse.sqlio import SqlFiles

# Functions sqlglot parses as unknown (exp.Anonymous) that Spark has under the same name with the
# same meaning, after the rules below have run (they emit the first two; bit_count of an integer
# counts its set bits in both).
SPARK_FUNCTIONS = frozenset({"MAKE_DT_INTERVAL", "TIMESTAMP_SECONDS", "BIT_COUNT"})
FILE_READERS = {exp.ReadCSV: "read_csv", exp.ReadParquet: "read_parquet"}


class SparkDialectError(ValueError):
    """A DuckDB statement has no Spark translation; the message names the file and the construct."""


def _function_name(node: exp.Expression) -> str:
    return node.name.upper() if isinstance(node, exp.Anonymous) else ""


def _epoch(tree: exp.Expression) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        if _function_name(node) == "EPOCH_US":
            return exp.UnixMicros(this=node.expressions[0])
        if isinstance(node, exp.TimeToUnix):
            micros = exp.UnixMicros(this=node.this)
            return exp.Paren(this=exp.Div(this=micros, expression=exp.Literal.number("1e6")))
        return node
    return tree.transform(rule)


def _to_seconds(tree: exp.Expression) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        if _function_name(node) == "TO_SECONDS":
            zero = exp.Literal.number(0)
            return exp.Anonymous(this="MAKE_DT_INTERVAL", expressions=[zero, zero.copy(), zero.copy(),
                                                                        node.expressions[0]])
        return node
    return tree.transform(rule)


def _isfinite(tree: exp.Expression) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        if _function_name(node) == "ISFINITE":
            x = node.expressions[0]
            infinite = exp.EQ(this=exp.Abs(this=x.copy()),
                              expression=exp.cast(exp.Literal.string("Infinity"), "DOUBLE"))
            return exp.Paren(this=exp.Not(this=exp.Paren(this=exp.Or(this=exp.IsNan(this=x.copy()),
                                                                          expression=infinite))))
        return node
    return tree.transform(rule)


def _bitstring_counts(tree: exp.Expression) -> exp.Expression:
    # The aggregate is named in one CTE and counted in another: rewrite bit_count() only over
    # the names a bitstring_agg was given, so a bit_count of an integer keeps its meaning.
    names = {alias.alias for alias in tree.find_all(exp.Alias)
             if any(_function_name(f) == "BITSTRING_AGG" for f in alias.find_all(exp.Anonymous))}

    def rule(node: exp.Expression) -> exp.Expression:
        if _function_name(node) == "BITSTRING_AGG":
            return exp.ArrayUniqueAgg(this=node.expressions[0])
        if _function_name(node) == "BIT_COUNT" and isinstance(node.expressions[0], exp.Column) \
                and node.expressions[0].name in names:
            return exp.ArraySize(this=node.expressions[0])
        return node
    return tree.transform(rule)


def _to_timestamp(tree: exp.Expression) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.UnixToTime) and node.args.get("scale") is None:
            return exp.Anonymous(this="TIMESTAMP_SECONDS", expressions=[node.this])
        return node
    return tree.transform(rule)


def _now(tree: exp.Expression) -> exp.Expression:
    return tree.transform(lambda node: exp.CurrentTimestamp() if _function_name(node) == "NOW" and not node.expressions
                          else node)


def _cte_materialization(tree: exp.Expression) -> exp.Expression:
    for cte in tree.find_all(exp.CTE):
        cte.set("materialized", None)  # DuckDB's planning hint; Spark's parser has no such clause
    return tree


REWRITES: tuple[Callable[[exp.Expression], exp.Expression], ...] = (
    _epoch, _to_seconds, _isfinite, _bitstring_counts, _to_timestamp, _now, _cte_materialization,
)


def _variables(tree: exp.Expression, where: str) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        if _function_name(node) == "GETVARIABLE":
            name = node.expressions[0] if len(node.expressions) == 1 else None
            if not (isinstance(name, exp.Literal) and name.is_string):
                raise SparkDialectError(f"{where}: getvariable() needs one variable name as a string literal "
                                        f"to become a bound parameter: {node.sql(dialect='duckdb')}")
            return exp.Placeholder(this=name.this)
        return node
    return tree.transform(rule)


class Macro:
    """A DuckDB scalar macro (`CREATE [OR REPLACE] [TEMP] MACRO name(params) AS (expr)`), to inline."""

    def __init__(self, duckdb_sql: str, where: str) -> None:
        try:
            tree = sqlglot.parse_one(duckdb_sql, read="duckdb")
        except SqlglotError as exc:
            raise SparkDialectError(f"{where}: sqlglot cannot read the macro: {str(exc).splitlines()[0]}") from None
        if not (isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "MACRO"
                and isinstance(tree.this, exp.UserDefinedFunction)):
            raise SparkDialectError(f"{where}: expected one CREATE MACRO name(params) AS (expression)")
        self.name = tree.this.this.name
        self.params = [p.name for p in tree.this.expressions]
        self.body = tree.expression
        self.where = where

    def inline(self, call: exp.Expression, where: str) -> exp.Expression:
        args = call.expressions
        if len(args) != len(self.params):
            raise SparkDialectError(f"{where}: {self.name}() takes {len(self.params)} arguments "
                                    f"({', '.join(self.params)}; {self.where}), given {len(args)}")
        given = dict(zip(self.params, args))

        def rule(node: exp.Expression) -> exp.Expression:
            # a bare name in the body is a parameter; a qualified one (t.x) is not
            if isinstance(node, exp.Column) and not node.table and node.name in given:
                arg = given[node.name].copy()
                return arg if isinstance(arg, (exp.Column, exp.Literal, exp.Paren)) else exp.Paren(this=arg)
            return node
        body = self.body.copy().transform(rule)
        return body if isinstance(body, exp.Paren) else exp.Paren(this=body)


def _macros(tree: exp.Expression, macros: Mapping[str, Macro], where: str) -> exp.Expression:
    by_name = {name.upper(): macro for name, macro in macros.items()}

    def rule(node: exp.Expression) -> exp.Expression:
        macro = by_name.get(_function_name(node))
        return macro.inline(node, where) if macro is not None else node
    return tree.transform(rule)


def _file_readers(tree: exp.Expression, views: Mapping[str, str], where: str) -> exp.Expression:
    def rule(node: exp.Expression) -> exp.Expression:
        reader = FILE_READERS.get(type(node.this)) if isinstance(node, exp.Table) else None
        if reader is not None:
            if reader not in views:
                raise SparkDialectError(f"{where}: reads a file with {reader}(); on Spark the engine "
                                        f"registers a view for it (views={{'{reader}': ...}})")
            return exp.Table(this=exp.to_identifier(views[reader]), alias=node.args.get("alias"))
        return node
    return tree.transform(rule)


def _check_functions(tree: exp.Expression, where: str) -> None:
    unknown = sorted({f.name for f in tree.find_all(exp.Anonymous) if f.name.upper() not in SPARK_FUNCTIONS})
    if unknown:
        raise SparkDialectError(f"{where}: no Spark translation for DuckDB function(s) {', '.join(unknown)}; "
                                "write them so both engines accept them, or add a rule to warehouse/spark_dialect.py")


def spark_sql(duckdb_sql: str, where: str = "statement", views: Mapping[str, str] | None = None,
              macros: Mapping[str, Macro] | None = None) -> str:
    """The one statement in `duckdb_sql` (DuckDB's dialect) as Spark SQL; `views` maps a file
    reader (read_csv...) to the temp view that stands for it, `macros` a DuckDB macro's name to its
    definition (inlined). SparkDialectError names `where`."""
    try:
        statements = [s for s in sqlglot.parse(duckdb_sql, read="duckdb") if s is not None]
    except SqlglotError as exc:
        raise SparkDialectError(f"{where}: sqlglot cannot read it as DuckDB SQL: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise SparkDialectError(f"{where}: expected one statement, found {len(statements)}")
    tree = _macros(statements[0], macros or {}, where)  # first: a macro's body gets the rules too
    tree = _variables(tree, where)
    for rewrite in REWRITES:
        tree = rewrite(tree)
    tree = _file_readers(tree, views or {}, where)
    _check_functions(tree, where)
    try:
        return tree.sql(dialect="spark", pretty=True, comments=False, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise SparkDialectError(f"{where}: sqlglot cannot write it for Spark: {str(exc).splitlines()[0]}") from None


def parameters(spark_text: str) -> list[str]:
    """The bound parameters (`:name`) a Spark statement uses, sorted."""
    return sorted({p.name for p in sqlglot.parse_one(spark_text, read="spark").find_all(exp.Placeholder)})


class SparkStatements:
    """The Spark rendering of one folder of DuckDB `.sql` files, rendered once per process;
    `macros` names the folder's macro files (CREATE MACRO) whose calls are inlined."""

    def __init__(self, files: SqlFiles, views: Mapping[str, str] | None = None, macros: tuple[str, ...] = ()) -> None:
        self.files, self.views, self.macro_files = files, dict(views or {}), macros
        self._texts: dict[str, str] = {}
        self._macros: dict[str, Macro] | None = None

    def macros(self) -> dict[str, Macro]:
        if self._macros is None:
            found = [Macro(self.files.body(name), f"{self.files.folder}/{name}.sql") for name in self.macro_files]
            self._macros = {macro.name: macro for macro in found}
        return self._macros

    def text(self, name: str) -> str:
        if name not in self._texts:
            where = f"{self.files.folder}/{name}.sql"
            self._texts[name] = spark_sql(self.files.body(name), where, self.views, self.macros())
        return self._texts[name]
