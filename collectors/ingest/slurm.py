"""Import Slurm accounting into the lake's `jobs` dataset (one row per job and GPU it held).

The input is what
`sacct -a -X -P --format=JobID,JobName,User,Account,Partition,State,Start,End,NodeList,AllocTRES`
prints: a header line, then one line per job, fields separated by '|'. The account is the team,
the user the user; JobName, Partition and State are kept as extra columns (`job_name`,
`partition`, `state`).

Times: sacct prints local time without a zone (`2026-11-30T08:00:00`): read in `assume_tz`
(UTC by default; the notes say which), stored in UTC. An End of `Unknown`, `None` or empty is a
job still running: its `ended_at` is the time of the export (its file's modification time, the
import time where that is earlier: a copy without its times) and its `state` says RUNNING, so
importing the export again later (the same file, grown) replaces the row with the real end. (The
import time gave a month-old export's running jobs the month after it, and outlasted the real end
another export gave: the readers keep a holding's latest end.) Importing a file again replaces
the rows it gave for the jobs it names and keeps those of jobs it no longer names: a sacct export
is a window (`sacct -S <day> > jobs.txt` each day), and the next day's export under the same name
had deleted the day before's jobs. A job that
never started (Start `Unknown`/`None`, NodeList `None assigned`), holds no GPU (no `gres/gpu`
in AllocTRES) or ended as it started held no GPU time: it is counted, not stored.

Which GPUs a job held (the extra column `gpu_assignment` says, per row, how it was decided):
- `whole-node`: a job with at least as many GPUs per node as its node has (the node's GPUs are
  those its gpu_samples show on the job's days) holds all of them.
- `process-map`: a job holding part of a node holds the GPUs on which the collector's process map
  (`gpu_processes`) saw its processes, as many as it was given there (a GPU it held without a
  process on it is taken by the next rule). The map knows a job by the id in its cgroup, which for
  an array task (JobID `123_4`) is its JobIDRaw: add JobIDRaw to --format and it is used.
- `lowest-free-index`: part of a node and no process map: the lowest-indexed GPUs of the node
  not held by a job imported before it (jobs taken in start order) at that time, nor seen in the
  process map in use by another job of the export while it ran (one that started later too),
  which is how Slurm's cons_tres selection hands out GPUs on a node. A holding the lake's jobs already place
  (an earlier, overlapping export: a daily `sacct -S <day>` of a job across midnight) keeps the
  GPUs it was given there, so its two copies are one. It keeps each job's GPU-hours exact
  (N GPUs for its duration), so per-account GPU-hours and energy are right on whole-node and
  exclusive-GPU fleets even where the GPU chosen may not be the one the job had.
The GPU count per node is the job's gres/gpu spread over its nodes, the first nodes taking one more
where it does not divide, and what a node cannot hold going to the others: always gres/gpu in all
(3 on two nodes is 2 + 1; 12 on an 8-GPU and a 4-GPU node is 8 + 4). Only a job asking more than
all its nodes hold is given them whole (the notes say so).

Rejected lines (quarantined with their line number and reason, lake_import): wrong field count
(a '|' inside a JobName is put back together first, since JobName is the only free-text field),
unreadable times, an End before the Start, a host list or TRES Slurm would not print, a JobID
repeated with the same Start (a requeued job, `sacct -D`, or a reused id, is one holding per
Start), a node with no GPUs in the lake's gpu_samples on the job's days (import or collect GPU
data first), times before 2010 or more than a day ahead. An End that reads before its Start in the
hour a zone repeats is read as that hour's second pass, the only one after the Start.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from joulehouse.collectors.ingest.hostlist import HostListError, expand_hostlist, gpus_in_tres
from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.collectors import lakefs
from joulehouse.collectors.ingest.lake_gpus import LakeGpus, read_columns
from joulehouse.collectors.ingest.lake_import import (LOG_ID_COLUMN, RejectedRow, ledger_partitions, log_id, read_json,
                                                      record_landing)
from joulehouse.collectors.ingest.lake_stream import land_log
from joulehouse.collectors.input_file import text_lines
from joulehouse.collectors.ingest.local_time import (SkippedLocalTime, check_plausible, in_repeated_hour, local_timestamp,
                                                     second_pass)
from joulehouse.collectors.ingest.nvidia_smi import IngestResult
from joulehouse.collectors.schema import JOBS, conform
from joulehouse.collectors.writer import partition_files

SOURCE = "slurm"
# The identity under which an export is known (lake_import.log_id): one accounting, many hosts.
LOG_HOST = "slurm"
FIELDS = ["JobID", "JobName", "User", "Account", "Partition", "State", "Start", "End", "NodeList", "AllocTRES"]
_NOT_SET = {"", "unknown", "none"}
# Bytes that are not UTF-8 come through errors="surrogateescape" as these code points.
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
# Longest job whose days are searched for its nodes' GPUs (a longer one reads its first days only).
MAX_JOB_DAYS = 62
# Longest line read (a NodeList of thousands of nodes, a long JobName fit); past it the file is
# refused at that line rather than read whole (a file without newlines would fill the memory).
MAX_LINE_CHARS = 1_000_000
EXTRA_FIELDS = [pa.field("job_name", pa.string()), pa.field("partition", pa.string()),
                pa.field("state", pa.string()), pa.field("gpu_assignment", pa.string())]
ROW_SCHEMA = pa.schema(list(JOBS) + EXTRA_FIELDS)


class SlurmError(ValueError):
    """The file as a whole is not a sacct -P export (the message says why)."""


@dataclass
class _Job:
    line: int
    text: str
    job_id: str
    name: str
    user: str | None
    account: str | None
    partition: str | None
    state: str
    started_at: datetime
    ended_at: datetime
    hosts: list[str]
    gpus: int
    # The id its cgroup carries (job_<id>): JobIDRaw where the export has it (an array task's
    # JobID is 123_4, its cgroup job_128), else JobID.
    cgroup_id: str


def read_sacct(path: str | Path, *, lake: str | Path, assume_tz: str = "UTC",
               now: datetime | None = None) -> tuple[IngestResult, dict[str, int]]:
    """Parse a sacct export and place its jobs on the lake's GPUs. Returns the result (rows in
    `table`, rejected lines) and the jobs counted but not stored, by why."""
    path = Path(path)
    now = now or datetime.now(timezone.utc)
    exported_at = _exported_at(path, now)
    try:
        zone = ZoneInfo(assume_tz)
    except (ValueError, ZoneInfoNotFoundError):
        raise SlurmError(f"assume_tz {assume_tz!r} is not an IANA time zone such as 'UTC' or 'Europe/Berlin'") from None
    rejected: list[RejectedRow] = []
    skipped: dict[str, int] = {}
    jobs: list[_Job] = []
    first_line: dict[tuple[str, datetime], int] = {}
    with text_lines(path, "sacct export", MAX_LINE_CHARS, SlurmError, errors="surrogateescape") as lines:
        header = next(lines, "").lstrip("\ufeff").rstrip("\r\n").split("|")
        missing = [f for f in FIELDS if f not in header]
        if header == [""]:
            raise SlurmError(f"{path} is empty; expected sacct's header line {'|'.join(FIELDS)}")
        if missing:
            raise SlurmError(f"{path}: header lacks {', '.join(missing)}; export with "
                             f"sacct -a -X -P --format={','.join(FIELDS)}")
        twice = sorted({f for f in header if header.count(f) > 1})
        if twice:  # a row's dict keeps the last copy: End named twice gave a job 22 GPU-hours for 1
            raise SlurmError(f"{path}: the header names {twice} twice; which column is the job's is not "
                             f"known (export with sacct -a -X -P --format={','.join(FIELDS)})")
        for number, line in enumerate(lines, start=2):  # one line at a time: an export may be large
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                job = _parse_line(line, header, number, zone, now, exported_at)
            except _Skip as skip:
                skipped[str(skip)] = skipped.get(str(skip), 0) + 1
                continue
            except (ValueError, HostListError) as exc:
                rejected.append(RejectedRow(number, str(exc), line[:2000]))
                continue
            # a requeued job (sacct -D) or a reused id: one holding per Start; rejected as a duplicate,
            # the requeue's first, short run stood and the real run was lost
            if (job.job_id, job.started_at) in first_line:
                rejected.append(RejectedRow(number, f"duplicate JobID: {job.job_id} starting at "
                                                    f"{job.started_at.isoformat()} first at line "
                                                    f"{first_line[job.job_id, job.started_at]}", line[:2000]))
                continue
            first_line[job.job_id, job.started_at] = number
            jobs.append(job)
    oversized: list[str] = []
    table, placement_rejects = _place(jobs, LakeGpus(lake), oversized)
    rejected = sorted(rejected + placement_rejects, key=lambda r: r.line)
    notes = [f"times without a zone read as {assume_tz}"]
    if oversized:
        # gres/gpu=64 on an 8-GPU node: a typo or a mis-exported TRES, kept as the whole node
        notes.append(f"{len(oversized)} job(s) asked for more GPUs than their nodes have, each given its nodes whole "
                     f"({'; '.join(oversized[:3])}{'; ...' if len(oversized) > 3 else ''})")
    repeated = sum(in_repeated_hour(t, zone) for j in jobs for t in (j.started_at, j.ended_at))
    if repeated:
        # sacct writes no offset, and a job's order says nothing about which pass it meant.
        notes.append(f"{repeated} Start/End times fall in an hour {assume_tz} repeats when its clocks go back: "
                     "written without an offset, they were read as its first pass, an End its first pass put before "
                     "the Start as its second (export with TZ=UTC to be exact)")
    running = sum(1 for j in jobs if j.state.upper().startswith("RUNNING"))
    if running:
        notes.append(f"{running} jobs still running: ended_at is the export's time "
                     f"({exported_at.isoformat(timespec='seconds')}, its file's modification time or the import's)")
    return IngestResult(path=path, table=table, rejected=rejected, notes=notes), skipped


class _Skip(Exception):
    """A job that held no GPU time: counted by the reason, not stored, not a bad line."""


def _exported_at(path: Path, now: datetime) -> datetime:
    """When sacct wrote the export: its file's modification time, or `now` where that is earlier."""
    try:
        modified_at = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    except (OSError, OverflowError, ValueError):
        return now
    return min(modified_at, now)


