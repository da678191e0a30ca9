"""`joulehouse compact --lake DIR --date D`: rewrite each host's day in the central lake as one
file per dataset (what the daily DAG does before the build; warehouse/lake_compact.py).

Run it on the central lake only, never on a node's own lake (ship would send the rows again).
Exit 2: bad input (a day not over yet, a host with no partition that day, an object-store lake)
or a partition that could not be compacted (another compaction holds it, an unreadable intent;
the hosts before it are done); 0 otherwise, with the files left in place named and why.
"""

from __future__ import annotations

import datetime as dt
from typing import Optional

import typer

from joulehouse.cli.options import fail, parse_day


def compact_command(
    lake: str = typer.Option(..., "--lake", help="The central lake folder."),
    date: str = typer.Option(..., "--date", help="UTC day to compact, YYYY-MM-DD (a closed day)."),
    host: Optional[list[str]] = typer.Option(None, "--host", help="Only these hosts (repeatable; default all)."),
) -> None:
    """Compact a day's lake partitions: one file per dataset and host, every row kept."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from joulehouse.collectors import lakefs
    from joulehouse.collectors.schema import DATASETS
    from joulehouse.warehouse.lake_compact import CompactionError, compact_host_day, day_partition_hosts

    day = parse_day(date, "--date")
    # the lake first: a typo in --lake with today's date was told the day is not over
    if not lakefs.is_url(lake) and not any(lakefs.join(lake, dataset).is_dir() for dataset in DATASETS):
        fail(f"{lake} is not a lake (no {', '.join(d + '/' for d in DATASETS)} folder in it)")
    if day >= dt.datetime.now(dt.timezone.utc).date():
        fail(f"{day} is not over yet (UTC); compact a closed day")
    try:
        present = day_partition_hosts(lake, day)
        unknown = sorted(set(host or []) - set(present))
        if unknown:
            fail(f"no partition of {day} for hosts {unknown} in {lake}")
        hosts = list(dict.fromkeys(host)) if host else present  # `--host h1 --host h1` compacted and counted h1 twice
        if not hosts:
            typer.echo(f"{day}: no partition of this day in {lake}; nothing to compact")
            return
        reports = []
        # on stderr, and only at a terminal: piped, the transient bar left a blank first line
        console = Console(stderr=True)
        with Progress(TextColumn("compact {task.description}"), BarColumn(), MofNCompleteColumn(),
                      transient=True, console=console, disable=not console.is_terminal) as progress:
            task = progress.add_task(day.isoformat(), total=len(hosts))
            errors = []
            for name in hosts:
                try:
                    reports += compact_host_day(lake, day, name)
                except CompactionError as exc:  # the other hosts still get compacted
                    reports += exc.reports
                    errors.append(str(exc))
                except ValueError as exc:  # a host= folder that names no host ('fd00%3A%3A7'), as daily.py says
                    errors.append(f"host={name} of {day} is not compacted: {exc}")
                progress.advance(task)
    except CompactionError as exc:
        fail(str(exc))
    before = sum(r.files_before for r in reports)
    after = sum(r.files_after for r in reports)
    bytes_before, bytes_after = sum(r.bytes_before for r in reports), sum(r.bytes_after for r in reports)
    typer.echo(f"{day}: {len(hosts)} hosts, {before:,} files -> {after:,}, "
               f"{bytes_before:,} -> {bytes_after:,} bytes, {sum(r.rows for r in reports):,} rows kept")
    for r in reports:
        for problem in r.left_unreadable:
            typer.echo(f"left in place: {r.dataset}/date={r.day}/host={r.host}/{problem}")
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    if errors:
        raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add `compact` to the joulehouse app."""
    app.command("compact", epilog="Example: joulehouse compact --lake /srv/lake --date 2026-06-10")(compact_command)
