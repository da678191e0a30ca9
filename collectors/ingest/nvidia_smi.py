"""Import `nvidia-smi --query-gpu=... --format=csv` logs into the lake's gpu_samples.

What real logs look like, and what is done about it:
- headers carry units in brackets and leading spaces (" power.draw [W]"): the field name is the
  part before the bracket; the bracketed unit must be the one the field is stored in.
- values carry units as text ("20.13 W", "195 MHz", "0 MiB", "0 %", "P8"); "[N/A]", "N/A" and
  "[Not Supported]" are NULL, never 0. A value whose unit is not the field's unit is rejected.
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
- no `uuid` column: a stable synthetic UUID "synthetic-<uuid5(host, index)>" is derived, and
  the notes say so.
- bytes: a UTF-8 byte-order mark opening the file (spreadsheets write one) is skipped and noted; a
  row holding a byte that is not UTF-8, or a byte-order mark (logs concatenated), is rejected with
  that reason, never the whole file. A path that is not a regular file, or a line longer than
  MAX_LINE_CHARS (no newline: not a text log), refuses the file (collectors/input_file.py).
- values too large for their column (an int32 clock of 9,999,999,999 MHz, a float32 above 3.4e38)
  and timestamps no nvidia-smi log can hold (before 2010, when a clock was never set and reads
  1970, or more than a day ahead of now, as 2099) are rejected with the reason, so they neither
  fail the file nor create partitions for those days.

Rejected rows are never dropped silently: `ingest_nvidia_smi` writes them, with their line
number and reason, to `<lake>/_quarantine/nvidia_smi/<file>-<log id>.jsonl` (lake_import).
"""

from __future__ import annotations

import csv
import itertools
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from joulehouse.collectors.ingest.interleaved import interleaved_gpus
from joulehouse.collectors.ingest.local_time import LogClock, check_plausible
from joulehouse.collectors.input_file import text_lines
from joulehouse.collectors.ingest.lake_import import RejectedRow, land_log, record_landing
from joulehouse.collectors.schema import GPU_SAMPLES, conform
from joulehouse.collectors.writer import WrittenFile

SOURCE = "nvidia-smi"
_SYNTHETIC_NS = uuid.UUID("6f1c2a8e-4b7d-5e0f-9a3c-1d2e3f405162")
_NULLS = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]"}

# nvidia-smi field -> (gpu_samples column, unit nvidia-smi writes, scale to the column's unit)
_NUMERIC = {
    "power.draw": ("power_w", "W", 1.0),
    "power.draw.instant": ("power_w", "W", 1.0),
    "enforced.power.limit": ("power_limit_w", "W", 1.0),
    "power.limit": ("power_limit_w", "W", 1.0),
    "temperature.gpu": ("temp_c", "", 1.0),
    "temperature.memory": ("mem_temp_c", "", 1.0),
    "clocks.current.sm": ("sm_clock_mhz", "MHz", 1.0),
    "clocks.sm": ("sm_clock_mhz", "MHz", 1.0),
    "clocks.current.memory": ("mem_clock_mhz", "MHz", 1.0),
    "clocks.mem": ("mem_clock_mhz", "MHz", 1.0),
    "utilization.gpu": ("util_gpu_pct", "%", 1.0),
    "utilization.memory": ("util_mem_pct", "%", 1.0),
    "memory.used": ("mem_used_mib", "MiB", 1.0),
}
_INTEGER_COLUMNS = {"sm_clock_mhz", "mem_clock_mhz", "mem_used_mib"}
_FLOAT32_MAX = 3.4028234663852886e38
_BOM = "\ufeff"
# A log's lines are a few hundred characters, its header a few thousand with every --query-gpu
# field: a longer line is not such a log, and is refused there rather than read whole.
MAX_LINE_CHARS = 65_536
_VALUE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*$")


class NvidiaSmiError(ValueError):
    """The file as a whole cannot be read as an nvidia-smi CSV log (the message says why)."""


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


def _field_name(header: str) -> tuple[str, str]:
    """' power.draw [W]' -> ('power.draw', 'W')."""
    name, _, rest = header.strip().partition("[")
    return name.strip().lower(), rest.rstrip("]").strip()


def _number(raw: str, unit: str, scale: float) -> float | None:
    text = raw.strip()
    if text.lower() in _NULLS:
        return None
    m = _VALUE.match(text)
    if not m:
        raise ValueError(f"{raw.strip()!r} is not a number")
    if m.group(2) and m.group(2) != unit:
        raise ValueError(f"{raw.strip()!r} is not in {unit or 'a plain number'}")
    return float(m.group(1)) * scale


