"""The models' SQL, one relation per file; `load_sql(name)` returns a file's text."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent


@cache
def load_sql(name: str) -> str:
    """Text of `models/sql/<name>.sql`; raises FileNotFoundError naming the file."""
    path = SQL_DIR / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no SQL file {path} (expected one of {sorted(p.stem for p in SQL_DIR.glob('*.sql'))})")
    return path.read_text()


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def quoted_relation(name: str) -> str:
    """`name` as a quoted SQL identifier (schema.table allowed); identifiers cannot be bound."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"relation name {name!r} is not a plain identifier (letters, digits, _; optional schema.)")
    return ".".join(f'"{part}"' for part in name.split("."))
