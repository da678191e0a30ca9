"""The demo: the whole loop on the embedded default, in one output folder.

1. import the real nvidia-smi logs from ../shared/data/telemetry into DIR/lake;
2. write the settings used (DIR/joulehouse.toml) and an ed25519 key pair (DIR/keys/);
3. simulate a fleet into the same lake through the node writer (and its inventory), while one
   Airflow child process (dagrun.DagSession) starts that will run every day;
4. run the daily Airflow DAG once per simulated day; with 3 days or more, the node agent of every
   simulated host applies day 2's signed export (audited into the lake) and the later days are
   simulated under the limits it set, so the last days measure what the settings saved;
5. print what happened in sentences, the last day's headline and what the applied settings
   saved as tables, where everything is, and how to query it or open the runs in the Airflow UI.
"""

from __future__ import annotations

import datetime as dt
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from joulehouse.cli.dagrun import DagSession
from joulehouse.cli.headline import plural, print_day

from joulehouse.settings import (
    CarbonSettings,
    ExportSettings,
    LakeSettings,
    ModelSettings,
    Settings,
    TcoSettings,
    WarehouseSettings,
    AgentSettings,
    write_settings_file,
)

# nvidia-smi logs in ../shared/data/telemetry: the host and model each is imported as, and the
# column that holds the GPU index where `gpu` and `index` disagree (the 8-GPU log's `index` is 0
# on every row; its `gpu` column counts 0-7).
TRACES = {
    "mddair_gpu_telemetry_1hz.csv": ("trace-mddair", None, None),
    "vlm_optimization_gpu_log_rtx4090_1hz.csv": ("trace-rtx4090", "NVIDIA GeForce RTX 4090", None),
    "gpu_glasses_nvidia_smi_8x80GB_idle.csv": ("trace-8x80gb", None, "gpu"),
}
# The folder's other logs, and why the demo leaves them out.
SKIPPED_TRACES = {
    "energy_inference_llama2_70b_a100_4gpus_interleaved_10hz.csv":
        "four GPUs' rows interleaved with no index column, so no reading can be given to its GPU "
        "(the importer refuses it and says why)",
}


def demo_settings(out: Path, shared_data: Path) -> Settings:
    """The settings of the demo: every path under `out`, real grid and price files when present."""
    grid = shared_data / "grid" / "electricitymaps_FR_2022_hourly.csv"
    prices = shared_data / "prices" / "pjm_rto_da_hourly_lmp_2025.csv"
    return Settings(
        lake=LakeSettings(path=str(out / "lake")),
        warehouse=WarehouseSettings(db_path=str(out / "warehouse.duckdb"), inventory_path=str(out / "inventory.csv")),
        carbon=CarbonSettings(grid_file=str(grid) if grid.exists() else ""),
        tco=TcoSettings(price_file=str(prices) if prices.exists() else ""),
        agent=AgentSettings(public_key_path=str(out / "keys" / "joulehouse-ed25519.pub.pem")),
        # The simulator runs this job profile on an A100 and an H100 every day; an A100 whose
        # readings lack clocks takes alpha from the measured Perseus A100 clock sweeps.
        models=ModelSettings(cross_model_job_profiles=("llm-finetune-7b-ref",),
                             clock_sweep_files=tuple(f"A100|{f}" for f in sorted((shared_data / "sweeps").glob(
                                 "perseus_*_a100sxm_*.csv")))),
        # Day 2's config stays in force for the rest of the demo week (a fleet would re-issue it daily).
        export=ExportSettings(out_dir=str(out / "export"), validity_hours=24.0 * 7,
                              private_key_path=str(out / "keys" / "joulehouse-ed25519.pem")),
    )


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def run_demo(*, out: Path, days: int, gpus: int, seed: int, start: dt.date, shared_data: Path, console: Console) -> None:
    from joulehouse.cli.run_lock import one_run_at_a_time

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    day_list = [start + dt.timedelta(days=i) for i in range(days)]
    # The folder is this run's before anything is written to it: a second demo on a folder in use
    # imported the traces into its lake and rewrote its settings before the run lock refused it.
    with one_run_at_a_time(out / "airflow", day_list) as lock:
        _demo_in(out, day_list, gpus=gpus, seed=seed, shared_data=shared_data, console=console, lock=lock)