def _header_names(header: list[str], path: Path, line_no: int = 1) -> list[str]:
    """The field names of a header line, whose units must be the ones the fields are stored in."""
    fields = [_field_name(h) for h in header]
    names = [n for n, _ in fields]
    if any(not c.isprintable() or "\udc80" <= c <= "\udcff" for h in header for c in h):
        raise NvidiaSmiError(f"{path} is not a text CSV: its first line holds bytes that are not UTF-8 text; "
                             "expected an `nvidia-smi --query-gpu=... --format=csv` log")
    if "timestamp" not in names:
        shown = [h if len(h) <= 40 else h[:40] + "..." for h in header[:6]]
        more = f" and {len(header) - 6} more" if len(header) > 6 else ""
        raise NvidiaSmiError(f"{path}: no 'timestamp' column in header {shown}{more}; "
                             "log with --query-gpu=timestamp,...")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise NvidiaSmiError(f"{path}: line {line_no}: the header names {twice} twice")
    for name, unit in fields:
        if name in _NUMERIC and unit and unit != _NUMERIC[name][1]:
            raise NvidiaSmiError(f"{path}: line {line_no}: column {name!r} is in [{unit}], "
                                 f"expected [{_NUMERIC[name][1]}]")
    return names


def _id_columns(path: Path, names: list[str], index_column: str | None) -> list[str]:
    if index_column is not None and index_column not in names:
        raise NvidiaSmiError(f"{path}: index_column {index_column!r} is not a column of {names}")
    return [c for c in ("index", "gpu") if c in names]


def _gpu_index(raw: str) -> int:
    value = int(raw.strip())
    if not 0 <= value < 1024:
        raise ValueError(f"GPU index {value} is outside 0..1023")
    return value