def _parse_line(line: str, header: list[str], number: int, zone: ZoneInfo, now: datetime,
                exported_at: datetime) -> _Job:
    if _NOT_UTF8.search(line):
        raise ValueError("bytes that are not UTF-8")
    values = line.split("|")
    extra = len(values) - len(header)
    name_at = header.index("JobName")
    if extra > 0:  # a '|' inside the job name: the only free-text field
        values = values[:name_at] + ["|".join(values[name_at:name_at + extra + 1])] + values[name_at + extra + 1:]
    if len(values) != len(header):
        raise ValueError(f"field count: {len(values)} fields, expected {len(header)}")
    row = dict(zip(header, values))
    job_id = row["JobID"].strip()
    if not job_id:
        raise ValueError("JobID: empty")
    if "." in job_id:
        raise ValueError(f"JobID: {job_id!r} is a job step; export with -X (allocations only)")
    state = row["State"].strip()
    start_text, end_text = row["Start"].strip(), row["End"].strip()
    if start_text.lower() in _NOT_SET or row["NodeList"].strip().lower() in ("", "none assigned"):
        raise _Skip(f"never started ({state.split(' ')[0] or 'no state'})")
    gpus = gpus_in_tres(row["AllocTRES"])
    if gpus == 0:
        raise _Skip("no GPU in AllocTRES")
    started_at = _time("Start", start_text, zone, now)
    if end_text.lower() in _NOT_SET:
        # a Start after the file's time: that time is not the export's (a clock off), the import's is
        ended_at, state = (exported_at if exported_at > started_at else now), state or "RUNNING"
    else:
        ended_at = _time("End", end_text, zone, now)
        if ended_at <= started_at and in_repeated_hour(ended_at, zone):
            # 02:30 CEST to 02:10 CET: read as the first pass the End fell before the Start, and an
            # 8-GPU job was quarantined; the second pass is the only reading after the Start
            ended_at = second_pass(ended_at, zone)
    if ended_at == started_at:
        raise _Skip("ended as it started (no GPU time)")  # an instant OUT_OF_MEMORY: counted, not a bad line
    if ended_at < started_at:
        raise ValueError(f"End: {ended_at.isoformat()} is before Start {started_at.isoformat()}")
    return _Job(number, line, job_id, row["JobName"], row["User"].strip() or None, row["Account"].strip() or None,
                row["Partition"].strip() or None, state, started_at, ended_at,
                list(dict.fromkeys(map(canonical_host, expand_hostlist(row["NodeList"])))), gpus, (row.get("JobIDRaw") or "").strip() or job_id)


