"""The fleet simulator: physics the models must recover, and lake rows a collector would write."""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joulehouse.collectors.schema import GPU_SAMPLES
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.collectors.sim.constants import A100, CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING, CLOCK_EVENT_SW_POWER_CAP, H100, SPECS
from joulehouse.collectors.sim.fleet import INVENTORY_COLUMNS, build_fleet
from joulehouse.collectors.sim.physics import energy_counter_mj, first_order_lag, power_at, simulate_block

DAY = dt.date(2026, 6, 10)
INTERVAL_S = 5.0


def read(lake: Path, dataset: str) -> pa.Table:
    return ds.dataset(lake / dataset, format="parquet", partitioning="hive").to_table()


def by_gpu(table: pa.Table) -> dict[str, pa.Table]:
    table = table.sort_by([("gpu_uuid", "ascending"), ("sampled_at", "ascending")])
    return {u: table.filter(pc.equal(table["gpu_uuid"], u)) for u in pc.unique(table["gpu_uuid"]).to_pylist()}


@pytest.fixture(scope="module")
def fleet_day(tmp_path_factory):
    """16 GPUs (an A100 host and an H100 host) for one day at 5 s."""
    lake = tmp_path_factory.mktemp("sim") / "lake"
    summary = simulate_fleet(lake, gpus=16, days=1, start=DAY, seed=3, interval_s=INTERVAL_S)
    return lake, summary


@pytest.mark.slow
def test_energy_counter_is_the_integral_of_power(fleet_day):
    lake, _ = fleet_day
    for uuid, g in by_gpu(read(lake, "gpu_samples")).items():
        counter = g["energy_mj_total"].to_numpy()
        power = g["power_w"].to_numpy().astype(float)
        assert np.all(np.diff(counter) >= 0), uuid
        integral_mj = np.sum(power[1:]) * INTERVAL_S * 1000.0
        assert abs((counter[-1] - counter[0]) - integral_mj) / integral_mj < 0.005, uuid


def test_static_power_rises_with_temperature_as_specified():
    for spec in SPECS.values():
        rise = spec.power.static_power_w(45.0) / spec.power.static_power_w(35.0) - 1.0
        assert 0.08 <= rise <= 0.12
        assert rise == pytest.approx(spec.power.static_pct_per_10c / 100.0)
    # An idle GPU in warmer air is hotter and draws more, by exactly the leakage law.
    kw = dict(act=np.zeros((1, 600)), dram=np.zeros((1, 600)), pcie_gbps=np.zeros((1, 600)),
              clock_ratio_target=np.full((1, 600), 210 / 1410), limit_w=[400.0], theta_c_per_w=[0.1], tau_s=[45.0],
              interval_s=1.0, f_max_mhz=1410, f_min_mhz=210)
    cool = simulate_block(A100.power, inlet_c=np.full((1, 600), 20.0), **kw)
    warm = simulate_block(A100.power, inlet_c=np.full((1, 600), 35.0), **kw)
    assert warm.temp_c[0, -1] > cool.temp_c[0, -1] + 14.0
    ratio = warm.power_w[0, -1] / cool.power_w[0, -1]
    assert ratio == pytest.approx(np.exp(A100.power.leakage_per_c * (warm.temp_c[0, -1] - cool.temp_c[0, -1])))


def test_idle_gpus_sit_near_their_models_idle_power(fleet_day):
    lake, _ = fleet_day
    t = read(lake, "gpu_samples")
    idle = t.filter(pc.equal(t["pstate"], 8))
    assert idle.num_rows > 1000
    for model in pc.unique(idle["gpu_model"]).to_pylist():
        power = idle.filter(pc.equal(idle["gpu_model"], model))["power_w"].to_numpy()
        assert np.median(power) == pytest.approx(SPECS[model].idle_w, rel=0.08), model


