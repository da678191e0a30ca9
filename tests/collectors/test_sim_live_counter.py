"""The live sim source's energy counter behaves like NVML's: mJ since the simulated driver loaded,
so a collector restart is no reset. Before, every process started each GPU's counter at 0: the
warehouse read the restart as a driver reload and counted the energy across it from the reset's
value (0 J for a 60 s restart of a GPU drawing ~200 W)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.sim import SimSource

START_S = dt.datetime(2026, 1, 2, 0, 10, tzinfo=dt.timezone.utc).timestamp()


def run(start_s: float, readings: int, *, seed: int = 0, interval_s: float = 1.0, gpus: int = 2) -> pa.Table:
    """One collector process: a fresh source read `readings` times every `interval_s` from `start_s`."""
    now = [start_s]
    source = SimSource("node-01", gpus=gpus, seed=seed, clock=lambda: now[0])
    tables = []
    for _ in range(readings):
        tables.append(source.read())
        now[0] += interval_s
    return pa.concat_tables(tables)


def gpu_series(table: pa.Table, gpu_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, power W, counter mJ) of one GPU, in time order."""
    rows = table.filter(pa.compute.equal(table["gpu_index"], gpu_index))
    seconds = np.array([t.timestamp() for t in rows["sampled_at"].to_pylist()])
    return seconds, rows["power_w"].to_numpy().astype(float), rows["energy_mj_total"].to_numpy().astype(float)


@pytest.mark.parametrize("gap_s", [1.0, 60.0, 600.0])
def test_a_restart_neither_resets_the_counter_nor_loses_the_energy_across_it(gap_s):
    before = run(START_S, 121)
    after = run(START_S + 120 + gap_s, 121)
    never_stopped = run(START_S, 241 + int(gap_s))  # one process reading through the gap as well
    for gpu in (0, 1):
        _, _, e0 = gpu_series(before, gpu)
        _, _, e1 = gpu_series(after, gpu)
        _, power_w, e_all = gpu_series(never_stopped, gpu)
        across_j = (e1[0] - e0[-1]) / 1000.0
        # What the GPU drew while no collector ran: at least idle, at most its limit, for the gap.
        limit_w = before["power_limit_w"][0].as_py()
        assert 40.0 * gap_s < across_j < limit_w * gap_s
        # First to last reading across the restart: what a collector that never stopped counts,
        # which is what its power says.
        assert e1[-1] - e0[0] == e_all[-1] - e_all[0]
        assert (e_all[-1] - e_all[0]) / 1000.0 == pytest.approx(np.trapezoid(power_w, dx=1.0), rel=0.01)


def test_each_run_counts_what_its_power_says():
    _, power_w, counter_mj = gpu_series(run(START_S, 601), 0)
    assert (counter_mj[-1] - counter_mj[0]) / 1000.0 == pytest.approx(np.trapezoid(power_w, dx=1.0), rel=0.01)


def test_the_counter_never_falls_even_when_the_wall_clock_steps_back():
    now = [START_S]
    source = SimSource("node-01", gpus=2, clock=lambda: now[0])
    counters = []
    for step_s in (1.0, 1.0, -30.0, 1.0, 40.0):
        now[0] += step_s
        counters.append(source.read()["energy_mj_total"].to_pylist())
    for earlier, later in zip(counters, counters[1:]):
        assert all(b >= a for a, b in zip(earlier, later))
    assert counters[-1][0] > counters[1][0]


def test_a_seed_gives_the_same_readings_in_any_process_and_another_seed_other_ones():
    first, again, other = run(START_S, 30), run(START_S, 30), run(START_S, 30, seed=1)
    assert first.equals(again)
    assert first["power_w"].to_pylist() != other["power_w"].to_pylist()
    assert first["energy_mj_total"].to_pylist() != other["energy_mj_total"].to_pylist()


def test_a_clock_before_the_simulated_driver_loaded_is_refused_by_name():
    source = SimSource("node-01", gpus=1, clock=lambda: 0.0)
    with pytest.raises(SourceError, match="1970-01-01.*before.*2024-01-01"):
        source.read()
