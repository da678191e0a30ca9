"""DCGM sample values as Prometheus hands them over -> lake values, NULL where DCGM had none.

Prometheus sends values as strings ("312.5", "NaN", "+Inf"). Besides NaN/Inf, DCGM has its own
ways of saying "no value", which must land as NULL rather than as a number in the lake.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

# DCGM's "no value" sentinels (dcgm_fields.h: BLANK, NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED
# for INT32, INT64 and FP64 fields). Current dcgm-exporter leaves such a sample out; older ones
# (gpu-monitoring-tools) published it as is, e.g. 9223372036854775792 for a GPU without the field.
# As a Prometheus float64 the four INT64 ones are one number.
# The INT32 ones (2,147,483,632 and up) are also honest readings of a wide INT64 field: the energy
# counter passes them after about 600 Wh, PCIe at about 2 GB/s; such a field checks the others only.
DCGM_INT32_SENTINELS = frozenset(float(0x7FFFFFF0 + i) for i in range(4))
DCGM_WIDE_SENTINELS = frozenset([float(0x7FFFFFFFFFFFFFF0 + i) for i in range(4)] + [float(2**47 + i) for i in range(4)])
DCGM_NO_VALUE_SENTINELS = DCGM_INT32_SENTINELS | DCGM_WIDE_SENTINELS
INT64_BOUND = 2**63
# DCGM reads memory temperature through NVML's field values without checking the field's own
# return code, so a GPU without a memory sensor (L4, GeForce) reports 0 C (DCGM pull request 311,
# dcgm-exporter issue 460). A 0 beside a warm GPU is that, not a reading.
UNREPORTED_MEMORY_TEMP_C = 0.0


def convert_value(raw: Any, kind: type, *, wide: bool = False,
                  bounds: tuple[int, int] = (-INT64_BOUND, INT64_BOUND - 1)) -> float | int | None:
    """One sample value -> the lake's value: NaN/Inf and DCGM's no-value sentinels -> None
    (`wide`: a field whose honest values pass 2**31, where only the INT64/FP64 sentinels mean none).
    Raises ValueError, saying why, for text that is not a number or for an integer field's
    value outside `bounds`, what its column holds (an SM clock of 4294967295 in an int32 column
    made pyarrow refuse the whole range, every sync, and no GPU's DCGM readings were written)."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"value {raw!r} is not a number") from None
    if not math.isfinite(value) or value in (DCGM_WIDE_SENTINELS if wide else DCGM_NO_VALUE_SENTINELS):
        return None
    if kind is int:
        if not bounds[0] <= value <= bounds[1]:
            raise ValueError(f"value {raw!r} is outside what its integer column holds ({bounds[0]}..{bounds[1]})")
        return int(round(value))
    return value


def drop_unreported_memory_temps(readings: Iterable[dict[str, Any]]) -> int:
    """Set a 0 C memory temperature to None where the same reading's GPU temperature is above
    0 C (in place); returns how many. With no GPU temperature the 0 stays: nothing tells."""
    dropped = 0
    for values in readings:
        if values.get("mem_temp_c") == UNREPORTED_MEMORY_TEMP_C and (values.get("temp_c") or 0.0) > 0.0:
            values["mem_temp_c"] = None
            dropped += 1
    return dropped
