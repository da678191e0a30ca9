"""The simulator's training batch effect (collectors.sim.precision): samples per second follow the
batch the way Zeus measured it, while the GPU's activity, power and FLOPs (what the recommender is
calibrated against) do not move with it."""

from __future__ import annotations

import csv
import datetime as dt
from collections import defaultdict
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from joulehouse.collectors.sim import precision, simulate_fleet
from joulehouse.collectors.sim.precision import TRAINING_REFERENCE_BATCH, training_batch_factor

DAY = dt.date(2026, 3, 4)


def _jobs(lake: Path) -> dict[tuple[str, str], dict]:
    rows = ds.dataset(lake / "jobs", format="parquet", partitioning="hive").to_table().to_pylist()
    return {(r["job_id"], r["gpu_uuid"]): r for r in rows}


def test_the_batch_curve_follows_zeus_resnet50_on_v100_at_its_top_limit(shared_data):
    """Measured throughput over batch 8's (1 / time per epoch, both optimizers averaged) against the
    simulator's, batch 16..256: within 4% each."""
    per_batch = defaultdict(list)
    with open(shared_data / "sweeps" / "zeus_nsdi23_summary_power_v100.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["network"] == "resnet50"]
    top = max(float(r["power_limit"]) for r in rows)
    for r in rows:
        if float(r["power_limit"]) == top:
            per_batch[int(r["batch_size"])].append(float(r["time_per_epoch"]))
    epoch_s = {b: sum(v) / len(v) for b, v in per_batch.items()}
    compared = [b for b in (16, 32, 64, 128, 256) if b in epoch_s]
    assert len(compared) == 5 and 8 in epoch_s
    for b in compared:
        measured = epoch_s[8] / epoch_s[b]
        simulated = training_batch_factor(b) / training_batch_factor(8)
        assert simulated == pytest.approx(measured, rel=0.04), (b, measured, simulated)
    assert training_batch_factor(TRAINING_REFERENCE_BATCH) == 1.0 and training_batch_factor(None) == 1.0


@pytest.mark.slow  # two 8-GPU simulated days
def test_a_larger_batch_buys_more_samples_for_the_same_power_and_flops(tmp_path, monkeypatch):
    lakes = {}
    for batch in (8, 256):
        monkeypatch.setattr(precision, "TRAINING_BATCHES", (batch,))
        lakes[batch] = tmp_path / f"b{batch}"
        simulate_fleet(lakes[batch], gpus=8, days=1, start=DAY, seed=5, interval_s=60)
    small, large = _jobs(lakes[8]), _jobs(lakes[256])
    assert small.keys() == large.keys()
    batched = [k for k, r in small.items() if r["stage"] in ("training", "evaluation")
               and not r["job_id"].startswith("llm-finetune")]
    assert len(batched) >= 5
    want = training_batch_factor(256) / training_batch_factor(8)
    for k in small:
        s, big = small[k], large[k]
        assert s["flops_total"] == pytest.approx(big["flops_total"], rel=1e-9), "FLOPs do not follow the batch"
        if k in batched:
            assert (s["batch_size"], big["batch_size"]) == (8, 256)
            assert big["samples_total"] / s["samples_total"] == pytest.approx(want, rel=0.01)
        elif s["stage"] == "data-preparation":
            assert s["batch_size"] is None and s["samples_total"] == big["samples_total"]
    power = [ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table(
        columns=["power_w"]).column("power_w").to_pylist() for lake in lakes.values()]
    assert power[0] == power[1], "the GPU draws the same power at any batch (Zeus: within 3%)"
