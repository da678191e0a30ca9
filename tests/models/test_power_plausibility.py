"""Real data against the catalogue (models/gpu_catalogue.csv): fitted idle and loaded power per GPU
model, and the BMC power of two 8x H200 servers against what eight H200s can draw."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from joulehouse.models.gpu_catalogue import lookup
from test_power_real import fit_real_log

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
IDLE_TEMP_C, LOAD_TEMP_C = 35.0, 65.0


def _idle_and_loaded_w(c) -> tuple[float, float]:
    """A fit's power at no activity (idle chip temperature) and at full SM and memory activity."""
    return (float(c.predict_power_w(temp_c=IDLE_TEMP_C, activity_ratio=0.0)),
            float(c.predict_power_w(temp_c=LOAD_TEMP_C, activity_ratio=1.0, memory_ratio=1.0)))


def test_the_rtx4090_logs_fit_idles_and_loads_where_the_card_can():
    """Measured: idle 40.8 W (catalogue 25 W, the log's own floor ~33 W), full load 304 W (TDP 450 W)."""
    fit = fit_real_log(DATA / "telemetry" / "vlm_optimization_gpu_log_rtx4090_1hz.csv")
    spec = lookup("NVIDIA GeForce RTX 4090")
    idle_w, loaded_w = _idle_and_loaded_w(fit.coefficients)
    assert 0.8 * spec.idle_w <= idle_w <= 2.0 * spec.idle_w
    assert 0.5 * spec.tdp_w <= loaded_w <= 1.05 * spec.tdp_w


@pytest.mark.slow
def test_the_fleets_fits_idle_and_load_within_the_catalogues_range(fitted):
    """Each fitted model idles within 25% of the catalogue's measured idle, and at full SM and DRAM
    activity asks for 0.6-1.25x its TDP (above it the limit caps it: what caps then trade).
    Measured (seed 11): idle A100 53 W (catalogue 59), H100 81 W (87); full load 1.10x and 1.06x TDP."""
    models = fitted.con.execute("SELECT gpu_model FROM fct_power_model WHERE day = ?", [fitted.day]).fetchall()
    from joulehouse.models.power import coefficients_of, load_fit
    assert len(models) == 2
    for (model,) in models:
        spec = lookup(model)
        idle_w, loaded_w = _idle_and_loaded_w(coefficients_of(load_fit(fitted.con, model, fitted.day)))
        assert idle_w == pytest.approx(spec.idle_w, rel=0.25), model
        assert 0.6 * spec.tdp_w <= loaded_w <= 1.25 * spec.tdp_w, model


def _node_power_w() -> dict[str, list[float]]:
    with (DATA / "node_power" / "cisco_c885a_2x8xh200_bmc_node_power_11s.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {server: [float(r[server]) for r in rows] for server in ("n1_watts", "n2_watts")}


def test_two_8x_h200_servers_draw_what_eight_h200s_and_their_host_can():
    """Cisco C885A, BMC power every ~11 s for 20.8 h. Measured: 17 and 16 readings of 0 W (the BMC
    wrote no reading, not a server off: missing, not zero); the idle floor (1st percentile of the
    rest) 2,390 W and 2,354 W, far above eight idle H200s (8 x 75 W), so the host itself idles at
    ~1.75-1.79 kW; 100% and 99.8% of readings within eight H200s at their 700 W limit plus that idle
    host; the highest, 7.0 and 7.8 kW: under load the host draws more too."""
    h200 = lookup("NVIDIA H200")
    gpus_idle_w, gpus_max_w = 8 * h200.idle_w, 8 * h200.max_limit_w
    for server, readings in _node_power_w().items():
        zero = [w for w in readings if w <= 0]
        live = sorted(w for w in readings if w > 0)
        assert 0 < len(zero) < 0.01 * len(readings), server
        floor_w = live[len(live) // 100]
        host_idle_w = floor_w - gpus_idle_w
        assert 1000.0 < host_idle_w < 2500.0, server  # CPUs, memory, NICs, fans of an 8-GPU server
        within = sum(w <= gpus_max_w + host_idle_w for w in live) / len(live)
        assert within >= 0.99, (server, within)
        assert live[-1] <= 2 * (gpus_max_w + host_idle_w), server
        assert live[len(live) // 2] < gpus_idle_w + host_idle_w + 0.25 * (gpus_max_w - gpus_idle_w), server  # idle half the day
