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
) -> None:
    """Ship finished Parquet files to the central lake, exactly once each, resumable."""
    import logging

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
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("ship", total=total_bytes)
        try:
            report = shipper.run(after_file=lambda entry: progress.advance(task, entry.bytes))
        except ShipError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1)
    typer.echo(f"shipped {len(report.shipped)} files ({report.bytes_shipped:,} bytes) to {to}; "
               f"{report.skipped} already there; {report.reshipped_changed} changed since shipped and sent again"
               + (f"; {report.already_compacted} already merged by the destination's compaction"
                  if report.already_compacted else ""))


def register(app: typer.Typer) -> None:
    """Add `ship` to the joulehouse app."""
    app.command("ship", epilog="Example: joulehouse ship --lake /var/lib/joulehouse/lake --to s3://energy-lake/lake")(ship_command)
