"""One row of an nvidia-smi CSV log to one gpu_samples row: its values, their units, its GPU.

The rules of collectors/ingest/nvidia_smi.py's module docstring that concern a single row:
values carry units as text and must be in the column's unit, "[N/A]" and its kin are NULL (never 0),
a value too large for its column or a byte that is not UTF-8 rejects the row (ValueError, the
reason), and the GPU's index comes from `index` or `gpu`, which must agree unless the caller
names the column to trust.
"""

from __future__ import annotations

import functools
import math
import re

import pyarrow as pa

from joulehouse.collectors.ingest.local_time import LogClock, wall_time
from joulehouse.collectors.schema import GPU_SAMPLES

NULLS = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]"}

# nvidia-smi field -> (gpu_samples column, unit nvidia-smi writes, scale to the column's unit); of
# fields for one column the first a header has is stored (read_fields)
NUMERIC = {
    "power.draw": ("power_w", "W", 1.0),
    "power.draw.instant": ("power_w", "W", 1.0),
    # The 1 s average is [N/A] on every row of an A100 (GA100) or older GPU (nvidia-smi
    # --help-query-gpu): ranked first, it would leave an A100's log of both without any power.
    # So it is stored where a log has neither power.draw nor power.draw.instant.
    "power.draw.average": ("power_w", "W", 1.0),
    "enforced.power.limit": ("power_limit_w", "W", 1.0),
    "power.limit": ("power_limit_w", "W", 1.0),
    # the device's own limits, as the NVML collector writes them: the recommender takes these
    # before the catalogue's guesses (models/device_limits.py)
    "power.default_limit": ("power_limit_default_w", "W", 1.0),
    "power.min_limit": ("power_limit_min_w", "W", 1.0),
    "power.max_limit": ("power_limit_max_w", "W", 1.0),
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


@functools.lru_cache(maxsize=64)
def read_fields(names: tuple[str, ...]) -> frozenset[str]:
    """The fields of a header whose values are stored: of two for one column, the first in NUMERIC
    (power.draw, the average on Ampere and newer, over power.draw.instant, then power.draw.average)
    for the whole log. Row by row, the first not empty was taken, so [N/A] averages were filled
    with instant readings: two quantities mixed in one column, unsaid."""
    chosen: dict[str, str] = {}
    for name in NUMERIC:
        if name in names:
            chosen.setdefault(NUMERIC[name][0], name)
    return frozenset(chosen.values())
_FLOAT32_MAX = 3.4028234663852886e38
BOM = "\ufeff"
# ASCII: Python's \d matches any script's digits, and nvidia-smi writes only ASCII ones
_VALUE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*$", re.ASCII)
# What makes a row's text untrustworthy: a byte that is not UTF-8 (read as a lone surrogate), a BOM
_NOT_UTF8 = re.compile("[\udc80-\udcff\ufeff]")


def field_name(header: str) -> tuple[str, str]:
    """' power.draw [W]' -> ('power.draw', 'W')."""
    name, _, rest = header.strip().partition("[")
    return name.strip().lower(), rest.rstrip("]").strip()


def _number(raw: str, unit: str, scale: float) -> float | None:
    text = raw.strip()
    if text.lower() in NULLS:
        return None
    m = _VALUE.match(text)
    if not m:
        raise ValueError(f"{raw.strip()!r} is not a number")
    if m.group(2) and m.group(2) != unit:
        raise ValueError(f"{raw.strip()!r} is not in {unit or 'a plain number'}")
    value = float(m.group(1)) * scale
    if not math.isfinite(value):  # 309 nines: infinity, which no column holds and round() cannot take
        raise ValueError(f"{raw.strip()!r} is too large for any reading")
    return value


def _gpu_index(raw: str) -> int:
    text = raw.strip()
    if not text.isascii() or not text.isdigit():  # int() takes '٣' and ' 3_0'
        raise ValueError(f"GPU index {text!r} is not a whole number")
    value = int(text)
    if not 0 <= value < 1024:
        raise ValueError(f"GPU index {value} is outside 0..1023")
    return value


def encoding_problem(values: list[str]) -> str | None:
    """Why a row's text cannot be trusted as UTF-8 (a byte that is not UTF-8, read as a lone
    surrogate; a byte-order mark inside the file), or None."""
    if not any(_NOT_UTF8.search(value) for value in values):
        return None
    for column, value in enumerate(values, start=1):
        bad = next((c for c in value if "\udc80" <= c <= "\udcff"), None)
        if bad is not None:
            return f"encoding: byte 0x{ord(bad) - 0xdc00:02x} in field {column} is not UTF-8"
        if BOM in value:
            return f"encoding: a UTF-8 byte-order mark in field {column} (logs concatenated?)"
    return None


def printable(text: str) -> str:
    """The row's text with bytes that are not UTF-8 written as \\xNN (JSON holds no lone surrogates)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _fits(name: str, column: str, value: float | int, raw: str) -> None:
    """ValueError naming the field when the gpu_samples `column` cannot hold `value` (read from `raw`)."""
    low, high, kind = _range(column)
    if not low <= value <= high:
        raise ValueError(f"{name}: {raw.strip()!r} is too large for {column} ({kind})")


@functools.cache
def _range(column: str) -> tuple[float, float, str]:
    """(lowest, highest, type name) a gpu_samples column holds; a float column is float32."""
    kind = GPU_SAMPLES.field(column).type
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        return -(1 << bits), (1 << bits) - 1, str(kind)
    return -_FLOAT32_MAX, _FLOAT32_MAX, "float32"


def is_naive(raw: str) -> bool:
    """A timestamp written without a UTC offset (nvidia-smi's own 'YYYY/MM/DD HH:MM:SS.fff' never
    has one), as the parser reads it: an hour-only offset ('+05') counts, which a pattern of the
    offset's text had missed, and the notes said such times were read in the zone assumed."""
    try:
        return wall_time(raw).tzinfo is None
    except ValueError:
        return False


def identity_text(value: str | None) -> str:
    """An identity cell, '' where nvidia-smi wrote none ('[N/A]': stored as text, every GPU of the
    log became GPU '[N/A]' of model '[N/A]', --gpu-model unheard)."""
    text = (value or "").strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        # 'GPU-a\x00b' made a phantom GPU and 'H100\x1b[2J' a model that clears terminals
        raise ValueError(f"identity {text!r} holds control characters; nvidia-smi writes none")
    return "" if text.lower() in NULLS else text


def parse_row(row: dict[str, str], id_columns: list[str], index_column: str | None, clock: LogClock,
              units: dict[str, bool] | None = None, stored: frozenset[str] | None = None) -> dict:
    """The gpu_samples values of one row (field name -> cell), its GPU's index from `id_columns`
    (0 when the log has none); ValueError, the reject reason, when the row cannot be stored.
    `units`: per field, whether the log's rows so far write the unit after the value (nvidia-smi's
    `csv` does, `csv,nounits` does not), filled by the first value: a value written otherwise is a
    line cut short ('300.00 W' cut to '3'), rejected rather than stored as 3 W."""
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
    stored = read_fields(tuple(row)) if stored is None else stored  # the caller's, once per header
    for name, raw in row.items():
        if name in NUMERIC and name not in stored:
            continue
        if name in NUMERIC:
            column, unit, scale = NUMERIC[name]
            try:
                value = _number(raw, unit, scale)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
            if value is not None and value < 0:
                raise ValueError(f"{name}: negative reading {raw.strip()!r}")
            if value is not None and units is not None and unit:
                written = bool(_VALUE.match(raw.strip()).group(2))
                if units.setdefault(name, written) != written:
                    raise ValueError(f"{name}: {raw.strip()!r} is written {'with' if written else 'without'} its unit, "
                                     f"the log's other rows {'without' if written else 'with'} (a line cut short?)")
            if value is not None and column in _INTEGER_COLUMNS:
                value = round(value)
            if value is not None:
                _fits(name, column, value, raw)
            if sample.get(column) is None:
                sample[column] = value
        elif name == "pstate":
            text = raw.strip()
            if text.lower() not in NULLS:
                if not re.fullmatch(r"P\d{1,2}", text):
                    raise ValueError(f"pstate: {text!r} is not P0..P15")
                sample["pstate"] = int(text[1:])
        elif name in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            text = raw.strip()
            if text.lower() not in NULLS:
                try:
                    sample["clock_event_reasons"] = int(text, 16)
                except ValueError:
                    raise ValueError(f"{name}: {text!r} is not a hex bitmask") from None
                _fits(name, "clock_event_reasons", sample["clock_event_reasons"], raw)
    return sample