def _time(field: str, text: str, zone: ZoneInfo, now: datetime) -> datetime:
    try:
        parsed = local_timestamp(text, zone)
    except SkippedLocalTime as exc:
        raise ValueError(f"{field}: {exc}") from None
    except ValueError:
        raise ValueError(f"{field}: {text!r} is not a time like 2026-11-30T08:00:00") from None
    check_plausible(parsed, field, now)
    return parsed


def _days(job: _Job) -> list[str]:
    first = job.started_at.date()
    count = min((job.ended_at.date() - first).days + 1, MAX_JOB_DAYS)
    return [(first + timedelta(days=i)).isoformat() for i in range(count)]


def _place(jobs: list[_Job], lake: LakeGpus, oversized: list[str] | None = None) -> tuple[pa.Table, list[RejectedRow]]:
    """Rows of (job, GPU) for every job whose nodes' GPUs are known (module docstring's rules);
    `oversized` gets "job J: N GPUs per node on H, which has M" for a job asking more than its
    node holds (it is given the whole node, which the import's notes then say)."""
    rows: dict[str, list] = {name: [] for name in ROW_SCHEMA.names}
    rejected: list[RejectedRow] = []
    # per host: (ended_at, GPU UUIDs) of the jobs placed by the lowest-free-index rule so far
    held: dict[str, list[tuple[datetime, set[str]]]] = {}
    seen_beside = _SeenBeside(jobs, lake)
    for job in sorted(jobs, key=lambda j: (j.started_at, j.line)):
        days = _days(job)
        placed: list[tuple[str, str, str]] = []
        try:
            nodes = {host: lake.gpus_of(host, days) for host in job.hosts}
            for host, node_gpus in nodes.items():
                if not node_gpus:
                    raise ValueError(f"node {host}: no GPUs in the lake's gpu_samples on {days[0]}"
                                     f"{'..' + days[-1] if len(days) > 1 else ''} (collect or import its GPU data first)")
            counts = _per_node(job.gpus, [len(node_gpus) for node_gpus in nodes.values()])
            if oversized is not None and job.gpus > sum(len(g) for g in nodes.values()):
                oversized.append(f"job {job.job_id}: {job.gpus} GPUs on {', '.join(nodes)}, which have "
                                 f"{sum(len(g) for g in nodes.values())}")
            for (host, node_gpus), count in zip(nodes.items(), counts):
                placed += _node_gpus(job, host, node_gpus, count, days, lake, held, seen_beside)
        except ValueError as exc:
            rejected.append(RejectedRow(job.line, str(exc), job.text[:2000]))
            continue
        # held only once the job is placed: a job rejected at its second node had kept GPUs of its
        # first marked busy, and the jobs after it were put on the wrong GPUs
        for host in job.hosts:
            held.setdefault(host, []).append((job.ended_at, {uuid for h, uuid, _ in placed if h == host}))
        n = len(placed)
        for name, value in (("job_id", job.job_id), ("started_at", job.started_at), ("ended_at", job.ended_at),
                            ("user", job.user), ("team", job.account), ("job_name", job.name),
                            ("partition", job.partition), ("state", job.state)):
            rows[name].extend([value] * n)
        for name, column in (("host", 0), ("gpu_uuid", 1), ("gpu_assignment", 2)):
            rows[name].extend(p[column] for p in placed)
    n = len(rows["job_id"])
    for name in ROW_SCHEMA.names:
        if not rows[name]:
            rows[name] = [None] * n
    return conform("jobs", pa.Table.from_pydict(rows, schema=ROW_SCHEMA)), rejected


