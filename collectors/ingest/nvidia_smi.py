"""Import `nvidia-smi --query-gpu=... --format=csv` logs into the lake's gpu_samples.

What real logs look like, and what is done about it:
- headers carry units in brackets and leading spaces (" power.draw [W]"): the field name is the
  part before the bracket; the bracketed unit must be the one the field is stored in
  (collectors/ingest/nvidia_smi_header.py).
- values carry units as text ("20.13 W", "195 MHz", "0 MiB", "0 %", "P8"); "[N/A]", "N/A" and
  "[Not Supported]" are NULL, never 0. A value whose unit is not the field's unit is rejected, and
  so is one written without its unit where the log's rows write it (or with it where they do not)
  and a last line without a line end: a line cut short ('300.00 W' cut to '3').
- the device's own power limits (power.default_limit, power.min_limit, power.max_limit) land in
  power_limit_default_w / _min_w / _max_w as the NVML collector writes them: the recommender takes
  them before the catalogue's guesses (models/device_limits.py).
- timestamps come as "2026/06/11 15:24:31.269" (nvidia-smi's own, local time without a zone: read
  in `assume_tz`, UTC by default, and said so in the notes) or ISO 8601 with an offset
  ("2025-09-08T17:26:50+08:00", converted exactly). Stored in UTC. Across a daylight-saving change
  the hour a zone repeats keeps both passes and a time in the hour it skips is rejected
  (collectors/ingest/local_time.py).
- a header line again part-way through (logs concatenated, nvidia-smi restarted with other
  --query-gpu fields): the rows after it are read by its columns, and the notes say so.
- the GPU index comes from `index`, or from `gpu` when a log has only that. When a log has both
  and they disagree (one 8-GPU log writes index 0 on every row), the row's GPU cannot be told:
  it is rejected with that reason, unless the caller names the column to trust (`index_column`).
- no index, gpu or uuid column, and rows in regular bursts a few ms apart (one row per GPU per
  sweep: several GPUs interleaved): the GPUs cannot be told apart, so the log is refused, naming
  the burst size and period, rather than integrated as one GPU (collectors/ingest/interleaved.py).
  The bursts are looked for in the first INTERLEAVED_PROBE_ROWS such rows: they repeat every sweep.
- no `uuid` column: a stable synthetic UUID "synthetic-<uuid5(host, index)>" is derived, and
  the notes say so.
- no index or gpu column, but a `uuid` column naming a second GPU: the log is refused, naming the
  file and the missing column. gpu_index is a required, non-null column of gpu_samples
  (collectors/schema.py, REQUIRED_COLUMNS), and nothing in such a log gives it: nvidia-smi's index
  is the GPU's place in the host's enumeration (which `-i` and the boot change), not something a
  UUID or the rows' order tells. Every GPU was stored as GPU 0, so the lake held several GPUs at
  index 0 and a Slurm job's GPU 1 was placed on none of them (collectors/ingest/lake_gpus.py). A
  log of one UUID is one GPU: GPU 0, as any log without an index column.
- a second row of a GPU (index and uuid, `[N/A]` being none) at an instant is rejected as a
  duplicate. Logs are in time order, so the check keeps only the readings of the last
  DUPLICATE_WINDOW_S before the log's latest one: memory bounded by the window, not the log. A row
  further back (logs concatenated out of order) is kept unchecked and the notes count it; the
  warehouse build quarantines a second reading of a GPU at one instant (duplicate_key).
- bytes: a UTF-8 byte-order mark opening the file (spreadsheets write one) is skipped and noted; a
  row holding a byte that is not UTF-8, or a byte-order mark (logs concatenated), is rejected with
  that reason, never the whole file; a header line holding one refuses the log, naming its line
  (rejected as a row, its log's later rows were read by the old header's columns). A path that is not a regular file, or a line longer than
  MAX_LINE_CHARS (no newline: not a text log), refuses the file (collectors/input_file.py).
- values too large for their column (an int32 clock of 9,999,999,999 MHz, a float32 above 3.4e38)
  and timestamps no nvidia-smi log can hold (before 2010, when a clock was never set and reads
  1970, or more than a day ahead of now, as 2099) are rejected with the reason, so they neither
  fail the file nor create partitions for those days.

Rejected rows are never dropped silently: `ingest_nvidia_smi` writes them, with their line
number and reason, to `<lake>/_quarantine/nvidia_smi/<file>-<log id>.jsonl` (lake_import).

`ingest_nvidia_smi` streams: it parses CHUNK_ROWS rows at a time and lands each chunk before it
reads on (collectors/ingest/lake_stream.py), so a month-long log imports in the memory of a chunk
and of the duplicate window, and is refused part-way without a trace in the lake.
`read_nvidia_smi_csv` returns the whole log as one table, for logs that fit in memory.
"""