def _demo_in(out: Path, day_list: list[dt.date], *, gpus: int, seed: int, shared_data: Path, console: Console,
             lock: IO[str]) -> None:
    """The demo in `out`, whose run lock (`lock`) the caller holds."""
    from joulehouse.collectors.config_contract import generate_keypair

    started = time.monotonic()
    days = len(day_list)
    settings = demo_settings(out, shared_data)
    config = write_settings_file(out / "joulehouse.toml", settings)
    lake = Path(settings.lake.path)
    if not settings.carbon.grid_file:
        console.print(f"[yellow]no grid intensity file under {escape(str(shared_data / 'grid'))}: carbon uses the flat "
                      f"{settings.carbon.default_grid_gco2e_per_kwh:g} gCO2e/kWh default[/yellow]")
    if not settings.tco.price_file:
        console.print(f"[yellow]no price file under {escape(str(shared_data / 'prices'))}: cost uses the flat "
                      f"{settings.tco.flat_price_usd_per_mwh:g} USD/MWh default[/yellow]")

    # With 3 days or more the loop closes: the agent applies day 2's signed recommendations to the
    # simulated fleet, and the days after it are simulated under the limits it set.
    before, after = (day_list[:2], day_list[2:]) if days >= 3 else (day_list, [])
    story = [f"Simulated {plural(gpus, 'GPU')} on {plural(-(-gpus // 8), 'host')} at 1 Hz for "
             f"{plural(days, 'day')} from {day_list[0]}, through the node writer into the lake."]
    # The real traces are imported first: their days are among those the Airflow child is started
    # for, and it starts (and imports what its tasks need) while the fleet is simulated.
    trace_days = _ingest_traces(lake, shared_data, console)
    if not Path(settings.export.private_key_path).exists():
        generate_keypair(out / "keys")
    # The real traces' own days go through the same DAG, in date order with the simulated ones (a
    # trace that falls on a simulated day is built with it): earlier ones now, later ones last.
    built = sorted({*trace_days, *day_list})
    # One Airflow child runs every day, waiting for the later ones while the agent and the simulation work.
    with DagSession(built, config, out / "airflow", held_lock=lock) as dags:
        _simulate(lake, before, gpus=gpus, seed=seed, limits=None, console=console)
        if trace_days:
            story.append(f"Imported {plural(sum(len(v) for v in trace_days.values()), 'real nvidia-smi trace')} "
                         f"(landing on {', '.join(str(d) for d in sorted(trace_days))}).")
        _run_days(dags, sorted(d for d in trace_days if d < day_list[0]) + before, console)
        if after:
            limits, clocks, applied = _apply_recommendations(settings, before[-1], after, gpus=gpus, seed=seed,
                                                             console=console)
            story.append(applied)
            _simulate(lake, after, gpus=gpus, seed=seed, limits=limits, clocks=clocks, console=console)
            story.append(f"Simulated {', '.join(str(d) for d in after)} under the limits the agent set; the last "
                         "day's report compares the saving realised with the one predicted.")
        else:
            story.append("With 2 days or fewer the agent applies nothing: run with --days 3 or more to close the loop.")
        _run_days(dags, after + sorted(d for d in trace_days if d > day_list[-1]), console)
    story.append(f"Ran the daily DAG through Airflow for {plural(len(built), 'day')}: warehouse, data checks, power "
                 "models, carbon and cost, recommendations, a report and a signed export each.")

    elapsed_s = time.monotonic() - started
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    story.append(f"Took {elapsed_s:,.0f} s; the largest step peaked at {peak_mib:,.0f} MiB.")
    console.rule("What happened")
    for sentence in story:
        console.print(escape(sentence))
    _print_results(out, settings, day_list[-1], console)
    _print_trace_days(out, settings, trace_days, console)