def _per_node(gpus: int, capacities: list[int]) -> list[int]:
    """The job's `gpus` over its nodes of `capacities`: evenly, the first nodes one more where it
    does not divide, what a node cannot hold to the nodes with room; every node whole where the
    job asks more than they hold."""
    if gpus >= sum(capacities):
        return list(capacities)
    base, extra = divmod(gpus, len(capacities))
    counts = [min(base + (i < extra), cap) for i, cap in enumerate(capacities)]
    for i, cap in enumerate(capacities):
        more = min(cap - counts[i], gpus - sum(counts))
        counts[i] += more
    return counts


class _SeenBeside:
    """Per host, the export's jobs the process map saw there, by start: which GPUs other jobs were
    seen on while a job ran (those were not its own)."""

    def __init__(self, jobs: list[_Job], lake: LakeGpus):
        found: dict[str, list[tuple[datetime, datetime, int, set[str]]]] = {}
        for job in jobs:
            for host in job.hosts:
                seen = lake.job_gpus(host, _days(job), job.cgroup_id)
                if seen:
                    found.setdefault(host, []).append((job.started_at, job.ended_at, job.line, seen))
        self._by_host = {host: sorted(holdings, key=lambda h: (h[0], h[2])) for host, holdings in found.items()}
        self._starts = {host: [h[0] for h in holdings] for host, holdings in self._by_host.items()}
        self._longest = {host: max(h[1] - h[0] for h in holdings) for host, holdings in self._by_host.items()}

    def gpus(self, job: _Job, host: str) -> set[str]:
        """The GPUs of `host` the map saw other jobs on while `job` held its GPUs there."""
        if host not in self._by_host:
            return set()
        starts = self._starts[host]
        # only a holding started within the host's longest one before this job can overlap it
        first = bisect_left(starts, job.started_at - self._longest[host])
        last = bisect_left(starts, job.ended_at)
        return set().union(*(seen for _, ended_at, line, seen in self._by_host[host][first:last]
                             if line != job.line and ended_at > job.started_at))


