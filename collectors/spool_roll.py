"""A closed spool segment into the lake: its rows the lake takes, and the rows it refuses set aside.

A segment's rows go into one lake file per (date, host) partition, named after the segment, so
rolling the same segment twice rewrites the same files. Rows no lake can take (a host that cannot
name a folder, a value the dataset's schema refuses, as an older collector's segment can hold)
are set aside as `<segment>.rejected`, an Arrow stream of those rows alone, with
`<segment>.rejected.reason` saying why, for a person: before, one such row set the whole segment
aside and its good rows never reached the lake.

The refused rows are found by looking where the cause is known (a host that cannot name a folder,
a NULL in a required column, an integer past its column's type: one mask each, then one conversion
to say the reason), and by halving, breadth first, for the rest: each part that fails is halved
again, so one bad row of 500,000 costs about 40 conversions of shrinking parts and a cause spread
over every eighth row about two per row. A segment refused everywhere for one cause (a required
column missing) is seen on an empty slice first and costs one. Past MAX_CONVERSIONS (a few
seconds) a part still refused is set aside whole: nothing is lost either way, such rows only
wait for a person.
"""

from __future__ import annotations

import logging
import os
from collections import Counter, deque
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import (DATASETS, PARTITION_HOST_COLUMN, SORT_KEYS, TIME_COLUMN, SchemaError, conform,
                                         signed_integer_bounds)
from joulehouse.collectors.writer import LakeWriteError, WrittenFile, check_host_name, partition_dir, write_parquet_atomic

log = logging.getLogger(__name__)
MAX_CONVERSIONS = 65_536


def roll_to_lake(lake: Path, dataset: str, table: pa.Table, segment_id: str) -> list[WrittenFile]:
    """Write `table` as one file per (date, host) partition named after `segment_id`; ValueError
    (nothing written) where a row cannot go into the lake."""
    table, folders, dates, hosts = _partitioned(lake, dataset, table)
    written = []
    for (date, host), folder in folders.items():
        part = table.filter(pc.and_(pc.equal(dates, date), pc.equal(hosts, host)))
        part = part.sort_by(SORT_KEYS[dataset])
        first = part.column(TIME_COLUMN[dataset])[0].value
        written.append(write_parquet_atomic(part, folder / f"part-{first:016d}-{segment_id}.parquet"))
    return written


def _partitioned(lake: Path, dataset: str, table: pa.Table) -> tuple[pa.Table, dict, pa.ChunkedArray, pa.ChunkedArray]:
    """`table` conformed, and every partition's folder named before any is written: a host that
    cannot name one refuses the rows with none of them in the lake (a later roll would write them twice)."""
    table = conform(dataset, table)
    dates = pc.strftime(table.column(TIME_COLUMN[dataset]), format="%Y-%m-%d")
    hosts = table.column(PARTITION_HOST_COLUMN[dataset])
    folders = {(date, host): partition_dir(lake, dataset, date, host)
               for date in sorted(set(dates.to_pylist()))
               for host in sorted(set(hosts.filter(pc.equal(dates, date)).to_pylist()))}
    return table, folders, dates, hosts


def roll_or_set_aside(path: Path, lake: Path, dataset: str, table: pa.Table, segment_id: str) -> list[WrittenFile]:
    """roll_to_lake; where some rows cannot go into the lake, the others go and those are set
    aside beside the segment (module doc). A LakeWriteError (an OSError) goes on up, the set-aside's
    own write failing included: the segment stays for a retry, which writes the same lake files."""
    try:
        return roll_to_lake(lake, dataset, table, segment_id)
    except (ValueError, pa.ArrowNotImplementedError):  # pa.ArrowInvalid is a ValueError too
        pass
    try:
        _storable(lake, dataset, table.slice(0, 0))
    except ValueError as every_row:  # a required column missing, a type none of whose values convert
        _set_aside(path, table.schema, [(table, str(every_row))], whole=True)
        return []
    known, rest = _refused_by_cause(table, _causes(dataset, table))
    taken, refused = split_refused(rest, lambda rows: _partitioned(lake, dataset, rows))
    written = roll_to_lake(lake, dataset, taken, segment_id) if taken.num_rows else []
    _set_aside(path, table.schema, known + refused, whole=not taken.num_rows)
    return written


def _causes(dataset: str, table: pa.Table) -> list[tuple[pa.ChunkedArray, str]]:
    """(mask, reason) of the rows each known cause refuses, found by looking at the values as
    conform would store them, not by halving (a segment of 500,000 rows with one bad GPU of eight
    took a million conversions, and its start 44 s): hosts that cannot name a folder, NULLs in a
    required column, integers past their column's type. A mask that cannot be made (a type the
    comparison does not take) is left out: the halving finds those rows."""
    schema = DATASETS[dataset]
    causes = []
    host_column = PARTITION_HOST_COLUMN[dataset]
    bounds = signed_integer_bounds(schema)
    for f in schema:
        if f.name not in table.column_names:
            continue
        try:
            column = table.column(f.name)
            if not f.nullable and column.null_count:
                causes.append((pc.is_null(column), f"{dataset}.{f.name}: NULL values in a required column"))
            if f.name == host_column:
                causes += _bad_hosts(pc.cast(column, pa.string()))
            if f.name in bounds and pa.types.is_integer(column.type) and column.type != f.type:
                low, high = bounds[f.name]
                past = pc.greater(column, high) if pa.types.is_unsigned_integer(column.type) \
                    else pc.or_(pc.less(column, low), pc.greater(column, high))
                causes.append((pc.fill_null(past, False),
                               f"{dataset}.{f.name}: cannot store {column.type} as {f.type}: values past {low} to {high}"))
        except (pa.ArrowException, ValueError) as exc:
            log.info("spool roll: no mask for %s.%s (%s); the halving finds its rows", dataset, f.name, exc)
    return causes


