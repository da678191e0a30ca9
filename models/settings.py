"""[models] and [recommend]: the power-model fit and its gate, and the choice of power settings.

Sections of the settings file (joulehouse.settings assembles them; collectors.settings reads
them); every value is checked when read.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from joulehouse.collectors.settings import (Count, Finite, Names, NonNegative, NonNegativeInt, NonNegativeList, Positive,
                                            RelativeToFile, Seconds, section)
from joulehouse.models.limit_change import LOOKBACK_DAYS, MAX_AFTER_DAYS

# Days of readings the recommendation outcome re-reads (models.outcome: a change's days after and
# the days before it, plus the day measured); the power fit re-reads models.history_days.
OUTCOME_READING_DAYS = MAX_AFTER_DAYS + LOOKBACK_DAYS + 1
# Days before a day that its jobs may have started and still be found (models.day_jobs).
JOB_MAX_DAYS = 35


@section
class ModelSettings:
    """Power-model fitting and its quality gate."""

    holdout_fraction: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.3, description="Share of the fit's window (its last days) held out to validate the fit.")
    holdout_max_days: Positive = Field(
        2.0, description="... but never more than this many days: a 28-day window would otherwise hold out 8.4 days,\n"
                         "re-read sample by sample every day, where the last days already say how the model does.")
    max_holdout_mape_pct: Positive = Field(10.0, description="The gate: held-out mean absolute percentage error at most this, %.")
    min_holdout_samples: Count = Field(
        60, description="The gate: a fit is validated on at least this many held-out readings (one reading says nothing).")
    min_holdout_hours: Annotated[float, Field(ge=0, le=240, allow_inf_nan=False)] = Field(
        0.5, description="... standing for at least this much held-out time, h (sum of their intervals): a minute of\n"
                         "readings does not show how a model does over a day's load.")
    drift_warning_pct: Positive = Field(20.0, description="A coefficient moving more than this from the last fit is reported as drift, %.")
    min_samples: Count = Field(600, description="A GPU model needs this many readings to be fitted.")
    history_days: Count = Field(28, description="Days of history (ending on the fitted day) a fit sees; sums make longer windows cheap.")
    max_sample_interval_s: Seconds = Field(
        60.0, description="One sample stands for at most this long when integrating energy, s (longer gaps are not bridged).")
    alpha_min: Finite = Field(
        1.0, description="Grid of exponents alpha of (f/f_max) in the dynamic term: alpha_min + alpha_step*i, i < alpha_count.")
    alpha_step: Positive = 0.25
    alpha_count: Count = Field(
        19, description="... up to 5.5: the measured A100 clock sweeps give 4.4-4.85 (models/clock_exponent.py), above f^3.")
    clock_sweep_files: Annotated[Names, RelativeToFile(separator="|")] = Field(
        (), description="Measured SM-clock sweeps (Perseus stage profiles, or a clock x limit grid) per GPU model, as\n"
                        "\"PATTERN|PATH\" (PATTERN a word of the NVML name, e.g. A100): a model whose readings do not vary the\n"
                        "clock takes its exponent alpha from them (fct_power_model.dyn_freq_exponent_source names the file).")
    activity_exponent_min: Positive = Field(
        0.2, description="Without clock readings alpha is not identifiable; utilisation saturates instead (any kernel\n"
                         "raises the clocks), so the dynamic term is act^gamma on this grid: gamma_min + step*i, i < count.")
    activity_exponent_step: Positive = 0.1
    activity_exponent_count: Count = 14
    activity_hold_grid_s: NonNegativeList = Field(
        (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0),
        description="... and, still without clocks, the dynamic power decays with this time constant (s; 0 = none)\n"
                    "after activity stops (P-state hold and the power sensor's averaging): grid of candidates.")
    job_max_days: NonNegativeInt = Field(
        JOB_MAX_DAYS, description="A job running on a day is looked for among the jobs started up to this many days before it\n"
                                  "(the lake's jobs are partitioned by start date): the efficiency step and the accounts\n"
                                  "apply the same bound, so a job started earlier is left out of both (its GPU-hours go to\n"
                                  "the GPU's other jobs or the unallocated line). 0: every partition, read again each day.")
    cross_model_job_profiles: Names = Field(
        (), description="Job-id prefixes of workloads that run on several GPU models: their runs are paired to check\n"
                        "the cross-model job-energy prediction (fct_job_energy_prediction).")


@section
class RecommendSettings:
    """Choosing power limits and clocks per workload class."""

    max_slowdown_latency_pct: NonNegative = Field(
        2.0, description="The slowdown a setting may cost each workload class, %. The daily recommendations leave\n"
                         "latency-sensitive GPUs at their default limit whatever this says; it bounds that class in the\n"
                         "power interval (fct_power_interval_daily) and `joulehouse caps` only.")
    max_slowdown_throughput_pct: NonNegative = 10.0
    max_slowdown_background_pct: NonNegative = 25.0
    value_of_time_usd_per_gpu_hour: NonNegative = Field(
        0.0, description="USD a slowdown of throughput work costs per GPU-hour it adds, beyond its energy: 0 means such work\n"
                         "is valued by finishing within max_slowdown_throughput_pct (the bound is the constraint). Set it\n"
                         "(e.g. the GPU-hour's rental price) when a slower job really costs that: a saturated queue, a deadline.")
    do_not_touch: Names = Field((), description="GPU UUIDs or hosts that keep their settings whatever the model says.")
    limit_step_w: Positive = Field(25.0, description="Candidate caps step down from the default limit by this much, W.")
    min_limit_share_of_default: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5, description="The lowest cap recommended, as a share of the device's default limit (TDP): the cap model's\n"
                         "P_limit = gamma * TDP with gamma >= 0.5 (ARCHITECTURE.md). Below it a cap trades large slowdowns\n"
                         "for the last few percent of energy, and the model is extrapolating far from the power it was fitted on.")
    holdout_share: Annotated[float, Field(ge=0, lt=1)] = Field(
        0.25, description="Share of each GPU model's eligible GPUs (stable choice by UUID) left at the default as controls, so\n"
                          "the next days can measure what the settings saved against like GPUs; 0 applies everything.")
    host_overhead_w_per_gpu: NonNegative = Field(
        0.0, description="What a server draws beyond its GPUs (CPUs, memory, fans, PSU losses), W per GPU, where its BMC\n"
                         "does not say (fct_node_reconciliation_hourly measures it where it does): a capped job runs\n"
                         "longer and the server draws that for longer too, so it counts in the energy-to-solution.")


@section
class SensitivitySettings:
    """The joint energy-efficiency sensitivity S = dPUE/dE + w1 d(1-util)/dE + w2 dBW_util/dE (models.joint_sensitivity)."""

    weight_utilization: Annotated[float, Field(ge=0, le=1)] = Field(
        0.5, description="w1, the weight of the idle share's part of S. The two weights are normalised to sum to 1\n"
                         "(each divided by their sum), and the row states the normalised ones.")
    weight_network_bandwidth: Annotated[float, Field(ge=0, le=1)] = Field(
        0.5, description="w2, the weight of the network bandwidth occupancy's part of S (normalised with w1).")
    window_hours: Annotated[int, Field(ge=2, le=24)] = Field(
        6, description="Length of the sliding window of the hourly estimate (fct_sensitivity_hourly), hours.")


@section
class PlacementSettings:
    """Consolidation and placement advice (models.placement, reports.export.placement_advice)."""

    parking: Literal["power-off", "none"] = Field(
        "power-off", description="What happens to a GPU consolidation frees: 'power-off' (the scheduler drains it from the\n"
                                 "placement-advice file and the node powers it down: its idle draw is saved) or 'none' (it idles\n"
                                 "on at the same draw: consolidation then counts no saving and says so).")
    deferrable_window_hours: Annotated[int, Field(ge=1, le=24)] = Field(
        6, description="Hours of the next day the placement advice lists per site as the cheapest and the cleanest for deferrable work.")

