"""The report's best-power-interval block says, per GPU model and class given caps, which interval
the caps follow: GPUs that mix kinds of work get caps no single bottleneck's interval shows."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl

from joulehouse.reports.page.section_models import interval_vs_caps

H200 = "NVIDIA H200"


def _interval(rows):
    return pl.DataFrame(rows, schema=["gpu_model", "bottleneck", "workload_class", "busy_share", "best_limit_w_low",
                                      "best_limit_w_high"], orient="row")


def _recs(rows):
    return pl.DataFrame(rows, schema=["gpu_model", "workload_class", "power_limit_w", "default_limit_w",
                                      "locked_sm_clock_max_mhz"], orient="row")


def test_caps_of_mixed_work_are_set_beside_the_mix_and_each_bottleneck():
    """The demo's H200s (2026-06-11): caps 350 W; compute-bound 410-415 W, memory-bound 350 W, mix 375-385 W."""
    data = SimpleNamespace(
        interval=_interval([(H200, "compute-bound", "throughput", 0.52, 410.0, 415.0),
                            (H200, "memory-bound", "throughput", 0.40, 350.0, 350.0),
                            (H200, "communication-bound", "throughput", 0.03, 350.0, 700.0),
                            (H200, "mix", "throughput", 0.63, 375.0, 385.0),
                            (H200, "mix", "background", 0.21, 350.0, 355.0)]),
        to_apply=_recs([(H200, "throughput", 350.0, 700.0, None)] * 3
                       + [(H200, "background", 700.0, 700.0, 1584.0)]))  # a clock lock: not a cap
    lines = interval_vs_caps(data)
    assert lines == [f"{H200}, throughput: caps 350 W on 3 GPUs, each chosen on its own day's mix of work; its "
                     "throughput GPUs together: 375-385 W; alone, compute-bound work (52% of the model's busy time) "
                     "410-415 W, memory-bound work (40% of the model's busy time) 350 W."]


def test_nothing_to_say_without_caps_or_classes():
    interval = _interval([(H200, "compute-bound", "throughput", 0.5, 410.0, 415.0)])
    assert interval_vs_caps(SimpleNamespace(interval=interval, to_apply=None)) == []
    no_class = pl.DataFrame({"gpu_model": [H200], "power_limit_w": [350.0], "default_limit_w": [700.0]})
    assert interval_vs_caps(SimpleNamespace(interval=interval, to_apply=no_class)) == []
