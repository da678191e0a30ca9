"""`joulehouse ship --lake DIR --to DEST`: copy the node's finished lake files to the central lake.

DEST is a folder or an fsspec URL (s3://bucket/lake needs s3fs installed). Each file is sent
once; a run that stopped half way is simply run again. Exit 2: bad input (no lake, a
destination fsspec cannot open, a corrupt manifest); 1: a file could not be copied (the files
before it are shipped and recorded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import node_lake


def ship_command(
    lake_option: str = typer.Option(..., "--lake", help="The node's local lake folder."),
    to: str = typer.Option(..., "--to", help="Central lake: a folder or an fsspec URL (s3://bucket/lake)."),
    manifest: Optional[Path] = typer.Option(
        None, "--manifest", help="Record of shipped files (default: <lake>/../state/ship-manifest.jsonl)."),
    metrics_textfile: Optional[Path] = typer.Option(
        None, "--metrics-textfile", help="Write the run's metrics (last success, files and bytes shipped, files left) "
                                         "to this *.prom file for node_exporter's textfile collector."),
) -> None:
    """Ship finished Parquet files to the central lake, exactly once each, resumable.

    A ship run is over before any scrape, so its metrics go to a textfile (Prometheus' way for
    batch jobs), not a port. Example: joulehouse ship --lake /var/lib/joulehouse/lake --to s3://fleet/lake
    --metrics-textfile /var/lib/node_exporter/textfile/joulehouse_ship.prom
    """
    import logging

    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from joulehouse.collectors.ship import Shipper, ShipError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lake = node_lake(lake_option)
    manifest_path = manifest if manifest is not None else lake.parent / "state" / "ship-manifest.jsonl"
    try:
        shipper = Shipper(lake, to, manifest_path)
        todo, _ = shipper.pending()
    except ShipError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    total_bytes = sum(p.stat().st_size for p in todo)
    columns = (TextColumn("ship"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    # on stderr, and only on a terminal: piped, stdout holds the one summary line (a bar stopped
    # in a pipe left a blank line before it)
    console = Console(stderr=True)
    with Progress(*columns, transient=True, console=console, disable=not console.is_terminal) as progress:
        task = progress.add_task("ship", total=total_bytes)
        try:
            report = shipper.run(after_file=lambda entry: progress.advance(task, entry.bytes))
        except ShipError as exc:
            _write_ship_metrics(metrics_textfile, shipper, None, failed=True)
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1)
    _write_ship_metrics(metrics_textfile, shipper, report, failed=False)
    typer.echo(f"shipped {len(report.shipped)} files ({report.bytes_shipped:,} bytes) to {to}; "
               f"{report.skipped} already there; {report.reshipped_changed} changed since shipped and sent again"
               + (f"; {report.already_compacted} already merged by the destination's compaction"
                  if report.already_compacted else "")
               + (f"; {report.withdrawn} withdrawn there (a re-import removed them here)" if report.withdrawn else ""))


def _write_ship_metrics(textfile: Optional[Path], shipper, report, *, failed: bool) -> None:
    """The run's metrics to `textfile` (None: none); a failed run keeps the last success time."""
    if textfile is None:
        return
    import time

    from prometheus_client import write_to_textfile

    from joulehouse.collectors.metrics import last_success_from_textfile, ship_registry
    from joulehouse.collectors.ship import ShipError

    now = time.time()
    try:
        pending = len(shipper.pending()[0])
    except ShipError:
        pending = 0
    # A run that shipped all it found succeeded, even if the collector rolled new files meanwhile.
    last = last_success_from_textfile(textfile) if failed else now
    registry = ship_registry(report, pending_files=pending, failed=failed, ended_at_s=now, last_success_at_s=last)
    try:
        textfile.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(textfile), registry)
    except OSError as exc:
        typer.echo(f"warning: cannot write the ship metrics to {textfile}: {exc.strerror or exc}", err=True)


def register(app: typer.Typer) -> None:
    """Add `ship` to the joulehouse app."""
    app.command("ship", epilog="Example: joulehouse ship --lake /var/lib/joulehouse/lake --to s3://fleet/lake")(ship_command)
