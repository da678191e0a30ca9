"""Thermal resistance theta (C/W) and time constant tau (s) per GPU, ranked within its model.

T_chip relaxes towards T_inlet + theta*P with time constant tau. Sampled every dt, that is the
regression y_t = b0 + b1*y_prev + b2*P_a + b3*P_b (models/sql/thermal_suffstats.sql sums it in
SQL), so theta = (b2 + b3)/(1 - b1) and tau = -dt/ln(b1) come from one 4x4 solve per GPU, without
needing steady state. The power over the step is the energy counter's rise over it where the
readings carry the counter (P_a, with the step's end reading as P_b): two instant readings miss
what the power did between them, and on training steps of a few seconds read every 10-60 s they
gave tau 2-3x the truth and theta 2-5% low (the counter: tau -24% to +4%, theta -1%). tau needs
the power to move within minutes: a clock-locked GPU whose power only drifted (24 W spread over
the day) read tau 2-4x with its theta right, so tau is published only where the chip's temperature
strayed far enough from where its power would hold it (MIN_TRANSIENT_SD_C), else NULL with theta
kept; the fit's own standard error of tau does not tell the two apart (below). Without a counter
the step is bracketed by its two ends (P_t, P_prev): a power that moves more than once between two
readings (20 s steps read every 30 s) is then not seen, and theta reads low (0.065 for 0.100). A GPU with fewer than
MIN_STEPS steps gets none: 14 steps of whole-degree readings gave theta 0.057 to 0.107 for 0.100,
ranked best-cooled or flagged an outlier.
Inlet air: the host's node_samples.inlet_temp_c when present (y = T - T_inlet); otherwise the
inlet is taken as constant over the day and estimated per GPU as b0/(1 - b1)
(inlet_source 'estimated': diurnal inlet swings then leak into theta, so compare such GPUs with
each other on the same host rather than across sites). GPUs whose theta is more than
`outlier_pct` from their model's median are flagged (badly seated heatsink, blocked airflow).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import duckdb
import numpy as np

from joulehouse.warehouse.sqlio import (columns_of, ensure_columns, quoted_relation, records, relation_exists,
                                        replace_day_rows)
from joulehouse.models.sql import load_sql

# An inlet reading older than this (s) says nothing of the air now: the BMC stopped answering.
MAX_INLET_AGE_S = 300.0
NODE_RELATIONS = ("stg_node_samples", "node_samples", "raw_node_samples")
OUTLIER_PCT = 25.0
# theta is what the chip's temperature does when its power moves: a GPU whose power barely moved
# all day (idle at 72 +- 0.5 W) does not measure it, and the solve still returns one. Simulated
# with theta 0.12 C/W, tau 60 s and whole-degree readings, a power spread (standard deviation) of
# 0.3 W gave theta 6-10 C/W with an estimated inlet of -700 C (flagged an outlier, 60x its
# model's median), 3 W gave 0.7, 12 W 0.21, 29 W 0.14. Loaded GPUs spread 90-220 W over a day.
MIN_POWER_SD_W = 20.0
# Steps (one sampling interval each) a GPU needs for a theta: half an hour at DCGM's 30 s.
MIN_STEPS = 60
# tau is timed from how far a step's starting temperature lies from where the step's power would
# hold the chip: the standard deviation of y_prev that the step's power does not explain
# (transient_sd_c, 1/sqrt([(X'X)^-1]_11 / n) of the fit's own sums). Below a whole-degree
# reading's step, the reading's rounding and slow drifts (an estimated inlet's) stand in for the
# transient and pull b1 towards 1: tau reads long. 526 fits of simulated A100s (3 seeds x 8
# GPUs, clocks free or locked at 850-1200 MHz, read every 10, 30 or 60 s, inlet measured or not):
# under 0.55 C tau read 1.01-4.4x the truth, 0.55-1 C 0.84-2.3x, from 1 C on 0.75-1.34x (the
# 60 s reading's own -25%; 0.88-1.32x at 10-30 s). Theta was within -4%..+4% from 1 C on and
# -0.1%..+13% under 0.55 C (an estimated inlet; within 3% where measured): theta is kept.
# tau's standard error from the residual variance (tau_rel_se) is noise only, and the bias is
# not noise: 0.4-2.8% where tau was kept, 2.4-6.9% where it read up to 4.4x, and shrinking as
# readings accumulate while the bias does not, so no bound on it separates the two.
MIN_TRANSIENT_SD_C = 1.0
# fct_thermal_gpu's columns newer than the table's first version
ADDED_COLUMNS = {"tau_rel_se": "DOUBLE", "transient_sd_c": "DOUBLE"}


@dataclass(frozen=True)
class ThermalFit:
    """One GPU-day's solve: theta (C/W), tau (s; None where the data cannot time it), the
    constant-inlet intercept (C), tau's relative standard error and the transient it is timed from (C)."""

    theta_c_per_w: float
    tau_s: float | None
    intercept_c: float
    tau_rel_se: float
    transient_sd_c: float


