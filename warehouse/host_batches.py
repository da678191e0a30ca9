"""Which hosts the build reads together.

The day's readings are checked, paired with their next reading and written host batch by host
batch, so the rows one query sorts and holds stay bounded (a fleet-day of 256 GPUs at 1 Hz is 22 M
readings: sorted at once they spill past DuckDB's memory limit and the build slows several-fold).
Everything the batched relations compute is per GPU, so a batch is exact as long as every reading
of a GPU falls in one batch: hosts whose readings name the same GPU (a GPU moved between servers
during the day) are kept together, whatever the batch size.
"""

from __future__ import annotations

import datetime as dt
import duckdb

from joulehouse.warehouse.sqlio import SqlFiles

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")


def lake_hosts(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[str]:
    """Hosts with gpu_samples files for `day` or its neighbouring days (from the listing only)."""
    dates = [day - dt.timedelta(days=1), day, day + dt.timedelta(days=1)]
    return [h for (h,) in BUILD_SQL.execute(con, "lake_hosts", {"dates": dates}).fetchall() if h]


def group_hosts(host_gpus: list[tuple[str, str]], hosts: list[str], hosts_per_batch: int) -> list[list[str]]:
    """`hosts` in batches of at most `hosts_per_batch`, hosts that share a GPU in `host_gpus`
    (pairs of host, gpu_uuid) always in the same batch (such a group may exceed the size).
    Deterministic: groups in the order of their first host, sorted."""
    if hosts_per_batch < 1:
        raise ValueError(f"hosts_per_batch must be at least 1, got {hosts_per_batch}")
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
    for group in sorted(groups.values()):
        if batches and len(batches[-1]) + len(group) <= hosts_per_batch:
            batches[-1].extend(group)
        else:
            batches.append(list(group))
    return batches


def host_batches(con: duckdb.DuckDBPyConnection, day: dt.date, margin_s: float, hosts_per_batch: int) -> list[list[str]]:
    """The build's host batches for `day`; one batch (no pre-scan) when the hosts fit in one."""
    hosts = lake_hosts(con, day)
    if len(hosts) <= hosts_per_batch:
        return [hosts] if hosts else []
    pairs = BUILD_SQL.execute(con, "host_gpus", {"day": day, "margin_s": margin_s}).fetchall()
    return group_hosts(pairs, hosts, hosts_per_batch)