def read_nvidia_smi_csv(path: str | Path, *, host: str, gpu_model: str | None = None,
                        assume_tz: str = "UTC", index_column: str | None = None,
                        now: datetime | None = None) -> IngestResult:
    """Parse one nvidia-smi CSV log. `host` names the machine it came from; `gpu_model` is used
    when the log has no `name` column; `assume_tz` is the zone of timestamps written without an
    offset; `index_column` ("index" or "gpu") names the column to trust when both disagree; `now`
    (UTC, default the clock) bounds the timestamps accepted (local_time.check_plausible)."""
    path = Path(path)
    now = now or datetime.now(timezone.utc)
    try:
        zone = ZoneInfo(assume_tz)
    except (ValueError, ZoneInfoNotFoundError):
        raise NvidiaSmiError(f"assume_tz {assume_tz!r} is not an IANA time zone such as 'UTC' or 'Asia/Shanghai'") from None
    # Bytes that are not UTF-8 come through as lone surrogates: their row is rejected below.
    with text_lines(path, "nvidia-smi log", MAX_LINE_CHARS, NvidiaSmiError, errors="surrogateescape") as lines:
        first = next(lines, "")
        has_bom, first = first.startswith(_BOM), first.removeprefix(_BOM)
        reader = csv.reader(itertools.chain([first] if first else [], lines))
        rows = _csv_rows(reader, path)
        try:
            header = next(rows)
        except StopIteration:
            raise NvidiaSmiError(f"{path} is empty; expected an nvidia-smi CSV header line") from None
        names = _header_names(header, path)
        notes = _notes(path, names, host, gpu_model, assume_tz, index_column)
        if has_bom:
            notes.append("the file opens with a UTF-8 byte-order mark: skipped")
        id_columns = _id_columns(path, names, index_column)
        columns: dict[str, list] = {n: [] for n in GPU_SAMPLES.names}
        rejected: list[RejectedRow] = []
        seen: set[tuple[datetime, int, str]] = set()
        naive = 0
        clock, headers_again = LogClock(zone), 0
        for values in rows:
            line_no = reader.line_num  # the file's line where this row ends (the header is line 1)
            if not values or all(not v.strip() for v in values):
                continue
            text = _printable(",".join(values))
            bad_bytes = _encoding_problem(values)
            if bad_bytes:
                rejected.append(RejectedRow(line_no, bad_bytes, text))
                continue
            if "timestamp" in (_field_name(v)[0] for v in values):
                # Logs concatenated, or nvidia-smi restarted with other --query-gpu fields: the rows
                # below follow this header; read by the first one, a value lands in another's column.
                again = _header_names(values, path, line_no)
                headers_again += 1
                if again != names:
                    notes.append(f"line {line_no}: a new header; the rows after it are read by its columns")
                    names, id_columns = again, _id_columns(path, again, index_column)
                continue
            if len(values) != len(names):
                rejected.append(RejectedRow(line_no, f"field count: {len(values)} fields, header has {len(names)}", text))
                continue
            row = dict(zip(names, values))
            try:
                sample = _parse_row(row, id_columns, index_column, clock)
                check_plausible(sample["sampled_at"], "timestamp", now)
            except ValueError as exc:
                rejected.append(RejectedRow(line_no, str(exc), text))
                continue
            # The uuid too: a log with a uuid column but no index one reads every GPU as index 0.
            uuid = _text(row.get("uuid"))
            key = (sample["sampled_at"], sample["gpu_index"], uuid)
            if key in seen:
                gpu = f"GPU {key[1]} {key[2]}".strip()
                rejected.append(RejectedRow(line_no, f"duplicate: {gpu} already has a row at {key[0].isoformat()}", text))
                continue
            seen.add(key)
            naive += _naive(row["timestamp"])
            model = _text(row.get("name")) or gpu_model
            sample.update(host=host, gpu_model=model, source=SOURCE,
                          gpu_uuid=uuid or synthetic_gpu_uuid(host, sample["gpu_index"]))
            for name in columns:
                columns[name].append(sample.get(name))
    if naive:
        notes.append(f"{naive} timestamps without a UTC offset read as {assume_tz}")
    if headers_again:
        notes.append(f"{headers_again} header lines after the first (logs concatenated?): read as headers, not rows")
    if clock.ambiguous:
        notes.append(f"{clock.ambiguous} timestamps in an hour {assume_tz} repeats when its clocks go back: "
                     f"{clock.second_pass} read as taken after they went back (by the log's order)")
    if not id_columns and "uuid" not in names:
        mixed = interleaved_gpus([t.timestamp() for t in columns["sampled_at"]])
        if mixed is not None:
            gpus, period_s = mixed
            raise NvidiaSmiError(
                f"{path}: the rows come in bursts of {gpus} a few ms apart every {period_s:.3f} s, the readings of about "
                f"{gpus} GPUs interleaved, and no index, gpu or uuid column says which row is which GPU: they cannot be "
                f"told apart, so the log is not imported (as one GPU its energy would be about {gpus}x one GPU's, its "
                "power jumping between GPUs); log with --query-gpu=timestamp,index,uuid,...")
    table = conform("gpu_samples", pa.Table.from_pydict(columns, schema=GPU_SAMPLES))
    return IngestResult(path=path, table=table, rejected=rejected, notes=notes)


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


def _encoding_problem(values: list[str]) -> str | None:
    """Why a row's text cannot be trusted as UTF-8 (a byte that is not UTF-8, read as a lone
    surrogate; a byte-order mark inside the file), or None."""
    for column, value in enumerate(values, start=1):
        bad = next((c for c in value if "\udc80" <= c <= "\udcff"), None)
        if bad is not None:
            return f"encoding: byte 0x{ord(bad) - 0xdc00:02x} in field {column} is not UTF-8"
        if _BOM in value:
            return f"encoding: a UTF-8 byte-order mark in field {column} (logs concatenated?)"
    return None


