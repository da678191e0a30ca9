"""Power fit on real nvidia-smi logs (../shared/data/telemetry), held out: the last 30% of each trace.

These logs carry the NVML-only feature set at best, and each lacks something: the fit falls back
(no clock: alpha not identifiable, reported NULL, and an activity exponent gamma with a decay after
work stops is fitted instead; no temperature: no leakage term; no utilisation at all: a static-only fit). Bounds are the measured held-out MAPE plus a small margin.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from joulehouse.settings import ModelSettings
from joulehouse.models.power import fit_day

ingest = pytest.importorskip("joulehouse.collectors.ingest.nvidia_smi")

READINGS = ("power_w", "util_gpu_pct", "util_mem_pct", "temp_c", "sm_clock_mhz")


def frozen_rows(table: pa.Table, min_run: int = 30) -> np.ndarray:
    """Rows inside a run of >= min_run samples whose readings are all identical to the previous
    one: a stuck logger (the MDDAir log repeats one reading for its last ~55 minutes)."""
    values = [np.asarray(table.column(c).to_pylist(), dtype=object) for c in READINGS if c in table.column_names]
    same = np.ones(table.num_rows, bool)
    same[0] = False
    for v in values:
        same[1:] &= v[1:] == v[:-1]
    frozen = np.zeros(table.num_rows, bool)
    start = None
    for i, flag in enumerate(np.append(same, False)):
        if flag and start is None:
            start = i - 1
        elif not flag and start is not None:
            if i - start >= min_run:
                frozen[start:i] = True
            start = None
    return frozen


def fit_real_log(path, drop_frozen: bool = True, settings: ModelSettings | None = None, **read_kwargs):
    table = ingest.read_nvidia_smi_csv(path, host="real-host", **read_kwargs).table
    if drop_frozen:
        table = table.filter(pa.array(~frozen_rows(table)))
    # Each file is its own "GPU model" here: the logs do not all name theirs.
    table = table.set_column(table.schema.get_field_index("gpu_model"), "gpu_model",
                             pa.array([path.stem] * table.num_rows, pa.string()))
    days = pc.cast(table.column("sampled_at"), pa.date32())
    table = table.append_column("day", days)
    con = duckdb.connect()
    con.register("log", table)
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT * FROM log")
    last_day: dt.date = max(days.to_pylist())
    settings = settings or ModelSettings(min_samples=10, holdout_fraction=0.3, history_days=3)
    (fit,) = fit_day(con, last_day, settings)
    return fit


# (file, read options, measured held-out MAPE %, bound asserted). The RTX 4090 log has no clock or
# temperature and util_gpu saturates (50-100% util all draw ~280 W): linear in util it reached 22.9%;
# with the activity exponent (gamma 0.3) and the decay after work stops (1.5 s), 7.8%.
CASES = [
    ("mddair_gpu_telemetry_1hz.csv", {}, 6.25, 7.0),
    ("gpu_glasses_nvidia_smi_8x80GB_idle.csv", {"index_column": "gpu"}, 0.71, 1.5),
    ("vlm_optimization_gpu_log_rtx4090_1hz.csv", {}, 7.81, 9.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,kwargs,measured,bound", CASES, ids=[c[0].split("_")[0] for c in CASES])
def test_held_out_mape_on_real_logs(shared_data, name, kwargs, measured, bound):
    fit = fit_real_log(shared_data / "telemetry" / name, **kwargs)
    print(f"{name}: held-out MAPE {fit.mape_pct:.2f}% (R2 {fit.r2}), {fit.n_samples} training rows, "
          f"feature set {fit.feature_set}, {fit.coefficients}")
    assert fit.feature_set == "nvml"
    assert fit.n_holdout > 0
    assert fit.mape_pct <= bound


@pytest.mark.slow
def test_rtx4090_needs_the_saturating_term(shared_data):
    """Without clocks, the fit chooses a concave activity term and a short decay, and they matter:
    forcing the linear term (gamma 1, no decay) costs ~15 points of held-out MAPE."""
    path = shared_data / "telemetry" / "vlm_optimization_gpu_log_rtx4090_1hz.csv"
    fit = fit_real_log(path)
    assert fit.coefficients.dyn_freq_exponent is None
    assert fit.coefficients.activity_exponent < 0.6 and fit.coefficients.activity_hold_s > 0
    assert 25.0 < fit.coefficients.static_w < 60.0  # the log idles at 33-48 W
    linear = fit_real_log(path, settings=ModelSettings(min_samples=10, holdout_fraction=0.3, history_days=3,
                                                       activity_exponent_min=1.0, activity_exponent_count=1,
                                                       activity_hold_grid_s=(0.0,)))
    assert linear.mape_pct > fit.mape_pct + 10.0


@pytest.mark.slow
def test_a_frozen_logger_would_flatter_the_fit(shared_data):
    """Kept in, the MDDAir log's stuck tail is the whole held-out set: an easy, meaningless score."""
    path = shared_data / "telemetry" / "mddair_gpu_telemetry_1hz.csv"
    table = ingest.read_nvidia_smi_csv(path, host="real-host").table
    assert frozen_rows(table).mean() > 0.3
    assert fit_real_log(path, drop_frozen=False).r2 is None  # no variance left to explain


@pytest.mark.slow
def test_no_static_share_where_the_fit_put_static_power_at_its_bound(shared_data):
    """The MDDAir card is hot whenever it is busy: the fit puts static power at 25 C on its 1e-6 W
    bound and the load in the temperature slope (~9.9 W/C). Its rise per 10 C as a share of that
    was 9.9e9 % (fct_power_model.static_pct_per_10c, shown in the report): no share is measured."""
    fit = fit_real_log(shared_data / "telemetry" / "mddair_gpu_telemetry_1hz.csv")
    assert fit.coefficients.static_w < 1.0
    assert fit.coefficients.static_pct_per_10c is None