def _simulate(lake: Path, days: list[dt.date], *, gpus: int, seed: int,
              limits: dict[dt.date, dict[str, float]] | None, console: Console,
              clocks: dict[dt.date, dict[str, tuple[int, int]]] | None = None) -> None:
    from joulehouse.collectors.sim import simulate_fleet

    with _progress(console) as progress:
        task = progress.add_task(f"simulating {gpus} GPUs x {len(days)} days at 1 Hz from {days[0]}", total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        summary = simulate_fleet(lake, gpus=gpus, days=len(days), start=days[0], seed=seed,
                                 power_limits_by_day=limits, locked_sm_clocks_by_day=clocks, progress=on_progress)
    console.print(f"simulated {days[0]}..{days[-1]}: {describe_rows(summary.rows)}")


# What each lake dataset's rows are, for the line after a simulation.
ROW_WORDS = {"gpu_samples": "GPU reading", "node_samples": "server (BMC) reading", "facility_samples": "site meter reading",
             "jobs": "job-on-GPU row", "link_samples": "NVLink/InfiniBand link reading",
             "gpu_processes": "GPU process reading", "agent_audit": "agent audit row"}


def describe_rows(rows: dict[str, int]) -> str:
    """{'gpu_samples': 5529600, ...} -> '5,529,600 GPU readings, 138,240 server (BMC) readings, ...'"""
    return ", ".join(plural(n, ROW_WORDS.get(name, name)) for name, n in rows.items())


def _run_days(dags: DagSession, days: list[dt.date], console: Console) -> None:
    """The daily DAG for each of `days` in order, in the session's Airflow child."""
    if not days:
        return
    with _progress(console) as progress:
        task = progress.add_task("daily DAG through Airflow", total=len(days))
        current = [days[0]]

        def on_day(day: dt.date, result: dict | None) -> None:
            current[0] = day
            progress.update(task, description=f"daily DAG {day}: {'done' if result else 'starting'}")
            if result:
                progress.advance(task)

        def on_task(name: str, done: int, total: int) -> None:
            progress.update(task, description=f"daily DAG {current[0]}: task {min(done + 1, total)}/{total} {name}")

        dags.run(days, on_task=on_task, on_day=on_day)


def _apply_recommendations(settings: Settings, day: dt.date, later: list[dt.date], *, gpus: int, seed: int,
                           console: Console) -> tuple[dict[dt.date, dict[str, float]],
                                                      dict[dt.date, dict[str, tuple[int, int]]], str]:
    """The node agent of every simulated host verifies and applies `day`'s signed export (audited
    into the lake); returns the limits (W) and locked SM clock ranges (MHz) the devices then hold,
    per later day, and a sentence saying what it did."""
    from joulehouse.collectors.agent import apply_config
    from joulehouse.collectors.config_contract import load_public_key
    from joulehouse.collectors.sim.nvml import locked_clocks_by_day, power_limits_by_day, simulated_nvml_by_host

    export = Path(settings.export.out_dir) / f"recommended-config-{day}.json"
    public_key = load_public_key(settings.agent.public_key_path)
    nvmls = simulated_nvml_by_host(gpus=gpus, seed=seed)
    defaults = {d.uuid: d.power_limit_mw for n in nvmls.values() for d in n.devices}
    applied_at = dt.datetime.combine(later[0], dt.time(0, 5), dt.timezone.utc)
    _forget_replayed_audit(settings.lake.path, applied_at.date(), sorted(nvmls))
    refused = 0
    for host, nvml in sorted(nvmls.items()):
        result = apply_config(export, public_key=public_key, host=host, nvml=nvml,
                              lake=settings.lake.path, now=applied_at)
        refused += sum(1 for o in result.outcomes if o.action in ("refuse", "verify-failed"))
    # What the devices now hold, not the agent's wording: a clock lock at the default limit is a change too.
    capped = sum(1 for n in nvmls.values() for d in n.devices if d.power_limit_mw != defaults[d.uuid])
    locked = sum(len(n.locked_clocks()) for n in nvmls.values())
    sentence = (f"The node agent of each of the {plural(len(nvmls), 'simulated host')} verified {export.name} "
                f"(signed on {day}) and applied it at {applied_at:%Y-%m-%d %H:%M} UTC: {plural(capped, 'GPU')} capped, "
                f"{locked} with locked SM clocks, {refused} refused; every action is audited in the lake's agent_audit.")
    console.print(escape(sentence))
    return power_limits_by_day(nvmls.values(), later), locked_clocks_by_day(nvmls.values(), later), sentence


def _forget_replayed_audit(lake: str, day: dt.date, hosts: list[str]) -> None:
    """A demo run again in its folder simulates the same hosts anew, and their agents apply the
    same export at the same time again: that apply's audit replaces the earlier run's, as the
    simulation's readings replace theirs. Appended, every re-run added the day's audit once more
    (32 rows, then 64, 96...), and the agent judged its locks against the earlier run's audit."""
    from joulehouse.collectors.writer import partition_files

    for host in hosts:
        for path in partition_files(lake, "agent_audit", day.isoformat(), host):
            Path(path).unlink()


def _ingest_traces(lake: Path, shared_data: Path, console: Console) -> dict[dt.date, list[str]]:
    """Import the real traces into the lake; returns the UTC days they landed on, with their files."""
    folder = shared_data / "telemetry"
    if not folder.is_dir():
        console.print(f"[yellow]no real traces: {escape(str(folder))} does not exist; the demo runs on the simulation "
                      "only[/yellow]")
        return {}
    import pyarrow as pa
    import pyarrow.compute as pc

    from joulehouse.collectors.ingest.nvidia_smi import ingest_nvidia_smi

    landed: dict[dt.date, list[str]] = {}

    for name, (host, model, index_column) in TRACES.items():
        path = folder / name
        if not path.exists():
            console.print(f"[yellow]trace {escape(str(path))} missing; skipped[/yellow]")
            continue
        result = ingest_nvidia_smi(path, lake=lake, host=host, gpu_model=model, index_column=index_column)
        reasons = "; ".join(f"{n} x {reason}" for reason, n in sorted(result.reasons().items()))
        # the column trusted is said: imported by hand without --index-column, this log's `gpu` and
        # `index` disagree and its rows are refused
        trusted = f" (GPU index from its `{index_column}` column: --index-column {index_column})" if index_column else ""
        console.print(escape(f"imported {name}{trusted}: {plural(result.good_rows, 'row')} landed, "
                             f"{result.bad_rows:,} quarantined"
                             + (f" ({reasons}) -> {result.quarantine_path}" if result.bad_rows else "")))
        for day in pc.unique(pc.cast(result.table.column("sampled_at"), pa.date32())).to_pylist():
            landed.setdefault(day, []).append(name)
    for path in sorted(folder.glob("*.csv")):
        if path.name not in TRACES:  # said, not passed over in silence
            why = SKIPPED_TRACES.get(path.name,
                                     "not one of the demo's traces; `joulehouse ingest nvidia-smi` imports it")
            console.print(escape(f"not imported {path.name}: {why}"))
    return landed


def _print_results(out: Path, settings: Settings, day: dt.date, console: Console) -> None:
    from joulehouse.cli.dagrun import default_dags_folder
    from joulehouse.daily import report_path

    print_day(console, settings.warehouse.db_path, settings.lake.path, day, report_path(settings, day),
              title=f"The last simulated day, {day}")
    where = Table(title="Where everything is", title_justify="left", show_header=False)
    where.add_column("what")
    where.add_column("path", overflow="fold")  # a path cut short with "..." cannot be opened
    cli = _cli_command()
    for what, path in (("lake (Parquet)", settings.lake.path), ("warehouse (DuckDB)", settings.warehouse.db_path),
                       ("reports, one per day", str(report_path(settings, day).parent)),
                       ("dashboard, every day held", str(report_path(settings, day).parent / "dashboard.html")),
                       ("signed export", str(Path(settings.export.out_dir) / "recommended-config.json")),
                       ("signed placement advice", str(Path(settings.export.out_dir) / "placement-advice.json")),
                       ("settings used", str(out / "joulehouse.toml")), ("signing keys", str(out / "keys")),
                       ("Airflow home", str(out / "airflow"))):
        where.add_row(what, escape(path))
    console.print(where)
    # soft_wrap: a command to copy is one line, also in a log 80 columns wide
    console.print("Ask the warehouse: " + escape(f'{cli} sql "SELECT gpu_model, sum(energy_kwh) AS energy_kwh FROM '
                                                 f'fct_gpu_energy_hourly GROUP BY ALL" --db {settings.warehouse.db_path}'),
                  soft_wrap=True)
    console.print("Check the export:  " + escape(f"{cli} agent verify {Path(settings.export.out_dir) / 'recommended-config.json'} "
                                                 f"--public-key {out / 'keys' / 'joulehouse-ed25519.pub.pem'}"),
                  soft_wrap=True)
    # standalone starts its scheduler, API server and the rest as `airflow` from PATH: with the
    # venv inactive (as `make demo` leaves it) they die with "No such file or directory: 'airflow'"
    venv_bin = Path(sys.executable).parent
    console.print("See the runs in the Airflow UI: "
                  + escape(f"PATH={venv_bin}:$PATH AIRFLOW_HOME={out / 'airflow'} airflow standalone")
                  + f" (then http://localhost:8080; DAGs from {escape(str(default_dags_folder()))})", soft_wrap=True)


def _cli_command() -> str:
    """How to call this CLI from here: `joulehouse` when it is on PATH, else the venv's script
    (relative to the working folder when below it), as `make demo` leaves the venv inactive."""
    script = Path(sys.executable).parent / "joulehouse"
    on_path = shutil.which("joulehouse")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "joulehouse"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _print_trace_days(out: Path, settings: Settings, trace_days: dict[dt.date, list[str]], console: Console) -> None:
    """A table of the days the real traces landed on: their GPUs' measured energy and the report."""
    from joulehouse.daily import report_path
    from joulehouse.warehouse.db import connect

    if not trace_days:
        return
    table = Table(title="The real traces", title_justify="left")
    for col, justify in (("day", "left"), ("trace", "left"), ("GPUs", "right"), ("energy measured", "right"),
                         ("report", "left")):
        table.add_column(col, justify=justify, overflow="fold" if col in ("trace", "report") else "ellipsis")
    con = connect(settings.warehouse.db_path, settings.lake.path, read_only=True)
    try:
        for day, names in sorted(trace_days.items()):
            gpus, kwh = con.execute(
                "SELECT count(DISTINCT gpu_uuid), sum(energy_kwh) FROM fct_gpu_energy_hourly "
                "WHERE day = ? AND list_contains(?, host)", [day, [TRACES[n][0] for n in names]]).fetchone()
            energy = "not computed" if kwh is None else (f"{kwh:,.2f} kWh" if kwh >= 1 else f"{kwh * 1000:,.1f} Wh")
            table.add_row(str(day), escape(", ".join(names)), str(gpus), energy, escape(str(report_path(settings, day))))
    finally:
        con.close()
    console.print(table)
