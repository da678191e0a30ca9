"""Several GPUs' readings interleaved in one log: nvidia-smi writes one row per GPU a few ms apart
in each sweep, so a log without an index, gpu or uuid column that holds several GPUs shows its
rows in regular bursts. Pure Python (the node side installs without numpy)."""

from __future__ import annotations

import math

# A log whose time gaps split into bursts of rows this much closer together than the gaps between
# bursts, with bursts of one size (within one row) this often, holds several GPUs' rows per sweep.
INTERLEAVED_GAP_RATIO = 10.0
INTERLEAVED_SAME_BURST_SHARE = 0.8
# The gap counted between two rows of one timestamp (s): nvidia-smi stamps to the millisecond, so
# they were at most that far apart, as close as a sweep's rows with stamps of their own.
SAME_INSTANT_S = 1e-3
# Fewest gaps the bursts are looked for in: 8 GPUs x 3 sweeps (23 gaps) were stored as one GPU at
# 30; the gap ratio and the bursts' one size still decide
MIN_GAPS = 10


def interleaved_gpus(times_s: list[float]) -> tuple[int, float] | None:
    """(GPUs per sweep, sweep period s) when the timestamps come in regular bursts, as nvidia-smi
    writes one row per GPU a few ms apart in each sweep; None for one GPU's readings (regular or
    with gaps). The time gaps are split in two by Otsu's threshold on their logarithm."""
    times = sorted(times_s)
    # rows of one instant are a burst's too (a sweep's rows within a millisecond share its stamp):
    # left out, 8 GPUs read as one, stored as GPU 0 or quarantined as its duplicates
    gaps = [max(b - a, SAME_INSTANT_S) for a, b in zip(times, times[1:])]
    if len(gaps) < MIN_GAPS:
        return None
    logs = sorted(math.log(g) for g in gaps)
    n, total = len(logs), sum(logs)
    edge = max(1, n // 50)  # each cluster at least 2% of the gaps
    best, prefix = None, sum(logs[:edge - 1])
    for i in range(edge, n - edge):
        prefix += logs[i - 1]
        low, high = prefix / i, (total - prefix) / (n - i)
        spread = (i / n) * (1 - i / n) * (high - low) ** 2
        if best is None or spread > best[0]:
            best = (spread, i, low, high)
    _, i, low, high = best
    if math.exp(high - low) < INTERLEAVED_GAP_RATIO:
        return None
    split = math.exp(0.5 * (logs[i - 1] + logs[i]))
    sizes, size, period = [], 1, []
    for g in gaps:
        if g >= split:
            sizes.append(size)
            period.append(g)
            size = 1
        else:
            size += 1
    sizes.append(size)
    gpus = sorted(sizes)[len(sizes) // 2]
    if gpus < 2 or sum(abs(x - gpus) <= 1 for x in sizes) < INTERLEAVED_SAME_BURST_SHARE * len(sizes):
        return None
    return gpus, sorted(period)[len(period) // 2]