from __future__ import annotations

import csv
import itertools
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from joulehouse.collectors.ingest.log_lines import LineEnds, RecentReadings
from joulehouse.collectors.ingest.interleaved import interleaved_gpus
from joulehouse.collectors.ingest.local_time import LogClock, check_plausible
from joulehouse.collectors.input_file import text_lines
from joulehouse.collectors.ingest.lake_import import RejectedRow, record_landing
from joulehouse.collectors.ingest.lake_stream import LandedImport, LogLanding
from joulehouse.collectors.ingest.nvidia_smi_header import (NvidiaSmiError, glued_header, gpu_index_columns,
                                                            header_names, header_notes)
from joulehouse.collectors.ingest.nvidia_smi_values import (BOM, encoding_problem, field_name, identity_text, is_naive,
                                                            parse_row, printable, read_fields)
from joulehouse.collectors.schema import GPU_SAMPLES, conform
from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.collectors.writer import WrittenFile, check_host_name

SOURCE = "nvidia-smi"
_SYNTHETIC_NS = uuid.UUID("6f1c2a8e-4b7d-5e0f-9a3c-1d2e3f405162")
# A log's lines are a few hundred characters, its header a few thousand with every --query-gpu
# field: a longer line is not such a log, and is refused there rather than read whole.
MAX_LINE_CHARS = 65_536
# Rows parsed before they are landed: a parsed row is ~1 KB of Python values, so ~50 MB a chunk.
CHUNK_ROWS = 50_000
# How far back a duplicate is looked for: a reading misread into the first pass of a repeated
# hour lands an hour behind. ~0.2 KB a reading held: 12 MB for 8 GPUs at 1 Hz.
DUPLICATE_WINDOW_S = 7200
# The rows whose timestamps tell interleaved GPUs (interleaved.py): bursts repeat every sweep, so
# the first 100,000 rows show them as well as the whole log (the Llama-2 log has 42,962).
INTERLEAVED_PROBE_ROWS = 100_000


