"""`joulehouse ingest nvidia-smi FILE --lake DIR --host H`: import existing logs into the lake.

`joulehouse ingest slurm FILE --lake DIR`: import Slurm accounting (sacct -P) into the lake's jobs.

Exit codes: 0 the file was read (rejected rows, if any, are listed and quarantined); 2 the file
or an option is unusable (missing file, no timestamp column, unknown time zone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import fail, quoted

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
        fail(f"--index-column must be 'gpu' or 'index', got {quoted(index_column)}")
    _check_zone(assume_tz, "Asia/Shanghai")
    try:
        result = ingest_nvidia_smi(file, lake=lake, host=host, gpu_model=gpu_model, assume_tz=assume_tz,
                                   index_column=index_column)
    except (NvidiaSmiError, ValueError) as exc:
        fail(str(exc))
    except OSError as exc:  # the lake cannot be written (read-only, full, no permission)
        fail(f"cannot write the import of {file} into the lake {lake}: {exc}")
    _print_result(file, result)


@ingest_app.command("slurm", epilog="Example: joulehouse ingest slurm jobs.txt --lake var/lake --assume-tz Europe/Berlin")
def slurm_command(
    file: Path = typer.Argument(..., help="Output of `sacct -a -X -P --format=JobID,JobName,User,Account,Partition,"
                                          "State,Start,End,NodeList,AllocTRES`."),
    lake: str = typer.Option(..., "--lake", help="Lake folder or fsspec URL holding the nodes' gpu_samples (jobs lands under it)."),
    assume_tz: str = typer.Option("UTC", "--assume-tz", help="Zone of sacct's times (they carry none), e.g. Europe/Berlin."),
) -> None:
    """Import Slurm accounting: each job's GPUs to the lake's jobs, bad lines quarantined with reasons.

    Example: sacct -a -X -P -S 2026-11-30 --format=... > jobs.txt; joulehouse ingest slurm jobs.txt --lake /srv/lake
    """
    from joulehouse.collectors.ingest.slurm import SlurmError, ingest_slurm

    _check_zone(assume_tz, "Europe/Berlin")
    try:
        result, skipped = ingest_slurm(file, lake=lake, assume_tz=assume_tz)
    except SlurmError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the import of {file} into the lake {lake}: {exc}")
    rules: dict[str, int] = {}
    for rule in result.table.column("gpu_assignment").to_pylist():
        rules[rule] = rules.get(rule, 0) + 1
    jobs = len(set(result.table.column("job_id").to_pylist()))
    typer.echo(f"{file}: {jobs} jobs imported as {result.good_rows} job-GPU rows, {result.bad_rows} lines rejected")
    for rule, count in sorted(rules.items()):
        typer.echo(f"  {count} GPUs placed by {rule}")
    for why, count in sorted(skipped.items()):
        typer.echo(f"  {count} jobs not stored: {why}")
    _print_result(file, result, summary=False)


def _print_result(file: Path, result, *, summary: bool = True) -> None:
    """What an import did: rows, notes, rejects by reason (with one example), files written."""
    if summary:
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
    """Add `ingest` (with `ingest nvidia-smi` and `ingest slurm`) to the joulehouse app."""
    app.add_typer(ingest_app, name="ingest")


def _check_zone(zone: str, example: str) -> None:
    """Fail (exit 2) naming the flag when --assume-tz is no IANA zone, before the file is read."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        fail(f"--assume-tz {quoted(zone)} is not an IANA time zone such as 'UTC' or {example!r}")
