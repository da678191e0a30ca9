"""`joulehouse collect --source nvml|sim --lake DIR --interval 1s`: the node collector.

Runs until SIGTERM/SIGINT, then flushes and exits 0. Exit 2: bad option; 3: no source could start.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import List, Optional

import typer


def collect_command(
    source: List[str] = typer.Option(..., "--source", help="nvml or sim (repeatable)."),
    lake: Path = typer.Option(..., "--lake", help="Lake folder."),
    interval: str = typer.Option("1s", "--interval", help="Sampling interval, e.g. 1s, 100ms."),
    host: Optional[str] = typer.Option(None, "--host", help="Host name in the lake (default: this machine's)."),
    spool_dir: Optional[Path] = typer.Option(None, "--spool-dir", help="Spool folder (default: <lake>/../spool)."),
    flush_interval: str = typer.Option("2s", "--flush-interval", help="Spool fsync interval."),
    roll_interval: str = typer.Option("300s", "--roll-interval", help="Parquet roll interval."),
    sim_gpus: int = typer.Option(8, "--sim-gpus", help="GPUs of the sim source."),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", help="Stop after N polls (tests)."),
) -> None:
    """Sample GPUs into the lake through a crash-safe spool."""
    import logging
    import signal
    import threading

    from collectors.collect import Collector, parse_duration_s
    from collectors.settings import CollectorSettings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = CollectorSettings(interval_s=parse_duration_s(interval),
                                     spool_flush_interval_s=parse_duration_s(flush_interval),
                                     roll_interval_s=parse_duration_s(roll_interval))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    host = host or socket.gethostname()
    sources = []
    for name in source:
        if name == "nvml":
            from collectors.sources.nvml import NvmlSource

            sources.append(NvmlSource(host))
        elif name == "sim":
            from collectors.sources.sim import SimSource

            sources.append(SimSource(host, gpus=sim_gpus))
        else:
            typer.echo(f"error: --source {name!r}: expected nvml or sim", err=True)
            raise typer.Exit(2)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    collector = Collector(sources, lake=lake, settings=settings,
                          spool_dir=spool_dir if spool_dir is not None else lake.parent / "spool")
    stats = collector.run(stop, max_polls=max_polls)
    if stats.polls and stats.rows == 0 and stats.source_errors:
        typer.echo("error: no source could be read (see the log above)", err=True)
        raise typer.Exit(3)
    typer.echo(f"stopped: {stats.polls} polls, {stats.rows} rows, {stats.files_written} files, "
               f"{stats.source_errors} source errors, {stats.disk_full_events} disk-full events")


def register(app: typer.Typer) -> None:
    """Add `collect` to the joulehouse app."""
    app.command("collect")(collect_command)