def _node_gpus(job: _Job, host: str, node_gpus: list[tuple[int, str]], count: int, days: list[str],
               lake: LakeGpus, held: dict[str, list[tuple[datetime, set[str]]]],
               seen_beside: _SeenBeside) -> list[tuple[str, str, str]]:
    """The `count` GPUs the job held on `host`, each with the rule that chose it (module docstring)."""
    if count >= len(node_gpus):
        return [(host, uuid, "whole-node") for _, uuid in node_gpus]
    before = lake.placed_gpus(host, job.started_at.date().isoformat(), job.job_id, job.started_at)
    if len(before) == count and set(before) <= {uuid for _, uuid in node_gpus}:
        # an earlier import placed this holding (an overlapping export): the same GPUs, or the two
        # copies sat on different GPUs and both were counted
        return [(host, uuid, before[uuid] or "lowest-free-index") for _, uuid in node_gpus if uuid in before]
    # Jobs come in start order: a holding that ended before this start never matters again.
    held[host] = [(ended_at, uuids) for ended_at, uuids in held.get(host, []) if ended_at > job.started_at]
    # A GPU the map saw another job on while this one ran was not this one's, even where that job
    # started later: a job without a map was put on the GPU the map showed the next job on, both
    # were charged half of it, and the GPU it held was counted idle.
    busy = set().union(*(uuids for _, uuids in held[host])) | seen_beside.gpus(job, host)
    seen = lake.job_gpus(host, days, job.cgroup_id) or set()
    mapped = [uuid for _, uuid in node_gpus if uuid in seen][:count]
    # the map says which GPUs, the allocation how many: a GPU held without a process on it had
    # halved the job's GPU-hours
    free = [uuid for _, uuid in node_gpus if uuid not in busy and uuid not in mapped]
    rest = (free + [uuid for _, uuid in node_gpus if uuid in busy and uuid not in mapped])[:count - len(mapped)]
    return [(host, uuid, "process-map") for uuid in mapped] + [(host, uuid, "lowest-free-index") for uuid in rest]


