"""The header of an nvidia-smi CSV log: its field names, their units, the columns that give a
row's GPU, a header glued to a row cut short, and the notes a header gives.

The rules of collectors/ingest/nvidia_smi.py's module docstring that concern a header: the field
name is the part before the bracket and the bracketed unit must be the one the field is stored
in; a header line again part-way through is read as a header, not a row; `index_column` must name
a column of the log. A header that breaks them refuses the whole log (NvidiaSmiError).
"""

from __future__ import annotations

import re
from pathlib import Path

from joulehouse.collectors.ingest.nvidia_smi_values import NUMERIC, field_name, read_fields


class NvidiaSmiError(ValueError):
    """The file as a whole cannot be read as an nvidia-smi CSV log (the message says why)."""


def header_names(header: list[str], path: Path, line_no: int = 1) -> list[str]:
    """The field names of a header line, whose units must be the ones the fields are stored in."""
    fields = [field_name(h) for h in header]
    names = [n for n, _ in fields]
    odd = [c for h in header for c in h if not c.isprintable()]
    if odd:
        # a header says which column each value lands in: one misread refuses the log, as the first
        what = ("bytes that are not UTF-8 text" if any("\udc80" <= c <= "\udcff" for c in odd)
                else f"a character that is not printable ({ascii(odd[0])})")
        where = "its first line" if line_no == 1 else f"line {line_no}, a header,"
        raise NvidiaSmiError(f"{path} is not a text CSV: {where} holds {what}; "
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
        if name in NUMERIC and unit and unit != NUMERIC[name][1]:
            raise NvidiaSmiError(f"{path}: line {line_no}: column {name!r} is in [{unit}], "
                                 f"expected [{NUMERIC[name][1]}]")
    return names


def gpu_index_columns(path: Path, names: list[str], index_column: str | None) -> list[str]:
    if index_column is not None and index_column not in names:
        raise NvidiaSmiError(f"{path}: index_column {index_column!r} is not a column of {names}")
    return [c for c in ("index", "gpu") if c in names]


QUERY_NAME = re.compile(r"[a-z_]+(\.[a-z_]+)*")


def glued_header(values: list[str], path: Path, line_no: int) -> list[str] | None:
    """The header a row holds after a cut field ('..., 30timestamp, index, power.draw [W]'), or None."""
    for i, value in enumerate(values):
        name = value.strip().lower()
        cut_in_value = name.endswith("timestamp") and name != "timestamp"
        # or cut where a field ended ('..., 250.00 W,timestamp, index'), unless what comes before
        # is a header's names too ('index, timestamp, ...' is a header of its own)
        cut_at_field = name == "timestamp" and i > 0 and not all(QUERY_NAME.fullmatch(field_name(v)[0])
                                                                  for v in values[:i])
        if (cut_in_value or cut_at_field) and i + 1 < len(values):
            tail = ["timestamp", *values[i + 1:]]
            if not all(QUERY_NAME.fullmatch(field_name(v)[0]) for v in tail):
                return None  # a value, not nvidia-smi's lower-case dotted query names
            try:
                header_names(tail, path, line_no)
            except NvidiaSmiError:
                return None
            return tail
    return None


def header_notes(names: list[str], host: str, gpu_model: str | None, index_column: str | None) -> list[str]:
    """What the import says of a header: the columns it lacks, the one it reads the GPU index from,
    and the ones it does not store."""
    known = set(NUMERIC) | {"timestamp", "index", "gpu", "name", "uuid", "pstate",
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
    ignored = [n for n in names if n not in known or (n in NUMERIC and n not in read_fields(tuple(names)))]
    if ignored:
        notes.append(f"columns not stored: {', '.join(ignored)}")
    return notes
