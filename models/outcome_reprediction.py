"""What the recommender predicts for an applied setting on the work that ran after it took effect.

A recommendation scores a setting on its own day's mix of activity (models.recommend); the outcome
measures the days after. Where the work changed in between, the two figures are of different
workloads: the demo's H200 GPU-13258358 was predicted 11.4% less energy for 1.4% slower at 350 W on
2026-06-11's work (mostly clock-locked compute and memory-bound), ran 15.3 h of unlocked compute on
06-12 and realised 25.9% for 10.9% slower, which is what the simulator's truth gives 06-12's work
(27.4% / 9.4%). The model was right, and the report called it a broken promise.

So each treated GPU's change is scored again with the recommender's own pieces (models.cap_scoring
over models.recommend_inputs' day profile, with its stand-ins, as models.recommend scores it): the
GPU model's fit as of the recommendation that gave the limit (where none did, the latest fit before
the change), each after day's profile, the limit before the change (free clocks) against the limit
after (with the recommendation's SM clock lock, if it set one). The days add up as their work does:
    saving = 1 - sum(busy h x power after x stretch) / sum(busy h x power before)
    slowdown = sum(busy h x stretch) / sum(busy h) - 1
(one day: the recommender's own figures for that day). Savings and slowdowns in %. A day without
busy readings has no work to score; a day with work that cannot be scored (a measure the fit weighs
missing) leaves the GPU without a re-prediction (NULL), and its row says why.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import duckdb
import numpy as np

from joulehouse.models.cap_scoring import activity_bins, relative_to, score_clocks, score_limits
from joulehouse.models.limit_change import Change
from joulehouse.models.outcome_matched import mean_of_all, power_saving, recommendation_of, setting_of
from joulehouse.models.power import coefficients_of
from joulehouse.models.power_store import load_fit
from joulehouse.models.recommend import MIN_PROFILE_READINGS
from joulehouse.models.recommend_inputs import gpu_day_profiles, gpu_profile, with_stand_ins

Profiles = Callable[[dt.date], dict[str, dict]]


def _scored_day(row: dict, fit: dict, limit_before_w: float, limit_after_w: float,
                lock_ratio: float | None) -> np.ndarray | None:
    """[busy h, busy h x power W before, busy h x power W after x stretch, busy h x stretch] of one
    day's profile `row`, the setting scored as models.recommend scores one against the run without
    it; None where the day had no busy work to score. Raises ValueError (MissingMeasure among them)
    where the day's work cannot be scored."""
    busy_hours = row.get("busy_hours")
    if not busy_hours or busy_hours <= 0 or (row.get("n_samples") or 0) < MIN_PROFILE_READINGS:
        return None
    coef = coefficients_of(fit)
    row, _ = with_stand_ins(row, fit["feature_set"], coef)
    profile = gpu_profile(row, fit["feature_set"])
    if profile.activity_ratio <= 0:
        return None
    bins = activity_bins(row, profile, coef.f_max_mhz)
    [before] = score_clocks(coef, bins, np.array([1.0]), limit_w=limit_before_w)
    [after] = (score_clocks(coef, bins, np.array([lock_ratio]), limit_w=limit_after_w) if lock_ratio is not None
               else score_limits(coef, bins, np.array([limit_after_w])))
    stretch = 1 + relative_to(after, before).slowdown_pct / 100
    return busy_hours * np.array([1.0, before.power_w, after.power_w * stretch, stretch])


@dataclass(frozen=True)
class Applied:
    """What a change is re-predicted with: the GPU model's fit (a fct_power_model row, None without
    one) as of `fit_day` (the day recommended on, else the day before the change), and the SM clock
    lock MHz the recommendation set beside the limit (None: none)."""

    fit: dict | None
    fit_day: dt.date
    lock_mhz: float | None


def applied_setting(con: duckdb.DuckDBPyConnection, change: Change) -> Applied:
    """The fit and clock lock of the recommendation that gave `change` its limit (Applied)."""
    recommended = recommendation_of(con, change, change.limit_after_w)
    fit_day = recommended["day"] if recommended else change.effective_day - dt.timedelta(days=1)
    return Applied(load_fit(con, change.gpu_model, fit_day), fit_day,
                   recommended.get("locked_sm_clock_max_mhz") if recommended else None)


