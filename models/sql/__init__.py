"""The models' SQL, one relation or statement per file (see joulehouse.warehouse.sqlio)."""

from __future__ import annotations

from joulehouse.warehouse.sqlio import SqlFiles, quoted_relation  # noqa: F401  (re-exported for the models)

SQL = SqlFiles("joulehouse.models", "sql")
load_sql = SQL.text