def _printable(text: str) -> str:
    """The row's text with bytes that are not UTF-8 written as \\xNN (JSON holds no lone surrogates)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _fits(name: str, column: str, value: float | int, raw: str) -> None:
    """ValueError naming the field when the gpu_samples `column` cannot hold `value` (read from `raw`)."""
    kind = GPU_SAMPLES.field(column).type
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        if not -(1 << bits) <= value < (1 << bits):
            raise ValueError(f"{name}: {raw.strip()!r} is too large for {column} ({kind})")
    elif abs(value) > _FLOAT32_MAX:
        raise ValueError(f"{name}: {raw.strip()!r} is too large for {column} (float32)")


def _naive(raw: str) -> bool:
    """A timestamp written without a UTC offset (nvidia-smi's own 'YYYY/MM/DD HH:MM:SS.fff' never has one)."""
    text = raw.strip()
    return not (text.endswith("Z") or re.search(r"[+-]\d\d:?\d\d$", text))


def _text(value: str | None) -> str:
    """An identity cell, '' where nvidia-smi wrote none ('[N/A]': stored as text, every GPU of the
    log became GPU '[N/A]' of model '[N/A]', --gpu-model unheard)."""
    text = (value or "").strip()
    return "" if text.lower() in _NULLS else text


def _parse_row(row: dict[str, str], id_columns: list[str], index_column: str | None, clock: LogClock) -> dict:
    try:
        ids = {c: _gpu_index(row[c]) for c in id_columns}
    except ValueError as exc:
        raise ValueError(f"gpu index: {exc}") from None
    if index_column is not None:
        gpu_index = ids[index_column]
    elif len(set(ids.values())) > 1:
        raise ValueError(f"gpu identity: columns gpu={ids['gpu']} and index={ids['index']} disagree; "
                         "name the column to trust (--index-column gpu|index)")
    else:
        gpu_index = next(iter(ids.values()), 0)
    try:
        # The GPU first: a repeated hour's two passes are told apart by the GPU's previous reading.
        sampled_at = clock.utc(row["timestamp"], (gpu_index, row.get("uuid", "").strip()))
    except ValueError as exc:
        raise ValueError(f"timestamp: {exc}") from None
    sample: dict = {"sampled_at": sampled_at, "gpu_index": gpu_index}
    for name, raw in row.items():
        if name in _NUMERIC:
            column, unit, scale = _NUMERIC[name]
            try:
                value = _number(raw, unit, scale)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if value is not None and value < 0:
                raise ValueError(f"{name}: negative reading {raw.strip()!r}")
            if value is not None and column in _INTEGER_COLUMNS:
                value = round(value)
            if value is not None:
                _fits(name, column, value, raw)
            if sample.get(column) is None:
                sample[column] = value
        elif name == "pstate":
            text = raw.strip()
            if text.lower() not in _NULLS:
                if not re.fullmatch(r"P\d{1,2}", text):
                    raise ValueError(f"pstate: {text!r} is not P0..P15")
                sample["pstate"] = int(text[1:])
        elif name in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            text = raw.strip()
            if text.lower() not in _NULLS:
                try:
                    sample["clock_event_reasons"] = int(text, 16)
                except ValueError:
                    raise ValueError(f"{name}: {text!r} is not a hex bitmask") from None
                _fits(name, "clock_event_reasons", sample["clock_event_reasons"], raw)
    return sample


def _notes(path: Path, names: list[str], host: str, gpu_model: str | None, assume_tz: str,
           index_column: str | None) -> list[str]:
    known = set(_NUMERIC) | {"timestamp", "index", "gpu", "name", "uuid", "pstate",
                             "clocks_event_reasons.active", "clocks_throttle_reasons.active"}
    notes = []
    if "uuid" not in names:
        notes.append(f"no uuid column: GPU UUIDs are synthetic, derived from host {host!r} and the GPU index")
    if "name" not in names:
        notes.append(f"no name column: gpu_model is {gpu_model!r}" if gpu_model else
                     "no name column and no --gpu-model: gpu_model is NULL")
    elif gpu_model:
        notes.append(f"the log names its GPUs: --gpu-model {gpu_model!r} is used only where the name is empty")
    if not {"index", "gpu"} & set(names):
        notes.append("no index column: every row is GPU 0")
    if index_column:
        other = {"index": "gpu", "gpu": "index"}[index_column]
        if other in names:
            notes.append(f"GPU index taken from column {index_column!r}; column {other!r} ignored")
    ignored = [n for n in names if n not in known]
    if ignored:
        notes.append(f"columns not stored: {', '.join(ignored)}")
    return notes


def ingest_nvidia_smi(path: str | Path, *, lake: str | Path, host: str, gpu_model: str | None = None,
                      assume_tz: str = "UTC", index_column: str | None = None,
                      now: datetime | None = None) -> IngestResult:
    """Read the log and land it in the lake (collectors.ingest.lake_import): its good rows in
    `<lake>/gpu_samples`, one file per UTC day, its rejected rows in `<lake>/_quarantine/nvidia_smi/`.
    The log is known by its host and full path: importing it again replaces the rows it gave
    before (also where a compaction merged them), and no other log's rows are touched."""
    result = read_nvidia_smi_csv(path, host=host, gpu_model=gpu_model, assume_tz=assume_tz,
                                 index_column=index_column, now=now)
    record_landing(result, land_log(lake, result.table, result.rejected, source=SOURCE, host=host, path=result.path))
    return result