def test_no_null_and_no_invented_zero(fleet_day):
    lake, _ = fleet_day
    t = read(lake, "gpu_samples")
    for name in GPU_SAMPLES.names:
        assert t[name].null_count == 0, name
    for name in ("power_w", "energy_mj_total", "temp_c", "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz",
                 "power_limit_w", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"):
        assert pc.min(t[name]).as_py() > 0, name
    for name in ("sm_active_ratio", "tensor_active_ratio", "dram_active_ratio", "sm_occupancy_ratio"):
        assert 0.0 <= pc.min(t[name]).as_py() and pc.max(t[name]).as_py() <= 1.0, name
    for dataset in ("node_samples", "facility_samples", "jobs"):
        d = read(lake, dataset)
        for name in ("power_w", "inlet_temp_c", "fan_rpm_avg", "facility_power_w", "it_power_w", "user", "stage"):
            if name in d.column_names:
                assert d[name].null_count == 0, (dataset, name)


def test_readings_come_at_the_resolution_the_sources_deliver(fleet_day):
    lake, _ = fleet_day
    t = read(lake, "gpu_samples")
    power_mw = t["power_w"].to_numpy().astype(np.float64) * 1000.0
    assert np.all(np.abs(power_mw - np.round(power_mw)) < 0.07), "NVML power is whole mW"
    for name in ("temp_c", "mem_temp_c", "util_gpu_pct", "util_mem_pct"):
        values = t[name].to_numpy()
        assert np.array_equal(values, np.round(values)), f"{name}: whole units"
    for name in ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"):
        assert np.all(t[name].to_numpy() % 1024 == 0), f"{name}: NVML gives whole KiB/s"


def test_jobs_cover_exactly_the_busy_samples(fleet_day):
    lake, _ = fleet_day
    jobs = read(lake, "jobs").to_pylist()
    assert {j["stage"] for j in jobs} == {"training", "inference", "data-preparation", "evaluation"}
    for uuid, g in by_gpu(read(lake, "gpu_samples")).items():
        times = g["sampled_at"].cast(pa.int64()).to_numpy()
        covered = np.zeros(times.size, dtype=int)
        for j in (j for j in jobs if j["gpu_uuid"] == uuid):
            lo, hi = (int(j[k].timestamp() * 1e6) for k in ("started_at", "ended_at"))
            covered += (times >= lo) & (times < hi)
        assert covered.max() <= 1, f"{uuid}: overlapping jobs"
        np.testing.assert_array_equal(covered == 1, g["pstate"].to_numpy() == 0)
    for j in jobs:
        counters = (j["samples_total"], j["requests_total"])
        assert any(c is not None and c > 0 for c in counters) and j["flops_total"] > 0, j["job_id"]
        assert (j["requests_total"] is not None) == (j["stage"] == "inference") == (j["tokens_total"] is not None)


def test_inventory_lists_every_gpu(fleet_day):
    lake, summary = fleet_day
    assert summary.inventory_path == lake.parent / "inventory.csv"
    with open(summary.inventory_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == INVENTORY_COLUMNS
    simulated = set(pc.unique(read(lake, "gpu_samples")["gpu_uuid"]).to_pylist())
    assert {r["gpu_uuid"] for r in rows} == simulated == {g.uuid for g in summary.gpus}
    assert all(float(r["purchase_price_usd"]) > 0 and float(r["embodied_kgco2e"]) > 0 for r in rows)


def test_node_power_exceeds_the_sum_of_its_gpus(fleet_day):
    lake, _ = fleet_day
    gpu = read(lake, "gpu_samples").group_by(["host", "sampled_at"]).aggregate([("power_w", "sum")])
    node = read(lake, "node_samples")
    joined = node.join(gpu, ["host", "sampled_at"])
    assert joined.num_rows == node.num_rows
    excess = joined["power_w"].to_numpy() - joined["power_w_sum"].to_numpy()
    assert excess.min() > 150.0  # CPUs, fans, memory, PSU loss


def test_facility_pue_is_realistic_and_rises_with_outdoor_temperature(fleet_day):
    lake, _ = fleet_day
    fac = read(lake, "facility_samples")
    assert fac.num_rows == 24 * 60
    pue = fac["facility_power_w"].to_numpy() / fac["it_power_w"].to_numpy()
    outdoor = fac["outdoor_temp_c"].to_numpy().astype(float)
    assert 1.05 < pue.min() and pue.max() < 1.7
    assert outdoor.max() - outdoor.min() > 4.0  # a diurnal cycle
    assert np.polyfit(outdoor, pue, 1)[0] > 0.004


def test_a_least_squares_fit_recovers_the_true_coefficients(fleet_day):
    lake, summary = fleet_day
    t = read(lake, "gpu_samples")
    t = t.filter(pc.equal(pc.bit_wise_and(t["clock_event_reasons"], CLOCK_EVENT_SW_POWER_CAP), 0))
    for model in (A100.nvml_name, H100.nvml_name):
        m = t.filter(pc.equal(t["gpu_model"], model))
        truth, f_max = summary.truth[model], SPECS[model].f_max_mhz
        y = m["power_w"].to_numpy().astype(float)
        temp = m["temp_c"].to_numpy().astype(float)
        act, dram = m["sm_active_ratio"].to_numpy(), m["dram_active_ratio"].to_numpy()
        ratio = m["sm_clock_mhz"].to_numpy() / f_max
        pcie = (m["pcie_tx_bytes_per_s"].to_numpy() + m["pcie_rx_bytes_per_s"].to_numpy()) / 1e9
        fits = {}
        for alpha in (1.0, 2.0, 3.0, truth.dyn_freq_exponent - 0.4, truth.dyn_freq_exponent, truth.dyn_freq_exponent + 0.4):
            x = np.column_stack([np.ones_like(y), temp - 25.0, act * ratio**alpha, dram, pcie])
            beta, sse, *_ = np.linalg.lstsq(x, y, rcond=None)
            fits[alpha] = (float(sse[0]), beta)
        best = min(fits, key=lambda a: fits[a][0])
        beta = fits[best][1]
        assert best == truth.dyn_freq_exponent, model
        assert beta[2] == pytest.approx(truth.dyn_w, rel=0.03), model
        assert beta[3] == pytest.approx(truth.mem_w, rel=0.1), model
        static_w, temp_w_per_c = truth.linear_static_fit(temp)
        assert beta[1] == pytest.approx(temp_w_per_c, rel=0.25), model
        assert 0.08 < 10 * beta[1] / beta[0] < 0.2, model


@pytest.mark.slow
def test_caps_clip_power_pull_the_clock_down_and_slow_compute_bound_work(tmp_path, fleet_day):
    base_lake, base = fleet_day
    a100 = [g.uuid for g in base.gpus if g.model == A100.nvml_name]
    capped_uuid = a100[0]
    lake = tmp_path / "lake"
    simulate_fleet(lake, gpus=16, days=1, start=DAY, seed=3, interval_s=INTERVAL_S, power_limits_w={capped_uuid: 200.0})
    before, after = by_gpu(read(base_lake, "gpu_samples")), by_gpu(read(lake, "gpu_samples"))
    g = after[capped_uuid]
    assert pc.min(g["power_limit_w"]).as_py() == 200.0
    capped = pc.not_equal(pc.bit_wise_and(g["clock_event_reasons"], CLOCK_EVENT_SW_POWER_CAP), 0).to_numpy(False)
    assert capped.sum() > 100
    assert g["power_w"].to_numpy().max() < 200.0 + 3.0  # the limit, plus reading noise
    assert g["sm_clock_mhz"].to_numpy()[capped].max() < A100.f_max_mhz
    busy_before = before[capped_uuid]["power_w"].to_numpy()
    assert busy_before.max() > 300.0  # the same day uncapped went well above the cap
    for uuid in a100[1:]:
        assert after[uuid].equals(before[uuid]), f"{uuid} was not capped and must not change"
    jobs_before = {j["job_id"]: j for j in read(base_lake, "jobs").to_pylist() if j["gpu_uuid"] == capped_uuid}
    jobs_after = {j["job_id"]: j for j in read(lake, "jobs").to_pylist() if j["gpu_uuid"] == capped_uuid}
    slowed = [jobs_after[k]["samples_total"] < jobs_before[k]["samples_total"] for k in jobs_before
              if jobs_before[k]["stage"] == "training"]
    assert slowed and any(slowed)


@pytest.mark.slow
def test_same_seed_same_rows_and_day_by_day_equals_multi_day(tmp_path):
    kw = dict(gpus=8, seed=11, interval_s=10.0)
    multi = simulate_fleet(tmp_path / "a" / "lake", days=2, start=DAY, **kw)
    simulate_fleet(tmp_path / "b" / "lake", days=1, start=DAY, **kw)
    simulate_fleet(tmp_path / "b" / "lake", days=1, start=DAY + dt.timedelta(days=1), **kw)
    simulate_fleet(tmp_path / "c" / "lake", days=2, start=DAY, **{**kw, "seed": 12})
    key = [("gpu_uuid", "ascending"), ("sampled_at", "ascending")]
    for dataset, sort in (("gpu_samples", key), ("jobs", [("job_id", "ascending"), ("gpu_uuid", "ascending")]),
                          ("node_samples", [("host", "ascending"), ("sampled_at", "ascending")])):
        a = read(tmp_path / "a" / "lake", dataset).sort_by(sort)
        b = read(tmp_path / "b" / "lake", dataset).sort_by(sort)
        assert a.equals(b), dataset
    c = read(tmp_path / "c" / "lake", "gpu_samples").sort_by(key)
    assert not c["power_w"].equals(read(tmp_path / "a" / "lake", "gpu_samples").sort_by(key)["power_w"])
    again = simulate_fleet(tmp_path / "a" / "lake", days=2, start=DAY, **kw)  # re-run replaces, no duplicates
    assert read(tmp_path / "a" / "lake", "gpu_samples").num_rows == again.rows["gpu_samples"] == multi.rows["gpu_samples"]


def test_one_job_profile_runs_on_two_gpu_models(fleet_day):
    lake, summary = fleet_day
    runs = summary.cross_model_runs
    assert len({r.gpu_model for r in runs}) == 2 and len({r.profile for r in runs}) == 1
    jobs = {j["job_id"]: j for j in read(lake, "jobs").to_pylist()}
    first, second = (jobs[r.job_id] for r in runs)
    assert (first["started_at"], first["ended_at"]) == (second["started_at"], second["ended_at"])
    assert first["samples_total"] != second["samples_total"]


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(ValueError, match="unknown gpu_uuid 'GPU-nope'"):
        simulate_fleet(tmp_path / "lake", gpus=2, days=1, start=DAY, power_limits_w={"GPU-nope": 300.0})
    with pytest.raises(ValueError, match="interval_s"):
        simulate_fleet(tmp_path / "lake", gpus=2, days=1, start=DAY, interval_s=7.0)


@settings(max_examples=40, deadline=None)
@given(tau_s=st.floats(5.0, 200.0), interval_s=st.sampled_from([0.5, 1.0, 5.0, 30.0]),
       values=st.lists(st.floats(0.0, 900.0), min_size=1, max_size=400), initial=st.floats(10.0, 90.0))
def test_first_order_lag_matches_the_plain_recursion(tau_s, interval_s, values, initial):
    target = np.array([values])
    got = first_order_lag(target, [tau_s], interval_s, [initial])[0]
    a, y, expected = np.exp(-interval_s / tau_s), initial, []
    for u in values:
        y = a * y + (1.0 - a) * u
        expected.append(y)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-7)


@settings(max_examples=60, deadline=None)
@given(temp_c=st.floats(25.0, 90.0), act=st.floats(0.05, 1.0), dram=st.floats(0.0, 1.0),
       limit_w=st.floats(200.0, 700.0), lock=st.floats(0.3, 1.0))
def test_power_never_exceeds_a_limit_it_can_meet_and_the_clock_never_rises(temp_c, act, dram, limit_w, lock):
    spec = H100
    arr = lambda v: np.array([[v]])  # noqa: E731
    power, clock, capped = power_at(spec.power, arr(temp_c), arr(act), arr(dram), arr(1.0), arr(lock), arr(limit_w),
                                    spec.f_max_mhz, spec.f_idle_mhz)
    floor_w = power_at(spec.power, arr(temp_c), arr(act), arr(dram), arr(1.0), arr(spec.f_idle_mhz / spec.f_max_mhz),
                       arr(1e9), spec.f_max_mhz, spec.f_idle_mhz)[0]
    if floor_w[0, 0] <= limit_w:
        assert power[0, 0] <= limit_w + 1e-6
    assert clock[0, 0] <= int(lock * spec.f_max_mhz + 1e-9)
    assert capped[0, 0] == (power_at(spec.power, arr(temp_c), arr(act), arr(dram), arr(1.0), arr(lock), arr(1e9),
                                     spec.f_max_mhz, spec.f_idle_mhz)[0][0, 0] > limit_w)


def test_energy_counter_never_goes_backwards():
    power = np.abs(np.random.default_rng(0).normal(300.0, 100.0, (3, 1000)))
    counter = energy_counter_mj(power, 1.0, [5, 10**12, 0])
    assert np.all(np.diff(counter, axis=1) >= 0)
    assert counter[1, -1] - 10**12 == pytest.approx(power[1].sum() * 1000.0, abs=1.0)


@pytest.mark.slow
def test_limits_per_day_match_day_by_day_calls_and_leave_other_gpus_alone(tmp_path):
    kw = dict(gpus=8, seed=5, interval_s=10.0)
    day2 = DAY + dt.timedelta(days=1)
    plain = simulate_fleet(tmp_path / "plain" / "lake", days=2, start=DAY, **kw)
    capped_uuid = plain.gpus[0].uuid
    simulate_fleet(tmp_path / "perday" / "lake", days=2, start=DAY, power_limits_by_day={day2: {capped_uuid: 250.0}},
                   **kw)
    simulate_fleet(tmp_path / "calls" / "lake", days=1, start=DAY, **kw)
    simulate_fleet(tmp_path / "calls" / "lake", days=1, start=day2, power_limits_w={capped_uuid: 250.0}, **kw)
    key = [("gpu_uuid", "ascending"), ("sampled_at", "ascending")]
    per_day = read(tmp_path / "perday" / "lake", "gpu_samples").sort_by(key)
    assert per_day.equals(read(tmp_path / "calls" / "lake", "gpu_samples").sort_by(key))
    untouched = by_gpu(read(tmp_path / "plain" / "lake", "gpu_samples"))
    for uuid, rows in by_gpu(per_day).items():
        limits = set(rows["power_limit_w"].to_pylist())
        if uuid == capped_uuid:
            assert limits == {400.0, 250.0}
            day1 = rows.filter(pc.equal(rows["power_limit_w"], 400.0))
            assert day1.equals(untouched[uuid].slice(0, day1.num_rows))
        else:
            assert rows.equals(untouched[uuid]), uuid


@pytest.mark.slow
def test_locked_clocks_cap_the_clock_cut_power_as_f_alpha_and_slow_compute_bound_work(tmp_path, fleet_day):
    """A clock range locked from outside (the agent's nvmlDeviceSetGpuLockedClocks) is obeyed like the
    driver's: busy clocks at or below its max, reason bit 0x2 where it binds, less power, fewer samples."""
    base_lake, base = fleet_day
    a100 = [g.uuid for g in base.gpus if g.model == A100.nvml_name]
    locked_uuid, lock_max = a100[0], 1000
    lake = tmp_path / "lake"
    simulate_fleet(lake, gpus=16, days=1, start=DAY, seed=3, interval_s=INTERVAL_S,
                   locked_sm_clocks_by_day={DAY: {locked_uuid: (420, lock_max)}})
    before, after = by_gpu(read(base_lake, "gpu_samples")), by_gpu(read(lake, "gpu_samples"))
    g, g0 = after[locked_uuid], before[locked_uuid]
    clock, clock0 = g["sm_clock_mhz"].to_numpy(), g0["sm_clock_mhz"].to_numpy()
    assert clock.max() <= lock_max and clock0.max() > lock_max
    bit = pc.not_equal(pc.bit_wise_and(g["clock_event_reasons"], CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING), 0)
    pulled = clock0 > lock_max
    assert bit.to_numpy(False)[pulled].all()
    # Where the power cap did not bind, only the dynamic term changes: exactly dyn*act*(f0^a - f^a).
    truth = A100.power
    act = g["sm_active_ratio"].to_numpy().astype(float)
    alpha = truth.dyn_freq_exponent
    expected_drop = truth.dyn_w * act * ((clock0 / A100.f_max_mhz) ** alpha - (clock / A100.f_max_mhz) ** alpha)
    drop = g0["power_w"].to_numpy().astype(float) - g["power_w"].to_numpy().astype(float)
    sel = pulled & (expected_drop > 20.0)
    assert sel.sum() > 100
    # The chip also runs cooler, so leakage falls a little more than the dynamic term alone.
    assert np.median(drop[sel] / expected_drop[sel]) == pytest.approx(1.0, abs=0.1)
    for uuid in a100[1:]:
        assert after[uuid].equals(before[uuid]), f"{uuid} was not locked and must not change"
    jobs_before = {j["job_id"]: j for j in read(base_lake, "jobs").to_pylist() if j["gpu_uuid"] == locked_uuid}
    jobs_after = {j["job_id"]: j for j in read(lake, "jobs").to_pylist() if j["gpu_uuid"] == locked_uuid}
    for k, j in jobs_before.items():
        if j["stage"] == "training":
            assert jobs_after[k]["samples_total"] < j["samples_total"]
            assert jobs_after[k]["flops_total"] < j["flops_total"]


def test_bad_clock_locks_are_named(tmp_path):
    with pytest.raises(ValueError, match="locked_sm_clocks_by_day.*expected 0 < min <= max <= 1410 MHz"):
        simulate_fleet(tmp_path / "lake", gpus=2, days=1, start=DAY, interval_s=60.0,
                       locked_sm_clocks_by_day={DAY: {build_fleet(2, 0)[0].uuid: (500, 2000)}})
