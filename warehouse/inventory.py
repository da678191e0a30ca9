"""The site inventory CSV as the build reads it: found (a path or an object-store URL), its
header checked, optional columns it lacks added empty, and every typed value checked, so that a
wrong one fails the day with one line naming the file, the line and the column (DuckDB's cast in
int_inventory.sql named only the value), and every host named as the lake names a server
(collectors/sources/host_names.py: an operator writes `NODE-01.cluster.example.com` where every
source writes `node-01`). Used by the DuckDB build and the Spark engine alike."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.collectors.sources.host_names import canonical_host, warn_of_merged_servers
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
        return _as_read(rows, header, scratch, configured), True
    empty = scratch / "inventory-empty.csv"
    empty.write_text(",".join(INVENTORY_COLUMNS + OPTIONAL_INVENTORY_COLUMNS) + "\n")
    return str(empty), False


def _as_read(rows: list[list[str]], header: list[str], scratch: Path, configured: str) -> str:
    """A copy of the inventory in `scratch` that both engines' SQL reads: each host as
    canonical_host names it (dim_gpu takes the inventory's host over the lake's, and the accounts
    join a GPU's unread hours to its server's BMC energy by it: `NODE-01.cluster.example.com` put
    them on no server), and the optional columns it lacks added empty, whatever the file's age."""
    lacking = [c for c in OPTIONAL_INVENTORY_COLUMNS if c not in header]
    host = header.index("host")
    written = [line[host] for line in rows[1:] if host < len(line)]
    warn_of_merged_servers(written, f"inventory file {configured}")
    copy = scratch / "inventory-as-read.csv"
    with open(copy, "w", newline="", encoding="utf-8") as dst:
        out = csv.writer(dst)
        out.writerow(rows[0] + lacking)
        for line in rows[1:]:
            if host < len(line):
                line = line[:host] + [canonical_host(line[host])] + line[host + 1:]
            out.writerow(line + [""] * len(lacking))
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
