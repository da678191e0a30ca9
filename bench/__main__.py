"""`python -m bench [--quick] [--scaling] [--only SECTION]`: run the benchmark sections, print one table,
append the figures to var/bench/results.csv so runs can be compared over time."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.common import BenchContext, Figure

# Each module has run(ctx) -> list[Figure]; the order is the order of the table.
SECTIONS: list[str] = ["collector", "power_fit", "pipeline"]
RESULTS_CSV = Path("var/bench/results.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--scaling", action="store_true",
                        help="also the pipeline at a quarter and four times the fleet (s per million readings)")
    parser.add_argument("--only", action="append", default=[], help="run only these sections")
    args = parser.parse_args()
    # Wide enough for the table in a log file or CI, where there is no terminal to size it.
    console = Console(width=max(Console().width, 180))
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="joulehouse-bench-") as tmp:
        ctx = BenchContext(work_dir=Path(tmp), quick=args.quick, scaling=args.scaling)
        for name in SECTIONS:
            if args.only and name not in args.only:
                continue
            console.rule(f"bench: {name}")
            figures.extend(importlib.import_module(f"bench.{name}").run(ctx))
    table = Table(title="joulehouse performance record")
    for col in ("section", "metric", "value", "baseline", "ratio", "target"):
        table.add_column(col, justify="right" if col in ("value", "ratio") else "left")
    for f in figures:
        base = f"{f.baseline_name} = {f.baseline_value:,.4g}" if f.baseline_value is not None else ""
        table.add_row(f.section, f.metric, f"{f.value:,.4g} {f.unit}", base,
                      f"{f.ratio:,.3g}" if f.ratio is not None else "", f.target)
    console.print(table)
    _append_csv(figures, quick=args.quick)
    console.print(f"figures appended to {RESULTS_CSV}")


def _append_csv(figures: list[Figure], *, quick: bool) -> None:
    RESULTS_CSV.parent.mkdir(parents=True, exist_ok=True)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    new = not RESULTS_CSV.exists()
    with RESULTS_CSV.open("a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(["run_at", "git_sha", "quick", "section", "metric", "value", "unit",
                             "baseline_name", "baseline_value", "ratio", "target"])
        run_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        for f in figures:
            writer.writerow([run_at, sha, quick, f.section, f.metric, f.value, f.unit, f.baseline_name,
                             f.baseline_value, f.ratio, f.target])


if __name__ == "__main__":
    main()
