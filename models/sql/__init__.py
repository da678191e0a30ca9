"""The models' SQL, one relation per file; `load_sql(name)` returns a file's text."""

from __future__ import annotations

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
