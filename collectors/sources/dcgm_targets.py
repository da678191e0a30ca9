"""One scrape target per GPU: a GPU whose series Prometheus scrapes under two targets (two jobs for
one dcgm-exporter, such as a ServiceMonitor and a PodMonitor, or two exporters on one node) gives
each reading twice, at timestamps a fraction of a scrape apart. Read from both, the lake held two
rows per scrape interval for the GPU (22 rows in 10.4 s at a 1 s scrape, tests/collectors/sources/
test_dcgm_two_targets.py), which no (gpu, sampled_at) key catches.

Per GPU and range, the target with the most samples is read; another target's sample is read only
where no sample already read lies within one scrape interval of it (an exporter that took over from
another, or filled its gap). The interval is the median spacing of the read target's samples. A
handover closer than one interval can lose that one sample; a duplicate at a range's edge cannot
slip through. links.py applies the rule to each link's quantity (its range query puts both targets'
values on the same instants, where the last listed overwrote the other's unreported).
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any

# Prometheus' target labels: what tells two scrapes of the same GPU apart.
TARGET_LABELS = ("job", "instance")


def _target(labels: dict[str, str]) -> tuple[str, ...]:
    return tuple(labels.get(name, "") for name in TARGET_LABELS)


def _median_spacing_s(times: list[float]) -> float | None:
    gaps = [b - a for a, b in zip(times, times[1:])]
    return statistics.median(gaps) if gaps else None


def one_target_per_gpu(result: list[dict[str, Any]], gpu_of: Callable[[dict[str, str]], Hashable | None],
                       what: str = "GPU") -> tuple[list[dict[str, Any]], list[str]]:
    """`result` (a matrix) with each GPU's samples from one scrape target where several scraped it at
    once; `gpu_of(labels)` names a series' GPU (None: not a GPU's series, left as it is). Returns the
    series kept (some with fewer samples) and, per series thinned, why. `what` is the noun the
    reasons give the key (links.py keys a link's quantity, not a GPU)."""
    by_gpu: dict[Hashable, dict[tuple[str, ...], list[int]]] = defaultdict(lambda: defaultdict(list))
    for index, series in enumerate(result):
        labels = series.get("metric", {})
        gpu = gpu_of(labels)
        if gpu is not None:
            by_gpu[gpu][_target(labels)].append(index)
    kept = list(result)
    set_aside: list[str] = []
    for gpu, targets in by_gpu.items():
        if len(targets) < 2:
            continue
        times = {t: sorted({float(ts) for i in members for ts, _ in result[i].get("values", [])})
                 for t, members in targets.items()}
        order = sorted(targets, key=lambda t: (-len(times[t]), t))
        spacings = [s for s in (_median_spacing_s(times[t]) for t in order) if s is not None]
        # No target with two samples: nothing tells a handover from a duplicate; read the first only.
        tolerance_s = spacings[0] if spacings else float("inf")
        read: list[float] = list(times[order[0]])
        for target in order[1:]:
            accepted = {t for t in times[target] if not _near(read, t, tolerance_s)}
            for i in targets[target]:
                values = result[i].get("values", [])
                kept[i] = {**result[i], "values": [v for v in values if float(v[0]) in accepted]}
                if dropped := len(values) - len(kept[i]["values"]):
                    labels = result[i].get("metric", {})
                    set_aside.append(
                        f"{labels.get('__name__', '')} {labels}: {dropped} samples set aside: {what} {gpu} "
                        f"is also scraped as {dict(zip(TARGET_LABELS, order[0]))}, whose samples are read")
            read = sorted(read + list(accepted))
    return kept, set_aside


def _near(sorted_times: list[float], t: float, tolerance_s: float) -> bool:
    """Whether a time in `sorted_times` lies within `tolerance_s` of `t` (strictly)."""
    at = bisect.bisect_left(sorted_times, t)
    return any(abs(sorted_times[j] - t) < tolerance_s for j in (at - 1, at) if 0 <= j < len(sorted_times))