def _bad_hosts(hosts: pa.ChunkedArray) -> list[tuple[pa.ChunkedArray, str]]:
    """(mask, reason) per host that cannot name a partition folder (the writer's own check)."""
    causes = []
    for host in pc.unique(hosts).to_pylist():
        if host is None:
            continue  # the required column's NULL mask
        try:
            check_host_name(host)
        except ValueError as exc:
            causes.append((pc.fill_null(pc.equal(hosts, host), False), str(exc)))
    return causes


def _refused_by_cause(table: pa.Table,
                      causes: list[tuple[pa.ChunkedArray, str]]) -> tuple[list[tuple[pa.Table, str]], pa.Table]:
    """([(rows a cause refuses, its reason)], the other rows); a row goes with the first cause
    that takes it."""
    refused = []
    left = pa.chunked_array([pa.repeat(pa.scalar(True), table.num_rows)])
    for mask, reason in causes:
        mine = pc.and_(mask, left)
        rows = table.filter(mine)
        if rows.num_rows:
            refused.append((rows, reason))
            left = pc.and_(left, pc.invert(mine))
    return refused, table.filter(left)


def _storable(lake: Path, dataset: str, table: pa.Table) -> None:
    """_partitioned, and the columns' types ones Parquet can hold: an extra column of a type it
    cannot (an interval) failed the write of every lake file, at every start."""
    table = _partitioned(lake, dataset, table)[0]
    try:
        pq.ParquetWriter(pa.BufferOutputStream(), table.schema).close()
    except pa.ArrowNotImplementedError as exc:
        raise SchemaError(f"{dataset}: a column Parquet cannot store: {exc}") from None


def split_refused(table: pa.Table, check) -> tuple[pa.Table, list[tuple[pa.Table, str]]]:
    """(rows `check` takes, [(rows it refuses, its ValueError's message)] in the rows' order).

    Halved breadth first: every part of one size is tried before any is halved again, so the
    good parts are taken whatever the pattern of the bad rows. Past MAX_CONVERSIONS a part still
    refused is not halved further but set aside whole (said in its reason)."""
    taken: list[pa.Table] = []
    refused: list[tuple[int, pa.Table, str]] = []
    pending, conversions = deque([(0, table)]), 0
    while pending:
        offset, rows = pending.popleft()
        conversions += 1
        try:
            check(rows)
        except ValueError as exc:
            if rows.num_rows == 1:
                refused.append((offset, rows, str(exc)))
            elif conversions >= MAX_CONVERSIONS:
                refused.append((offset, rows, f"not checked row by row (more than {MAX_CONVERSIONS} conversions; "
                                              f"some row refused: {exc})"))
            else:
                half = rows.num_rows // 2
                pending += [(offset, rows.slice(0, half)), (offset + half, rows.slice(half))]
            continue
        taken.append(rows)
    refused.sort(key=lambda part: part[0])
    return (pa.concat_tables(taken) if taken else table.slice(0, 0)), [(rows, why) for _, rows, why in refused]


def _set_aside(path: Path, schema: pa.Schema, refused: list[tuple[pa.Table, str]], whole: bool) -> None:
    """The refused rows as `<path>.rejected`, durable before the segment goes (written whole,
    fsynced and renamed, with its folder: the unlink of the segment could otherwise outlive them
    in a power cut), with their reasons, counted, in `.reason` beside it; `whole`: every row was
    refused, and the segment itself is set aside, its bytes as they were. A write that fails
    raises LakeWriteError, the segment kept."""
    rejected = path.with_suffix(".rejected")
    reasons: Counter[str] = Counter()
    for rows, reason in refused:
        reasons[reason] += rows.num_rows
    text = "".join(f"{n} row{'s' if n != 1 else ''}: {reason}\n" for reason, n in reasons.most_common())
    try:  # first, and at most a warning: on a full disk it failed after the rename, and crashed the start
        path.with_suffix(".rejected.reason").write_text(text, encoding="utf-8")
    except OSError as unwritten:
        log.warning("spool segment %s: cannot write why it is set aside (%s); the reasons are: %s",
                    path.name, unwritten.strerror or unwritten, text.strip())
    try:
        if whole:
            os.replace(path, rejected)
            try:
                lakefs.fsync_dir(path.parent)
            except OSError as unsynced:  # renamed already: raised, the caller kept a segment that is gone
                log.warning("spool segment %s set aside, its folder not synced (%s)", path.name, unsynced)
        else:
            stream = pa.BufferOutputStream()
            with pa.ipc.new_stream(stream, schema) as writer:
                for rows, _ in refused:
                    writer.write_table(rows.cast(schema))
            lakefs.write_file_atomically(rejected, stream.getvalue().to_pybytes(), 0o640)
            path.unlink()
    except OSError as exc:
        raise LakeWriteError(exc.errno, f"cannot set aside the refused rows of spool segment {path} "
                                        f"({exc.strerror or exc}); kept for a retry") from exc
    log.error("spool segment %s: %d rows cannot go into the lake (%s); set aside as %s", path.name,
              sum(reasons.values()), "; ".join(reasons), rejected.name)