def solve_thermal(row: dict) -> ThermalFit | None:
    """One GPU's fit from its sums; None if theta is not identifiable (too few rows, power spread
    below MIN_POWER_SD_W, a singular or unphysical solution). tau_s is None where the transient is
    under MIN_TRANSIENT_SD_C."""
    n = row["n"]
    if not n or n < MIN_STEPS:
        return None
    power_var_w2 = row["s_2_2"] / n - (row["s_0_2"] / n) ** 2
    if not power_var_w2 >= MIN_POWER_SD_W**2:
        return None  # the power hardly moved: theta is not identified (MIN_POWER_SD_W)
    s = lambda i, j: n if i == j == 0 else row[f"s_{min(i, j)}_{max(i, j)}"]  # noqa: E731
    a = np.array([[s(i, j) for j in range(4)] for i in range(4)], dtype=float)
    b = np.array([row["s_0_y"], row["s_1_y"], row["s_2_y"], row["s_3_y"]], dtype=float)
    try:
        coef = np.linalg.solve(a, b)
        a_inv = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return None
    b0, b1, b2, b3 = coef
    if not 0.0 < b1 < 1.0 or b2 + b3 <= 0:
        return None
    tau = -float(row["interval_s"]) / math.log(b1)
    residual_var_c2 = max(float(row["s_y_y"] - coef @ b), 0.0) / (n - len(coef))
    # delta method: d(tau)/tau = d(b1) / (b1 |ln b1|)
    b1_var_share = max(float(a_inv[1, 1]), 0.0)  # [(X'X)^-1]_11: > 0 unless y_prev is the power's wholly
    tau_rel_se = math.sqrt(residual_var_c2 * b1_var_share) / (b1 * -math.log(b1))
    transient_sd_c = 1.0 / math.sqrt(n * b1_var_share) if b1_var_share > 0 else 0.0
    return ThermalFit(theta_c_per_w=float((b2 + b3) / (1 - b1)),
                      tau_s=tau if transient_sd_c >= MIN_TRANSIENT_SD_C else None,
                      intercept_c=float(b0 / (1 - b1)), tau_rel_se=tau_rel_se, transient_sd_c=transient_sd_c)


def fit_thermal_day(con: duckdb.DuckDBPyConnection, day: dt.date, *, samples_relation: str = "stg_gpu_samples",
                    max_gap_s: float = 60.0, outlier_pct: float = OUTLIER_PCT) -> int:
    """Write `day`'s rows of fct_thermal_gpu; returns how many GPUs got a theta."""
    quoted = quoted_relation(samples_relation)
    if not relation_exists(con, samples_relation):
        raise ValueError(f"samples relation {samples_relation!r} does not exist in the warehouse")
    # a relation without the energy counter (an nvidia-smi log) is fitted from its instant readings
    counter = "" if "energy_mj_total" in columns_of(con, samples_relation) else \
        ", CAST(NULL AS DOUBLE) AS energy_mj_total"
    con.execute(f"CREATE OR REPLACE TEMP VIEW thermal_input_samples AS SELECT *{counter} FROM {quoted}")
    node = next((name for name in NODE_RELATIONS if relation_exists(con, name)), None)
    if node is not None:  # the lake as written: pandas' NaN for a missing inlet, one of which lost the host
        con.execute("CREATE OR REPLACE TEMP VIEW thermal_input_inlet AS SELECT host, sampled_at, "
                    f"CAST(inlet_temp_c AS DOUBLE) AS inlet_temp_c FROM {quoted_relation(node)} WHERE isfinite(inlet_temp_c)")
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE thermal_input_inlet (host VARCHAR, sampled_at TIMESTAMPTZ, inlet_temp_c DOUBLE)")
    stats = records(con.execute(load_sql("thermal_suffstats"), {"day": day, "max_gap_s": max_gap_s,
                                                                  "max_inlet_age_s": MAX_INLET_AGE_S}))
    rows = []
    for s in stats:
        fit = solve_thermal(s)
        if fit is None:
            continue
        measured = bool(s["inlet_measured"])
        rows.append({"day": day, "host": s["host"], "gpu_uuid": s["gpu_uuid"], "gpu_model": s["gpu_model"],
                     "n_samples": s["n"], "theta_c_per_w": fit.theta_c_per_w, "tau_s": fit.tau_s,
                     "tau_rel_se": fit.tau_rel_se, "transient_sd_c": fit.transient_sd_c,
                     "inlet_c": s["mean_inlet_c"] if measured else fit.intercept_c,
                     "inlet_source": "node_samples" if measured else "estimated"})
    for model in {r["gpu_model"] for r in rows}:
        group = sorted((r for r in rows if r["gpu_model"] == model), key=lambda r: r["theta_c_per_w"])
        median = float(np.median([r["theta_c_per_w"] for r in group]))
        for rank, r in enumerate(group, start=1):
            pct = 100.0 * (r["theta_c_per_w"] / median - 1.0)
            r.update(rank_in_model=rank, model_median_theta_c_per_w=median, theta_vs_model_pct=pct,
                     is_outlier=abs(pct) > outlier_pct)
    con.execute(load_sql("fct_thermal_gpu"))
    ensure_columns(con, "fct_thermal_gpu", ADDED_COLUMNS)  # a table stored before them: NULL on its earlier rows
    replace_day_rows(con, day, {"fct_thermal_gpu": rows})
    return len(rows)