def ingest_slurm(path: str | Path, *, lake: str | Path, assume_tz: str = "UTC",
                 now: datetime | None = None) -> tuple[IngestResult, dict[str, int]]:
    """Read a sacct export and land its jobs in `<lake>/jobs` (one file per start day and host),
    its rejected lines in `<lake>/_quarantine/slurm/`. Importing the same file again replaces the
    rows it gave before for the jobs it names, and keeps the others (module docstring)."""
    result, skipped = read_sacct(path, lake=lake, assume_tz=assume_tz, now=now)
    kept = _jobs_no_longer_named(lake, result.path, result.table)
    record_landing(result, land_log(lake, pa.concat_tables([result.table, kept]), result.rejected, source=SOURCE,
                                    host=LOG_HOST, path=result.path, dataset="jobs"))
    if kept.num_rows:
        jobs = pc.count_distinct(kept.column("job_id")).as_py()
        result.notes.append(f"{jobs} job(s) an earlier import of this file gave are not in it now (an export of "
                            "another window under the same name): kept as they were, not removed")
    return result, skipped


def _jobs_no_longer_named(lake: str | Path, path: Path, table: pa.Table) -> pa.Table:
    """The rows an earlier import of the export at `path` gave for jobs `table` does not name.

    Landing replaces all of a file's earlier rows; a sacct export is a window of the accounting
    (`sacct -S <day> > jobs.txt` each day, as the CLI's example has it), not a log that only grows:
    the next day's export under the same name deleted every job of the day before that did not run
    into the new one, and with them its team's GPU-hours. A job the export names again is replaced
    whole (its real end, another --assume-tz)."""
    identity = log_id(SOURCE, LOG_HOST, path)
    root = lakefs.lake_root(lake)
    ledger = read_json(lakefs.join(root, "_imports", SOURCE, f"{identity}.json"))
    named = pa.array(sorted(set(table.column("job_id").to_pylist())), pa.string())
    kept = [table.schema.empty_table()]
    for day, host in sorted(ledger_partitions(ledger, LOG_HOST)):
        for file in partition_files(root, "jobs", day, host):
            rows = read_columns(file, [*table.schema.names, LOG_ID_COLUMN])
            earlier = pc.and_(pc.equal(rows.column(LOG_ID_COLUMN), identity),
                              pc.invert(pc.is_in(rows.column("job_id"), value_set=named)))
            kept.append(rows.filter(pc.fill_null(earlier, False)).drop_columns([LOG_ID_COLUMN]).cast(table.schema))
    return pa.concat_tables(kept)
