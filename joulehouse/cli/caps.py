"""`joulehouse caps ...`: power-limit choices from measured sweeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    caps = typer.Typer(help="Power limits from measured sweeps and fitted models.", no_args_is_help=True)

    @caps.command("best-batch")
    def best_batch(
        file: Path = typer.Argument(..., help="A batch sweep CSV (Zeus NSDI'23 summary format)."),
        power_limit_w: Optional[float] = typer.Option(None, help="Compare batch sizes at this limit (default: the highest measured)."),
    ) -> None:
        """Print, per workload, the batch size with the best throughput per watt (eta = TP / P) as JSON."""
        import dataclasses

        from joulehouse.models.batch import BatchSweepError, best_batch_size, load_batch_sweeps

        try:
            choices = [best_batch_size(w, pts, power_limit_w) for w, pts in load_batch_sweeps(file).items()]
        except (BatchSweepError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(json.dumps([dataclasses.asdict(c) for c in choices], indent=2))

    @caps.command("from-sweep")
    def from_sweep(
        file: Path = typer.Argument(..., help="A Zeus sweep CSV (profile windows or NSDI'23 summary)."),
        objective: str = typer.Option("energy", help="energy | cost | time"),
        eta: float = typer.Option(0.5, help="Zeus cost weight: eta x energy + (1 - eta) x max_power x time."),
        max_slowdown_pct: Optional[float] = typer.Option(None, help="Largest slowdown allowed vs the top limit, %."),
        max_power_w: Optional[float] = typer.Option(None, help="max_power in the cost (default: highest limit in the sweep)."),
        workload: Optional[str] = typer.Option(None, help="Workload label in a multi-workload file (default: all)."),
    ) -> None:
        """Print the chosen power limit as JSON (one object, or a list for multi-workload files)."""
        from joulehouse.models.sweeps import SweepError, choose_power_limit, load_sweeps

        try:
            sweeps = load_sweeps(file)
            if workload is not None:
                if workload not in sweeps:
                    raise SweepError(f"{file} has no workload {workload!r}")
                sweeps = {workload: sweeps[workload]}
            choices = [choose_power_limit(s, objective, eta=eta, max_slowdown_pct=max_slowdown_pct,
                                          max_power_w=max_power_w) for s in sweeps.values()]
        except SweepError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        out = []
        for c in choices:
            if c.setting != "power_limit_w":
                typer.echo(f"error: {file} sweeps {c.setting}, not power limits", err=True)
                raise typer.Exit(2)
            out.append({"workload": c.label, "objective": c.objective, "eta": eta,
                        "max_slowdown_pct": max_slowdown_pct, "power_limit_w": c.chosen, "time_s": c.time_s,
                        "energy_j": c.energy_j, "slowdown_pct": round(c.slowdown_pct, 3),
                        "energy_saving_pct": round(c.energy_saving_pct, 3)})
        typer.echo(json.dumps(out[0] if len(out) == 1 else out, indent=2))

    app.add_typer(caps, name="caps")
