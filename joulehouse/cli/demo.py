"""`joulehouse run` (one day through the Airflow DAG) and `joulehouse demo` (the whole loop on
the embedded default: a simulated fleet plus the real traces in ../shared/data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

from joulehouse.cli import SHARED_DATA
from joulehouse.cli.options import CONFIG_DEFAULT, config_origin, output_folder, parse_day, settings_file

console = Console()


def _stop(message: str, exit_code: int) -> NoReturn:
    """One line on the terminal, `error: ...`, and the exit code."""
    console.print("[red]error:[/red]", escape(message))
    raise typer.Exit(exit_code)


# A range is days of Airflow runs (about a minute each): past a year it is no backfill a person means.
MAX_RUN_DAYS = 366


def _days(first, through) -> list:
    """The days `joulehouse run` runs: --date alone, or --date to --through in order."""
    import datetime as dt

    if through is None:
        return [first]
    if through < first:
        _stop(f"--through {through} is before --date {first}", 2)
    n = (through - first).days + 1
    if n > MAX_RUN_DAYS:
        _stop(f"--date {first} --through {through}: {n} days; at most {MAX_RUN_DAYS} at a time", 2)
    return [first + dt.timedelta(days=i) for i in range(n)]


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        date: Annotated[str, typer.Option("--date", help="The UTC day to process, YYYY-MM-DD.")],
        through: Annotated[Optional[str], typer.Option(
            "--through", help="Run every day from --date to this one, in date order (a backfill, or restating "
                              "the days built after an earlier day was rebuilt).")] = None,
        config: Annotated[Optional[Path], typer.Option("--config", help=f"Settings file (TOML); {CONFIG_DEFAULT}.")] = None,
        airflow_home: Annotated[Optional[Path], typer.Option(help="Airflow home (SQLite metadata DB); default: beside the warehouse.")] = None,
    ) -> None:
        """Run the daily DAG for one day through Airflow; print the report's path and the headline.

        The DAG runs in this process with dag.test and a SQLite metadata DB beside the warehouse.

        Example: joulehouse run --date 2026-06-11 --config var/demo/joulehouse.toml
        """
        from joulehouse.settings import SettingsError, input_file_problems, load_settings
        from joulehouse.cli.dagrun import DagRunFailed, run_days

        days = _days(parse_day(date, "--date"), parse_day(through, "--through") if through else None)
        day = days[-1]
        origin = config_origin(config)
        config = settings_file(config)
        if airflow_home is not None:
            output_folder(airflow_home, "--airflow-home", "the Airflow home folder")
        try:
            settings = load_settings(config)
        except SettingsError as exc:
            _stop(f"{exc}{origin}", 2)
        from joulehouse.warehouse.lake_partitions import lake_folder_problem

        lake = settings.lake.path
        # said before an Airflow home is made and Airflow started for a run that cannot read a reading;
        # first, since a run with no lake and no key was given no site's settings at all
        if (what := lake_folder_problem(lake)) is not None:
            _stop(f"the lake {lake} ([lake] path) {what}; give --config with the site's settings, or "
                  "JOULEHOUSE_LAKE__PATH", 2)
        if (missing := input_file_problems(settings, config, signing_key=True)) is not None:
            _stop(missing, 2)  # before Airflow: its build or accounts step met it 20-40 s in, the export minutes in
        from joulehouse.warehouse.lake_partitions import NoReadingsForDay, gpu_hosts_or_raise

        try:
            for each in days:  # one listing a day; the DAG's first task said the same after ~25 s of start-up
                gpu_hosts_or_raise(lake, each)
        except NoReadingsForDay as exc:
            _stop(str(exc), 2)
        home = airflow_home or Path(settings.warehouse.db_path).resolve().parent / "airflow"
        cfg = config
        if cfg is None:
            from joulehouse.settings import write_settings_file

            home.mkdir(parents=True, exist_ok=True)
            cfg = write_settings_file(home / "joulehouse.toml", settings)
        from joulehouse.cli.headline import plural, print_day

        running = [days[0]]
        with console.status(f"joulehouse_daily {day} through Airflow: starting") as status:
            def on_task(task: str, done: int, total: int) -> None:
                status.update(f"joulehouse_daily {running[-1]} through Airflow: task {done + 1}/{total} {task}")

            def on_day(each, result: dict | None) -> None:
                if result is None:
                    running.append(each)

            try:
                results = run_days(days, cfg, home, on_task=on_task, on_day=on_day)
            except DagRunFailed as exc:
                _stop(str(exc), 1)
            except KeyboardInterrupt:
                # Said, not silent: the warehouse keeps what the steps before the stop published.
                rest = f" --through {days[-1]}" if running[-1] != days[-1] else ""
                _stop(f"interrupted: {running[-1]} is not complete (its reports and export may be an earlier run's; "
                      f"fct_warehouse_build_daily.completed_at stays NULL): run `joulehouse run --date {running[-1]}"
                      f"{rest}` again", 130)
        for each, result in zip(days, results):
            console.print(f"joulehouse_daily {each}: success, {plural(len(result.get('ran', [])), 'task')} ran "
                          f"(Airflow home {escape(str(home))})")
            for warning in result.get("warnings") or ():
                console.print("[yellow]warning:[/yellow]", escape(warning))
        from joulehouse.daily import publish_recommended_config, report_path

        if settings.export.publish_url:
            # what joulehouse_publish does under a scheduler on the daily run's export: a run without
            # one (cron, by hand) had left the agents' location without the day's config, saying success
            from joulehouse.reports.export.publish import PublishError

            try:
                published = publish_recommended_config(str(cfg))["published"]
            except (PublishError, OSError) as exc:  # the day is built; the publish alone failed: say so, exit 1
                _stop(f"{day} is built, but publishing its recommended config to [export] publish_url failed: "
                      f"{type(exc).__name__}: {exc}", 1)
            console.print(f"published the recommended config to {escape(str(published))}")
        print_day(console, settings.warehouse.db_path, settings.lake.path, day, report_path(settings, day),
                  title="the day's headline")

    @app.command()
    def demo(
        out: Annotated[Path, typer.Option(help="Output folder.")] = Path("var/demo"),
        days: Annotated[int, typer.Option(min=1, help="Simulated days; from 3 the node agent applies day 2's export "
                                                      "and the later days measure what it saved.")] = 3,
        gpus: Annotated[int, typer.Option(min=1, help="Simulated GPUs (8 per host).")] = 32,
        seed: Annotated[int, typer.Option(help="Random seed of the simulation.")] = 7,
        start: Annotated[str, typer.Option(help="First simulated UTC day.")] = "2026-06-10",
        shared_data: Annotated[Optional[Path], typer.Option(
            help="Real reference data (traces, grid, prices); default ../shared/data beside the checkout, "
                 "and the simulation alone where it is not.")] = None,
    ) -> None:
        """Simulate a fleet, import the real traces, run the daily DAG per day, print the results.

        Example: joulehouse demo --out var/demo --days 3
        """
        from joulehouse.cli.dagrun import DagRunFailed
        from joulehouse.cli.demo_run import run_demo

        first_day = parse_day(start, "--start")
        if shared_data is not None and not shared_data.is_dir():
            # a path given is meant: a typo ran the whole demo on the fallback, said only in passing
            _stop(f"--shared-data {shared_data} is not a folder; expected the reference data (telemetry/, grid/, "
                  "prices/, sweeps/)", 2)
        shared_data = shared_data or SHARED_DATA
        output_folder(out, "--out", "the demo's output folder")
        try:
            run_demo(out=out, days=days, gpus=gpus, seed=seed, start=first_day, shared_data=shared_data,
                     console=console)
        except DagRunFailed as exc:
            _stop(str(exc), 1)
        except KeyboardInterrupt:
            _stop(f"interrupted: the demo in {out} stopped part-way (the reports there may be an earlier run's): "
                  f"run `joulehouse demo --out {out}` again, which builds the folder anew", 130)