@dataclass
class IngestResult:
    """Good rows (gpu_samples, source='nvidia-smi'), rejected rows with reasons, and notes on
    what was assumed (synthetic UUIDs, time zone, ignored columns)."""

    path: Path
    table: pa.Table
    rejected: list[RejectedRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    written: list[WrittenFile] = field(default_factory=list)
    quarantine_path: Path | str | None = None
    # Files of the lake an earlier import of this log had its rows compacted into, rewritten without them.
    rewritten: list[Path] = field(default_factory=list)

    @property
    def good_rows(self) -> int:
        return self.table.num_rows

    @property
    def bad_rows(self) -> int:
        return len(self.rejected)

    def reasons(self) -> dict[str, int]:
        """Rejected-row count per reason kind (the text before the first colon)."""
        counts: dict[str, int] = {}
        for r in self.rejected:
            kind = r.reason.split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def synthetic_gpu_uuid(host: str, gpu_index: int) -> str:
    """A stable stand-in UUID for a GPU a log does not identify (same host+index, same UUID)."""
    return f"synthetic-{uuid.uuid5(_SYNTHETIC_NS, f'{host}/{gpu_index}')}"


def read_nvidia_smi_csv(path: str | Path, *, host: str, gpu_model: str | None = None,
                        assume_tz: str = "UTC", index_column: str | None = None,
                        now: datetime | None = None) -> IngestResult:
    """Parse one nvidia-smi CSV log into one table (for a log that fits in memory; `ingest_nvidia_smi`
    streams). `host` names the machine it came from; `gpu_model` is used when the log has no `name`
    column; `assume_tz` is the zone of timestamps written without an offset; `index_column` ("index"
    or "gpu") names the column to trust when both disagree; `now` (UTC, default the clock) bounds
    the timestamps accepted (local_time.check_plausible)."""
    path, rejected, notes, host = Path(path), [], [], canonical_host(check_host_name(host))
    chunks = list(_read_chunks(path, host=host, gpu_model=gpu_model, assume_tz=assume_tz, index_column=index_column,
                               now=now, chunk_rows=CHUNK_ROWS, reject=rejected.append, notes=notes))
    table = pa.concat_tables(chunks) if chunks else _samples_table({n: [] for n in GPU_SAMPLES.names})
    return IngestResult(path=path, table=table, rejected=rejected, notes=notes)


def _read_chunks(path: Path, *, host: str, gpu_model: str | None, assume_tz: str, index_column: str | None,
                 now: datetime | None, chunk_rows: int, reject: Callable[[RejectedRow], None],
                 notes: list[str]) -> Iterator[pa.Table]:
    """The log's good rows, `chunk_rows` at a time (gpu_samples tables, in the log's order); each
    rejected row goes to `reject` as it is read, and `notes` fills as `header_notes` and the end say.
    NvidiaSmiError, at any point, refuses the whole log."""
    now = now or datetime.now(timezone.utc)
    try:
        zone = ZoneInfo(assume_tz)
    except (ValueError, ZoneInfoNotFoundError):
        raise NvidiaSmiError(f"assume_tz {assume_tz!r} is not an IANA time zone such as 'UTC' or 'Asia/Shanghai'") from None
    # Bytes that are not UTF-8 come through as lone surrogates: their row is rejected below.
    with text_lines(path, "nvidia-smi log", MAX_LINE_CHARS, NvidiaSmiError, errors="surrogateescape") as read:
        lines = LineEnds(read)
        first = next(lines, "")
        has_bom, first = first.startswith(BOM), first.removeprefix(BOM)
        reader = csv.reader(itertools.chain([first] if first else [], lines))
        rows = _csv_rows(reader, path)
        try:
            header = next(rows)
        except StopIteration:
            raise NvidiaSmiError(f"{path} is empty; expected an nvidia-smi CSV header line") from None
        names = header_names(header, path)
        notes += header_notes(names, host, gpu_model, index_column)
        if has_bom:
            notes.append("the file opens with a UTF-8 byte-order mark: skipped")
        id_columns, stored = gpu_index_columns(path, names, index_column), read_fields(tuple(names))
        columns: dict[str, list] = {n: [] for n in GPU_SAMPLES.names}
        recent = RecentReadings(DUPLICATE_WINDOW_S)
        probe: list[float] | None = []  # timestamps of rows no column gives a GPU; None once checked
        lone_uuid = ""  # the one GPU a log with a uuid but no index column may hold
        index_of_uuid: dict[str, int] = {}  # from rows with an index: what a later header without one gives
        naive, clock, headers_again = 0, LogClock(zone), 0
        units: dict[str, bool] = {}  # per field: the log writes its unit after the value (parse_row)
        for values in rows:
            line_no = reader.line_num  # the file's line where this row ends (the header is line 1)
            if not values or all(not v.strip() for v in values):
                continue
            line = ",".join(values)  # the row as read, for its reject record (printable() only then)
            if lines.cut:  # the file's last line, no line end after it: being written, or cut short
                reject(RejectedRow(line_no, "cut short: the log's last line has no line end", printable(line)))
                continue
            if values[0].startswith(BOM) and "timestamp" in (field_name(v)[0] for v in
                                                             [values[0].removeprefix(BOM), *values[1:]]):
                # a second log's header, its byte-order mark where the logs were concatenated: refused
                # as bad bytes, its rows were read by the first header's columns (power as temperature)
                values = [values[0].removeprefix(BOM), *values[1:]]
                line = ",".join(values)
                notes.append(f"line {line_no}: a byte-order mark before a header (logs concatenated): skipped")
            bad_bytes = encoding_problem(values)
            if bad_bytes:
                if "timestamp" in (field_name(v)[0] for v in values):
                    # a header: rejected as a row, the rows below it were read by the old header's columns
                    header_names(values, path, line_no)  # refuses the log, naming the line
                reject(RejectedRow(line_no, bad_bytes, printable(line)))
                continue
            if (glued := glued_header(values, path, line_no)) is not None:
                # nvidia-smi restarted on the same file mid-line: the cut row, then its new header
                reject(RejectedRow(line_no, "cut short: a header follows on the same line (nvidia-smi restarted)",
                                   printable(line)))
                values, line = glued, ",".join(glued)
            if "timestamp" in line.lower() and "timestamp" in (field_name(v)[0] for v in values):
                # Logs concatenated, or nvidia-smi restarted with other --query-gpu fields: the rows
                # below follow this header; read by the first one, a value lands in another's column.
                again = header_names(values, path, line_no)
                headers_again += 1
                units = {}  # a restart may write them otherwise (csv or csv,nounits)
                if again != names:
                    notes.append(f"line {line_no}: a new header; the rows after it are read by its columns")
                    names, id_columns = again, gpu_index_columns(path, again, index_column)
                    stored = read_fields(tuple(names))
                continue
            if len(values) != len(names):
                reject(RejectedRow(line_no, f"field count: {len(values)} fields, header has {len(names)}", printable(line)))
                continue
            row = dict(zip(names, values))
            try:
                sample = parse_row(row, id_columns, index_column, clock, units, stored)
                check_plausible(sample["sampled_at"], "timestamp", now)
                # The uuid too: across a reboot an index may name another GPU (nvidia-smi: "can change
                # at each boot"), and then the two are two streams, not one GPU's duplicates.
                uuid = sys.intern(identity_text(row.get("uuid")))
                model = identity_text(row.get("name")) or gpu_model
            except ValueError as exc:
                reject(RejectedRow(line_no, str(exc), printable(line)))
                continue
            if id_columns and uuid:
                index_of_uuid.setdefault(uuid, sample["gpu_index"])
            elif uuid and uuid in index_of_uuid:  # a header without the index, after rows that gave it
                sample["gpu_index"] = index_of_uuid[uuid]
            elif uuid:
                lone_uuid = lone_uuid or uuid
                if uuid != lone_uuid or index_of_uuid:
                    other = lone_uuid if uuid != lone_uuid else next(iter(index_of_uuid))
                    raise NvidiaSmiError(
                        f"{path}: line {line_no}: GPU {uuid} after GPU {other}, and no index column: gpu_index is "
                        "required in gpu_samples and no UUID says a GPU's index on its host, so the log is not imported "
                        "(every GPU would be stored as GPU 0); log with --query-gpu=timestamp,index,uuid,...")
            at = sample["sampled_at"]
            if probe is not None and not id_columns and not uuid:  # a uuid column of [N/A] tells no GPU apart
                # before the duplicate check: a sweep's rows sharing one stamp are several GPUs, and
                # taken for one GPU's duplicates first, the bursts were never seen
                probe.append(at.timestamp())
                if len(probe) >= INTERLEAVED_PROBE_ROWS:
                    probe = _refuse_interleaved(path, probe)
            if not recent.add((sample["gpu_index"], uuid), at):
                gpu = f"GPU {sample['gpu_index']} {uuid}".strip()
                reject(RejectedRow(line_no, f"duplicate: {gpu} already has a row at {at.isoformat()}", printable(line)))
                continue
            naive += is_naive(row["timestamp"])
            sample.update(host=host, gpu_model=model, source=SOURCE,
                          gpu_uuid=uuid or synthetic_gpu_uuid(host, sample["gpu_index"]))
            for name in columns:
                columns[name].append(sample.get(name))
            if len(columns["sampled_at"]) >= chunk_rows:
                yield _samples_table(columns)
                columns = {n: [] for n in GPU_SAMPLES.names}
    if probe:
        _refuse_interleaved(path, probe)
    if columns["sampled_at"]:
        yield _samples_table(columns)
    if naive:
        notes.append(f"{naive} timestamps without a UTC offset read as {assume_tz}")
    if headers_again:
        notes.append(f"{headers_again} header lines after the first (logs concatenated?): read as headers, not rows")
    if clock.ambiguous:
        notes.append(f"{clock.ambiguous} timestamps in an hour {assume_tz} repeats when its clocks go back: "
                     f"{clock.second_pass} read as taken after they went back (by the log's order)")
    if recent.unchecked:
        notes.append(f"{recent.unchecked} rows more than {DUPLICATE_WINDOW_S / 3600:g} h before the log's latest reading "
                     "(logs concatenated out of order?): not checked for duplicates here; the warehouse build "
                     "quarantines a second reading of a GPU at one instant (duplicate_key)")


def _samples_table(columns: dict[str, list]) -> pa.Table:
    return conform("gpu_samples", pa.Table.from_pydict(columns, schema=GPU_SAMPLES))


def _refuse_interleaved(path: Path, times_s: list[float]) -> None:
    """NvidiaSmiError when the timestamps of rows no column gives a GPU come in bursts of several."""
    mixed = interleaved_gpus(times_s)
    if mixed is not None:
        gpus, period_s = mixed
        raise NvidiaSmiError(
            f"{path}: the rows come in bursts of {gpus} a few ms apart every {period_s:.3f} s, the readings of about "
            f"{gpus} GPUs interleaved, and no index, gpu or uuid column says which row is which GPU: they cannot be "
            f"told apart, so the log is not imported (as one GPU its energy would be about {gpus}x one GPU's, its "
            "power jumping between GPUs); log with --query-gpu=timestamp,index,uuid,...")


def _csv_rows(reader, path: Path):
    """The reader's rows; a line the csv module cannot split (a quote never closed, which would
    swallow the rest of the file into one field) refuses the file, naming the line."""
    try:
        ended = reader.line_num
        for values in reader:
            # The csv module reads an unclosed quote to the end of the file as one field (an error
            # only past its 128 KiB field limit): the rest of the log was one rejected row, exit 0.
            # nvidia-smi never writes a value over two lines.
            if any("\n" in v or "\r" in v for v in values):
                raise NvidiaSmiError(f"nvidia-smi log {path}: line {ended + 1} opens a quote that is closed only at "
                                     f"line {reader.line_num} (or never); expected an `nvidia-smi --query-gpu=... "
                                     "--format=csv` log, one reading a line")
            ended = reader.line_num
            yield values
    except csv.Error as exc:
        raise NvidiaSmiError(f"nvidia-smi log {path}: line {reader.line_num} is not CSV ({exc}); "
                             "expected an `nvidia-smi --query-gpu=... --format=csv` log") from None


def ingest_nvidia_smi(path: str | Path, *, lake: str | Path, host: str, gpu_model: str | None = None,
                      assume_tz: str = "UTC", index_column: str | None = None,
                      now: datetime | None = None, chunk_rows: int | None = None) -> LandedImport:
    """Read the log and land it in the lake a chunk of `chunk_rows` rows (default CHUNK_ROWS) at a
    time (collectors.ingest.lake_stream): its good rows in `<lake>/gpu_samples`, one file per UTC
    day, its rejected rows in `<lake>/_quarantine/nvidia_smi/`. The log is known by its host and
    full path: importing it again replaces the rows it gave before (also where a compaction merged
    them), and no other log's rows are touched. A log refused part-way leaves the lake as it was."""
    # the lake's one name for the server (collectors.sources.host_names): `--host NODE-07` or an
    # FQDN put the log's GPUs beside, not with, what the node's collectors and Slurm name node-07
    # (checked as typed first: a refusal shows the name given, not its lowercased short form)
    path, notes, host = Path(path), [], canonical_host(check_host_name(host))
    with LogLanding(lake, source=SOURCE, host=host, path=path) as landing:
        for chunk in _read_chunks(path, host=host, gpu_model=gpu_model, assume_tz=assume_tz,
                                  index_column=index_column, now=now, chunk_rows=chunk_rows or CHUNK_ROWS,
                                  reject=landing.reject, notes=notes):
            landing.add(chunk)
        result = LandedImport(path, landing, notes)
        record_landing(result, landing.finish())
    return result
