"""`joulehouse ingest nvidia-smi FILE --lake DIR --host H`: import existing logs into the lake.

Exit codes: 0 the file was read (rejected rows, if any, are listed and quarantined); 2 the file
or an option is unusable (missing file, no timestamp column, unknown time zone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

ingest_app = typer.Typer(no_args_is_help=True, help="Import existing telemetry logs into the lake.")


@ingest_app.command("nvidia-smi", epilog="Example: joulehouse ingest nvidia-smi gpu-log.csv --lake var/lake --host node-07")
def nvidia_smi_command(
    file: Path = typer.Argument(..., help="CSV written by `nvidia-smi --query-gpu=timestamp,... --format=csv`."),
    # str, not Path: Path("s3://b/lake") is "s3:/b/lake", a local folder
    lake: str = typer.Option(..., "--lake", help="Lake folder or fsspec URL, e.g. s3://bucket/lake (gpu_samples lands under it)."),
    host: str = typer.Option(..., "--host", help="Host the log was recorded on."),
    gpu_model: Optional[str] = typer.Option(None, "--gpu-model", help="GPU model when the log has no `name` column."),
    assume_tz: str = typer.Option("UTC", "--assume-tz", help="Zone of timestamps written without an offset."),
    index_column: Optional[str] = typer.Option(
        None, "--index-column", help="Column to trust for the GPU index when `gpu` and `index` disagree."),
) -> None:
    """Import one nvidia-smi CSV log: good rows to gpu_samples, bad rows quarantined with reasons."""
    from joulehouse.collectors.ingest.nvidia_smi import NvidiaSmiError, ingest_nvidia_smi

    if index_column not in (None, "gpu", "index"):
        typer.echo(f"error: --index-column must be 'gpu' or 'index', got {index_column!r}", err=True)
        raise typer.Exit(2)
    try:
        result = ingest_nvidia_smi(file, lake=lake, host=host, gpu_model=gpu_model, assume_tz=assume_tz,
                                   index_column=index_column)
    except (NvidiaSmiError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    except OSError as exc:  # the lake cannot be written (read-only, full, no permission)
        typer.echo(f"error: cannot write the import of {file} into the lake {lake}: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(f"{file}: {result.good_rows} rows imported, {result.bad_rows} rejected")
    for note in result.notes:
        typer.echo(f"  note: {note}")
    for kind, count in sorted(result.reasons().items()):
        example = next(r for r in result.rejected if r.reason.startswith(kind))
        typer.echo(f"  rejected {count} x {kind} (e.g. {file}:{example.line}: {example.reason})")
    if result.quarantine_path:
        typer.echo(f"  rejected rows kept in {result.quarantine_path}")
    for written in result.written:
        typer.echo(f"  wrote {written.path} ({written.rows} rows)")
    for path in result.rewritten:
        typer.echo(f"  took this log's earlier rows out of {path} (compacted)")


def register(app: typer.Typer) -> None:
    """Add `ingest` (with `ingest nvidia-smi`) to the joulehouse app."""
    app.add_typer(ingest_app, name="ingest")
