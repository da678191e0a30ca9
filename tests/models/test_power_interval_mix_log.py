"""A measure no GPU of a model read, where its fit weighs it, leaves every busy GPU of the model out
of the day's mix interval for one reason: the log says it once with the count, not once per GPU
(a fleet whose exporter reads no temperature wrote a warning per GPU per day)."""

from __future__ import annotations

import datetime as dt
import logging

import duckdb
from test_power_interval_stand_ins import A100, COMPUTE_BOUND, DAY, MEMORY_BOUND, _fit, _gpu_samples

from joulehouse.models.power_interval import power_interval_day
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import replace_day_rows
from power_synthetic import load_samples

N_GPUS = 12


def test_gpus_left_out_of_the_mix_for_one_reason_are_one_log_line(caplog):
    con = duckdb.connect()
    for i in range(N_GPUS):  # none reads temperature
        load_samples(con, _gpu_samples(f"GPU-{i:02d}", COMPUTE_BOUND if i % 2 else MEMORY_BOUND, None))
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY, {"fct_power_model": [_fit(temp_w_per_c=2.0).as_row() | {
        "gpu_model": A100, "day": DAY, "fitted_at": dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc),
        "feature_set": "dcgm", "n_samples": 100_000, "passed_gate": True}]})
    with caplog.at_level(logging.WARNING, logger="joulehouse.models.power_interval"):
        intervals, _ = power_interval_day(con, DAY, RecommendSettings())
    assert intervals == []
    mix_lines = [r.getMessage() for r in caplog.records if "mix" in r.getMessage()]
    assert len(mix_lines) == 1, mix_lines
    assert f"{N_GPUS} GPU(s) left out of the throughput mix" in mix_lines[0]
    assert "no temperature read" in mix_lines[0] and "temp_w_per_c" in mix_lines[0]