def repredict(change: Change, applied: Applied, profiles: Profiles) -> tuple[float | None, float | None, str | None]:
    """(saving %, slowdown %, why there is none) of `change` scored on its after days' own work
    (`profiles(day)`: {gpu_uuid: gpu_day_profiles row}) with `applied`'s fit and clock lock."""
    fit = applied.fit
    coef = coefficients_of(fit) if fit else None
    if coef is None or not fit["passed_gate"]:
        return None, None, f"no power model of {change.gpu_model} that passed its gate as of {applied.fit_day}"
    if applied.lock_mhz is not None and not coef.f_max_mhz:
        return None, None, f"a {applied.lock_mhz:.0f} MHz clock lock, and no maximum clock in the power model"
    lock_ratio = min(1.0, applied.lock_mhz / coef.f_max_mhz) if applied.lock_mhz is not None else None
    totals = np.zeros(4)
    for day in change.after_days:
        row = profiles(day).get(change.gpu_uuid)
        try:
            scored = _scored_day(row, fit, change.limit_before_w, change.limit_after_w, lock_ratio) if row else None
        except ValueError as exc:
            return None, None, f"{day}: {exc}"
        if scored is not None:
            totals += scored
    busy_hours, energy_before, energy_after, hours_after = totals
    if energy_before <= 0:
        return None, None, "no busy readings on the days after it"
    return 100 * (1 - energy_after / energy_before), 100 * (hours_after / busy_hours - 1), None


def _day_profiles(con: duckdb.DuckDBPyConnection, applied: dict[Change, Applied]) -> Profiles:
    """profiles(day): the day's gpu_day_profiles by GPU, each day computed once (the first time
    asked), its activity in the measure of the treated models' fits (where two of a model's changes
    were fitted on different measures, gpu_profile refuses the GPU whose fit's measure is not the day's)."""
    fits: dict[dt.date, dict[str, dict]] = defaultdict(dict)
    for c, a in applied.items():
        for day in c.after_days:
            if a.fit is not None:
                fits[day].setdefault(c.gpu_model, a.fit)
    computed: dict[dt.date, dict[str, dict]] = {}

    def profiles(day: dt.date) -> dict[str, dict]:
        if day not in computed:
            computed[day] = {p["gpu_uuid"]: p for p in gpu_day_profiles(con, day, fits=fits.get(day, {}))}
        return computed[day]
    return profiles


def add_repredictions(con: duckdb.DuckDBPyConnection, rows: list[dict], changes: list[Change]) -> None:
    """Put predicted_on_mix_saving_pct and predicted_on_mix_slowdown_pct on each GPU row of `rows`
    (its change re-predicted on its after days' work, on the row's basis as predicted_saving_pct is:
    per active hour the power saving it implies) and on each pooled row (the mean over the GPUs its
    realised saving is of, NULL unless each has one), in place; a GPU row with a realised saving and
    no re-prediction says why in its note."""
    of_gpu = {(c.gpu_uuid, c.effective_day): c for c in changes}
    treated = [of_gpu[(r["gpu_uuid"], r["effective_day"])] for r in rows if r["scope"] == "gpu"]
    applied = {c: applied_setting(con, c) for c in treated}
    profiles = _day_profiles(con, applied)
    pooled: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["scope"] != "gpu":
            continue
        change = of_gpu[(r["gpu_uuid"], r["effective_day"])]
        saving, slowdown, why = repredict(change, applied[change], profiles)
        if r.get("outcome_unit") == "active_hour":
            saving = power_saving(saving, slowdown)
        r["predicted_on_mix_saving_pct"], r["predicted_on_mix_slowdown_pct"] = saving, slowdown
        if why and r.get("realised_saving_pct") is not None:
            r["note"] = "; ".join(n for n in (r.get("note"), f"not re-predicted on the work after the change: {why}") if n)
        if r.get("realised_saving_pct") is not None:
            pooled[setting_of(r)].append(r)
    for r in rows:
        if r["scope"] == "model_setting":
            measured = pooled.get(setting_of(r), [])
            r["predicted_on_mix_saving_pct"] = mean_of_all([g["predicted_on_mix_saving_pct"] for g in measured])
            r["predicted_on_mix_slowdown_pct"] = mean_of_all([g["predicted_on_mix_slowdown_pct"] for g in measured])
