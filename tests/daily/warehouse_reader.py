"""An analyst's loop, run as its own process by test_readers_during_build: opens the warehouse
read-only with the DuckDB Python API and asks for one day's totals every INTERVAL_S seconds,
one JSON line per answer (or per error) on stdout, until the STOP file appears.

usage: python warehouse_reader.py DB DAY STOP INTERVAL_S (hold|reconnect)
  hold: one connection, opened once and kept open (a notebook); reconnect: a new connection per
  query (a `joulehouse sql` per question), which sees a newly published file.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb

QUERY = """
SELECT (SELECT count(*) FROM fct_gpu_energy_hourly WHERE day = $day) AS gpu_hours,
       (SELECT count(DISTINCT gpu_uuid) FROM fct_gpu_energy_hourly WHERE day = $day) AS gpus,
       (SELECT round(sum(energy_kwh), 9) FROM fct_gpu_energy_hourly WHERE day = $day) AS energy_kwh,
       (SELECT count(*) FROM fct_gpu_coverage_daily WHERE day = $day) AS coverage_rows
"""


def main(db: str, day: str, stop: str, interval_s: str, mode: str) -> None:
    held = duckdb.connect(db, read_only=True) if mode == "hold" else None
    while not Path(stop).exists():
        try:
            con = held or duckdb.connect(db, read_only=True)
            try:
                row = con.execute(QUERY, {"day": day}).fetchone()
            finally:
                if held is None:
                    con.close()
            print(json.dumps({"at": time.time(), "answer": list(row)}), flush=True)
        except duckdb.Error as exc:
            print(json.dumps({"at": time.time(), "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        time.sleep(float(interval_s))


if __name__ == "__main__":
    main(*sys.argv[1:])
