"""`joulehouse caps ...`: power-limit and clock choices from measured sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import CONFIG_DEFAULT, config_origin, fail, quoted, settings_file
from joulehouse.cli.output import FORMAT_HELP, OutputFormat, emit


def register(app: typer.Typer) -> None:
    caps = typer.Typer(help="Power limits from measured sweeps and fitted models.", no_args_is_help=True)

    @caps.command("best-batch")
    def best_batch(
        file: Path = typer.Argument(..., help="A batch sweep CSV (Zeus NSDI'23 summary format)."),
        power_limit_w: Optional[float] = typer.Option(None, help="Compare batch sizes at this limit, W (default: the highest measured)."),
        output: Optional[OutputFormat] = typer.Option(None, "--format", help=FORMAT_HELP),
    ) -> None:
        """Print, per workload, the batch size with the best throughput per watt (eta = TP / P).

        Example: joulehouse caps best-batch ../shared/data/sweeps/zeus_nsdi23_summary_power_a40.csv
        """
        import dataclasses

        from joulehouse.models.batch import BatchSweepError, best_batch_size, load_batch_sweeps

        try:
            choices = [best_batch_size(w, pts, power_limit_w) for w, pts in load_batch_sweeps(file).items()]
        except (BatchSweepError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        records = [dataclasses.asdict(c) for c in choices]
        emit(records, output, title=f"{file.name}: best batch size per workload",
             columns=[k for k in records[0] if not isinstance(records[0][k], (list, dict))] if records else None)

    @caps.command("from-sweep")
    def from_sweep(
        file: Path = typer.Argument(..., help="A sweep CSV: Zeus profile windows or NSDI'23 summary, Perseus "
                                              "clock profile, or a clock x limit grid (workload, sm_clock_mhz, "
                                              "power_limit_w, time_s, energy_j or avg_power_w)."),
        objective: str = typer.Option("energy", help="energy | cost | time"),
        max_slowdown_pct: Optional[float] = typer.Option(
            None, help="Largest slowdown allowed against the fastest measured setting, %. Default for the "
                       "energy objective: the workload class's bound from the settings."),
        workload_class: str = typer.Option("throughput", help="latency-sensitive | throughput | background: "
                                                              "whose slowdown bound applies without --max-slowdown-pct."),
        eta: float = typer.Option(0.5, help="Zeus cost weight: eta x energy + (1 - eta) x max_power x time."),
        max_power_w: Optional[float] = typer.Option(None, help="max_power in the cost, W (default: highest limit in the sweep)."),
        workload: Optional[str] = typer.Option(None, help="One workload of a multi-workload file (default: all)."),
        config: Optional[Path] = typer.Option(None, "--config", help=f"Settings file (TOML) for the class bounds ({CONFIG_DEFAULT})."),
        output: Optional[OutputFormat] = typer.Option(None, "--format", help=FORMAT_HELP),
    ) -> None:
        """Choose per workload the measured clock or power limit that minimises the objective.

        The choice stays within the slowdown bound, with its energy and time against the fastest setting.

        For a power-limit sweep and the energy objective, interval_* give the best power interval
        on a 5 W grid: the measured limits at their readings, the fitted cap model between them.

        Example: joulehouse caps from-sweep ../shared/data/sweeps/zeus_testprofile_A40+resnet50+gpu0.csv --max-slowdown-pct 10
        """
        from joulehouse.collectors.settings import SettingsError
        from joulehouse.settings import load_settings
        from joulehouse.models.recommend import CLASSES, slowdown_bound_pct
        from joulehouse.models.sweeps import SweepError, choose_setting, load_sweeps

        if workload_class not in CLASSES:
            fail(f"--workload-class {quoted(workload_class)}: expected one of {', '.join(CLASSES)}")
        bound, bound_from = max_slowdown_pct, "--max-slowdown-pct"
        if bound is None and objective == "energy":
            try:
                recommend = load_settings(settings_file(config)).recommend
            except SettingsError as exc:
                fail(f"{exc}{config_origin(config)}")
            bound = slowdown_bound_pct(workload_class, recommend)
            field = {"latency-sensitive": "latency"}.get(workload_class, workload_class)
            bound_from = f"{workload_class} class ([recommend] max_slowdown_{field}_pct)"
        elif bound is None:
            bound_from = "none"
        try:
            sweeps = load_sweeps(file)
            if workload is not None:
                if workload not in sweeps:
                    raise SweepError(f"{file} has no workload {quoted(workload)}; it has {sorted(sweeps)[:5]}")
                sweeps = {workload: sweeps[workload]}
            choices = [choose_setting(s, objective, eta=eta, max_slowdown_pct=bound, max_power_w=max_power_w)
                       for s in sweeps.values()]
            intervals = [_interval(s, bound) if objective == "energy" else {} for s in sweeps.values()]
        except SweepError as exc:
            fail(str(exc))
        records = [{"workload": c.label, "objective": c.objective, "sm_clock_mhz": c.sm_clock_mhz,
                    "power_limit_w": c.power_limit_w, "energy_j": c.energy_j, "time_s": c.time_s,
                    "slowdown_pct": round(c.slowdown_pct, 2), "energy_saving_pct": round(c.energy_saving_pct, 2),
                    "fastest_sm_clock_mhz": c.fastest_sm_clock_mhz, "fastest_power_limit_w": c.fastest_power_limit_w,
                    "fastest_energy_j": c.fastest_energy_j, "fastest_time_s": c.fastest_time_s,
                    "max_slowdown_pct": bound, "bound_from": bound_from, **interval,
                    **({"eta": eta} if objective == "cost" else {})} for c, interval in zip(choices, intervals)]
        emit(records, output, single=workload is not None, title=f"{file.name}: {objective}, bound {bound_from}",
             columns=["workload", "sm_clock_mhz", "power_limit_w", "slowdown_pct", "energy_saving_pct", "max_slowdown_pct"])

    app.add_typer(caps, name="caps")


def _interval(sweep, bound: float | None) -> dict:
    """The best power interval of a power-limit sweep (models.cap_calibration.sweep_interval): the
    measured limits at their readings, the fitted cap model between them, on a 5 W grid. Null for a
    clock sweep, one of fewer than three limits (too few to fit the model's shape), or one with a
    point at the default limit (no watts to place it at on the curve: the fit had stopped on it
    with a traceback)."""
    import numpy as np

    from joulehouse.models.cap_calibration import sweep_interval

    if (sweep.setting != "power_limit_w" or np.isnan(sweep.values).any()
            or len(set(sweep.values.tolist())) < 3):
        return {"interval_best_w": None, "interval_low_w": None, "interval_high_w": None}
    limits, _, _, choice = sweep_interval(sweep, bound)
    return {"interval_best_w": float(limits[choice.best]), "interval_low_w": choice.low_w,
            "interval_high_w": choice.high_w}
