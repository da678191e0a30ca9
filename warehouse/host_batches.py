"""Which hosts the build reads together.

The day's readings are checked, paired with their next reading and written host batch by host
batch, so the rows one query sorts and holds stay bounded (a fleet-day of 256 GPUs at 1 Hz is 22 M
readings: sorted at once they spill past DuckDB's memory limit and the build slows several-fold).
A batch is bounded by its readings (counted from the Parquet footers of the day's files) as well
as by its hosts: each batch costs a fixed part (its queries, its file), so four hosts of a
three-hour day ran 8x the batches of four hosts of a whole day for the same readings, and the
seconds per million readings rose with the fleet (1,024 GPUs x 3 h: 2.5 s/M against 1.8-2.1 at 64
and 256 GPUs x 24 h). Counted in readings, a host sampling at 10 Hz gets no more rows per sort either.
Everything the batched relations compute is per GPU, so a batch is exact as long as every reading
of a GPU falls in one batch: hosts whose readings name the same GPU (a GPU moved between servers
during the day) are kept together, whatever the batch size.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import duckdb

from joulehouse.warehouse.sqlio import SqlFiles

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")


def lake_hosts(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[str]:
    """Hosts with gpu_samples files for `day` or its neighbouring days (from the listing only)."""
    dates = [day - dt.timedelta(days=1), day, day + dt.timedelta(days=1)]
    return [h for (h,) in BUILD_SQL.execute(con, "lake_hosts", {"dates": dates}).fetchall() if h is not None]


def group_hosts(host_gpus: list[tuple[str, str]], hosts: list[str], hosts_per_batch: int,
                host_readings: Mapping[str, int] | None = None, readings_per_batch: int | None = None) -> list[list[str]]:
    """`hosts` in batches of at most `hosts_per_batch` hosts and, with `host_readings` (host ->
    readings), at most `readings_per_batch` readings; hosts that share a GPU in `host_gpus` (pairs
    of host, gpu_uuid) always in the same batch (such a group, or one host, may exceed the bounds).
    Deterministic: groups in the order of their first host, sorted."""
    if hosts_per_batch < 1:
        raise ValueError(f"hosts_per_batch must be at least 1, got {hosts_per_batch}")
    if readings_per_batch is not None and readings_per_batch < 1:
        raise ValueError(f"readings_per_batch must be at least 1, got {readings_per_batch}")
    readings = host_readings or {}
    parent = {h: h for h in hosts}

    def root(h: str) -> str:
        while parent[h] != h:
            parent[h] = parent[parent[h]]
            h = parent[h]
        return h

    first_host: dict[str, str] = {}
    for host, gpu in host_gpus:
        if host not in parent:
            continue
        if gpu in first_host:
            a, b = root(first_host[gpu]), root(host)
            if a != b:
                parent[max(a, b)] = min(a, b)
        else:
            first_host[gpu] = host
    groups: dict[str, list[str]] = {}
    for h in sorted(hosts):
        groups.setdefault(root(h), []).append(h)
    batches: list[list[str]] = []
    batch_readings = 0
    for group in sorted(groups.values()):
        group_readings = sum(readings.get(h, 0) for h in group)
        fits_readings = readings_per_batch is None or batch_readings + group_readings <= readings_per_batch
        if batches and len(batches[-1]) + len(group) <= hosts_per_batch and fits_readings:
            batches[-1].extend(group)
            batch_readings += group_readings
        else:
            batches.append(list(group))
            batch_readings = group_readings
    return batches


def host_readings(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, int]:
    """Host -> readings in `files` (gpu_samples files), from their footers."""
    if not files:
        return {}
    return dict(BUILD_SQL.execute(con, "host_readings", {"files": files}).fetchall())


def host_batches(con: duckdb.DuckDBPyConnection, day: dt.date, margin_s: float, hosts_per_batch: int,
                 readings_per_batch: int | None = None, day_files: list[str] | None = None) -> list[list[str]]:
    """The build's host batches for `day`: at most `hosts_per_batch` hosts and, counted in
    `day_files` (the day's own gpu_samples files), `readings_per_batch` readings each; one batch
    (no pre-scan of the GPUs) when everything fits in one."""
    hosts = lake_hosts(con, day)
    readings = host_readings(con, day_files or []) if readings_per_batch is not None else {}
    if len(hosts) <= hosts_per_batch and (readings_per_batch is None or sum(readings.values()) <= readings_per_batch):
        return [hosts] if hosts else []
    pairs = BUILD_SQL.execute(con, "host_gpus", {"day": day, "margin_s": margin_s}).fetchall()
    return group_hosts(pairs, hosts, hosts_per_batch, readings, readings_per_batch)
