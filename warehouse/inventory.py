"""The site inventory CSV as the build reads it: found (a path or an object-store URL), its
header checked, optional columns it lacks added empty, and every typed value checked, so that a
wrong one fails the day with one line naming the file, the line and the column (DuckDB's cast in
int_inventory.sql named only the value). Used by the DuckDB build and the Spark engine alike."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.warehouse.host_batches import BUILD_SQL

INVENTORY_COLUMNS = (
    "gpu_uuid", "host", "gpu_index", "gpu_model", "rack", "site", "region", "purchased_on",
    "purchase_price_usd", "embodied_kgco2e", "lifetime_years",
)
# Columns an inventory may lack: int_inventory.sql reads them NULL there.
OPTIONAL_INVENTORY_COLUMNS = ("retired_on",)
# What int_inventory.sql casts each typed column to; an empty value is NULL.
# A price or a footprint is a finite number, 0 or more; a lifetime one above 0: a lifetime of 0
# made the day's capital NaN, -4 made it 0 and NaN left it NULL while the day's total counted it 0.
TYPED_COLUMNS = {"gpu_index": "whole number", "purchased_on": "day (YYYY-MM-DD)", "retired_on": "day (YYYY-MM-DD)",
                 "purchase_price_usd": "finite number, 0 or more", "embodied_kgco2e": "finite number, 0 or more",
                 "lifetime_years": "finite number above 0"}
# each kind's parameter of build_sql/inventory_bad_value.sql
_KINDS = {"day (YYYY-MM-DD)": "dates", "finite number, 0 or more": "amounts", "finite number above 0": "lifetimes",
          "whole number": "whole_numbers"}


class InventoryError(RuntimeError):
    """The inventory cannot be used; the message names the file and, for a value, its line and column."""


def inventory_file(path: str, scratch: Path) -> tuple[str, bool]:
    """The inventory CSV to read, checked for its header; an empty one when none is configured.
    An inventory on object storage (a URL) is copied into `scratch` first. A configured path that
    names no file is an error: built without it, every GPU's capital and embodied carbon would come
    from the defaults (+46% on a trial's cost of the day) with nothing saying why."""
    configured = path
    if path and lakefs.is_url(path):
        fs = lakefs.filesystem(path)
        if fs.exists(path):
            local = scratch / "inventory.csv"
            fs.get_file(path, str(local))
            path = str(local)
    if path and not Path(path).is_file():
        raise InventoryError(f"inventory file {configured} ([warehouse] inventory_path) does not exist or is not a file; "
                             "give the site's inventory CSV, or inventory_path = \"\" to build without one")
    if path:
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.reader(fh))  # one row per GPU: read once, small
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InventoryError(f"inventory file {configured} cannot be read as a CSV: {exc}") from None
        header = [h.strip() for h in (rows[0] if rows else [])]
        missing = [c for c in INVENTORY_COLUMNS if c not in header]
        if missing:
            raise InventoryError(
                f"inventory file {path} lacks columns {missing}; expected a header row with "
                f"{', '.join(INVENTORY_COLUMNS)}"
            )
        _check_values(rows, header, configured)
        return _with_optional_columns(path, rows, header, scratch), True
    empty = scratch / "inventory-empty.csv"
    empty.write_text(",".join(INVENTORY_COLUMNS + OPTIONAL_INVENTORY_COLUMNS) + "\n")
    return str(empty), False


def _with_optional_columns(path: str, rows: list[list[str]], header: list[str], scratch: Path) -> str:
    """`path`, or a copy in `scratch` with the optional columns it lacks added empty, so the SQL
    (DuckDB's and Spark's alike) names them whatever the file's age."""
    lacking = [c for c in OPTIONAL_INVENTORY_COLUMNS if c not in header]
    if not lacking:
        return path
    copy = scratch / "inventory-completed.csv"
    with open(copy, "w", newline="", encoding="utf-8") as dst:
        csv.writer(dst).writerows(row + (lacking if i == 0 else [""] * len(lacking)) for i, row in enumerate(rows))
    return str(copy)


def _check_values(rows: list[list[str]], header: list[str], configured: str) -> None:
    """Every typed value casts as int_inventory.sql casts it (DuckDB says), or InventoryError names
    the first that does not (its line: the file's, rows are its physical lines but for quoted breaks)."""
    places: dict[str, list[tuple[int, str, str]]] = {kind: [] for kind in _KINDS}
    index = {column: header.index(column) for column in TYPED_COLUMNS if column in header}
    for line, row in enumerate(rows[1:], start=2):
        for column, i in index.items():
            value = row[i].strip() if i < len(row) else ""
            if value:
                places[TYPED_COLUMNS[column]].append((line, column, value))
    params = {_KINDS[kind]: [value for _, _, value in found] for kind, found in places.items()}
    with duckdb.connect() as con:
        failed = con.execute(BUILD_SQL.text("inventory_bad_value"), params).fetchall()
    if failed:
        line, column, value = min(places[kind][place - 1] for kind, place in failed)
        raise InventoryError(f"inventory file {configured} line {line}: {column} {value!r} is not a "
                             f"{TYPED_COLUMNS[column]}")
