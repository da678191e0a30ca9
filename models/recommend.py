"""Recommended power limit (or locked clock range) per GPU for one day.

For each GPU seen on `day`: its workload class is the class of the jobs it ran longest that day
(jobs relation), or, without jobs, 'throughput' when it was busy (activity > 5%) at least half of
the day's samples and 'background' otherwise. Latency-sensitive GPUs keep their clocks (default
limit). For the others, each candidate limit from the device default (the GPU's own, kept from
before the agent's caps: models.device_limits) down to its minimum or
`min_limit_share_of_default` of the default, whichever is higher (in `limit_step_w` steps; never
above the default), and each locked SM clock ceiling, is scored with
the fitted power model and the performance-under-cap model (models.caps).

The objective, and why. The class's slowdown bound is the constraint (throughput 10%, background
25%): throughput work's value is that it completes within that bound, so inside it the setting
that does the same work for the least money wins. The money is energy-to-solution:
    cost = energy_per_work_kwh x (price x PUE + grid gCO2e/kWh x PUE x carbon price / 1e6)
         + value_of_time x busy_hours x slowdown     (throughput only; background has no deadline)
         + demand charge / (days per month) x PUE x the power of the heaviest tenth (peak kW)
with energy per work = P(s) x T(s) over the busy hours, not power: a cap that lengthens a job
pays only if the watts fall faster than the time grows. Dynamic power goes as f^3 (voltage
follows frequency), so the energy-per-work optimum of compute-bound work, where
E(s) ~ P_other / s + P_dyn x s^2, lies near s = (P_other / 2 P_dyn)^(1/3), ~0.5-0.6 of f_max on
the fleet's GPUs: far below the default limit, so the bound, not the optimum, sets the cap, and
a modest cap costs a small clock drop (a 700 W H100 at 550 W runs ~8% slower). Memory-bound
work barely slows under a cap and saves more. `value_of_time_usd_per_gpu_hour` defaults to 0: a
GPU-hour's rental price (~2 USD) charged on every slowdown would outweigh any energy saving
(a 700 W GPU's energy costs ~0.09 USD/h), which is only right when a slower job really costs that
money (a saturated queue, rented GPUs, a deadline): set it then, and throughput GPUs keep
higher limits. Without a value of time or a demand charge the cost is energy times one positive
price, so neither the price nor the carbon price moves the choice (the least energy is the
cheapest and the cleanest setting at once). The demand charge bills peak kW, not kWh: with it, a
dearer kWh (price or carbon) pulls the choice toward the least energy, a dearer kW toward lower
peaks, where the two part (memory-bound work, the server's overhead over a longer run). The
heaviest tenth's power is what a GPU adds to the site's peak if its heavy phases meet the site's
peak hour: an upper bound on the saving (the accounts bill the coincident peak), so the rate is
passed only where the site pays one (recommend_day's demand_charge_usd_per_kw_month, default 0), and
not for a GPU the inventory places at no site beside known ones: the cost accounts bill it no demand
charge (no utility meters 'unknown'), so a cap chosen for that peak would save nothing they show.

A cap bites only in a GPU's heavy phases, so each setting is scored on the day's mix of activity
(the mean activity of each tenth of the busy samples, from a histogram: within 0.002 of sorting
them; in the activity the model's fit reads, NVML utilisation or SM activity, whichever the day's
stream has; each tenth with its own memory activity, PCIe traffic and temperature, so a memory-bound
phase is not slowed as a compute-bound one), not on the mean: energy and slowdown of the mix, and
the slowdown bound applied to the heavier half of the busy time (the jobs a cap slows most must
stay within it too). Samples whose SM clocks an application locked (clock event reason 0x2; ~30% of jobs on the simulator) are
scored at their locked clock, where a cap above their power saves nothing: scoring them at f_max
predicted savings that never came (+4..+8 points on such GPUs,
tests/models/test_recommend_calibration.py). The bound is judged on the unlocked samples where
there are any.

A power cap is preferred to a clock lock when it binds and saves at least half of what the best
clock lock saves: a cap follows the load (it slows only the heavy phases) and is what the
device's power management prescribes. When the GPU never draws the chosen cap (decode-style loads, light data
preparation), the cap would do nothing: a locked SM clock range is suggested instead (the
cheapest clock within the slowdown bound as the maximum). Skipped, with the reason written: GPUs
in do_not_touch (by UUID or host), GPU models without a fit or whose fit failed its gate, busy GPUs
without the activity their model's fit reads, or without a memory, PCIe or temperature reading that
the fit weighs and no GPU of their model read that day; where others did, their busy mean of the
day stands in and the reason says so (models.recommend_inputs.with_stand_ins).

expected_saving_pct is the saving in energy per unit of work (energy-to-solution) on the busy
hours, expected_slowdown_pct the run-time increase of the mean busy profile, both from the run the
GPU makes without a setting: at its default limit, which already binds where the model's unlimited
power is higher (a lock, too, runs under that limit). Slowdown bounds are judged from that run.
"""

from __future__ import annotations

import datetime as dt
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa

from joulehouse.models.settings import RecommendSettings
from joulehouse.models.caps import MIN_CLOCK_RATIO
from joulehouse.models.power import coefficients_of
from joulehouse.warehouse.sqlio import relation_exists, replace_day_rows
from joulehouse.models.cap_scoring import MixSetting, activity_bins, relative_to, score_clocks, score_limits
from joulehouse.models.device_limits import (DEVICE_LIMITS_W, FROM_READINGS, device_limits_w,  # noqa: F401 (its callers)
                                             earlier_default_limits_w, limit_seen_w, reported_limits_w,
                                             stray_limit_note)
from joulehouse.models.sql import load_sql
from joulehouse.models.recommend_controls import hold_out_controls
from joulehouse.models.recommend_inputs import (PROFILE_MEASURES, MissingMeasure, gpu_day_profiles,
                                                gpu_energy_prices, gpu_profile, gpu_workload_classes, latest_fits,
                                                with_stand_ins)


# Hours whose BMC and GPU energies both covered this much of the hour measure the server's overhead.
HOST_OVERHEAD_MIN_COVERAGE = 0.9
DEFAULT_PRICE_USD_PER_KWH = 0.10
DEFAULT_CARBON_GCO2E_PER_KWH = 0.0
CLASSES = ("latency-sensitive", "throughput", "background")
# Share of the value of GPU time charged for a slowdown, per class: background work has no
# deadline, so within its slowdown bound its time is free and the cheapest energy wins.
VALUE_OF_TIME_WEIGHT = {"latency-sensitive": 1.0, "throughput": 1.0, "background": 0.0}
# A demand charge is billed per kW of the month's peak: a day's share of it.
DAYS_PER_MONTH = 365.25 / 12
# A binding cap wins over a clock lock when it saves at least this share of the lock's saving.
CAP_PREFERENCE = 0.5
# Readings of the day below which a GPU's profile (busy hours, activity) says nothing: no setting.
MIN_PROFILE_READINGS = 30
AT_NO_SITE_NOTE = ("no demand charge priced: the inventory places this GPU at no site, and the cost accounts bill "
                   "'unknown' none (no utility meters it)")


def slowdown_bound_pct(workload_class: str, settings: RecommendSettings) -> float:
    return {"latency-sensitive": settings.max_slowdown_latency_pct,
            "throughput": settings.max_slowdown_throughput_pct,
            "background": settings.max_slowdown_background_pct}[workload_class]


def recommend_gpu(row: dict, workload_class: str, fit: dict | None, settings: RecommendSettings, *,
                  price_usd_per_kwh: float, carbon_gco2e_per_kwh: float, carbon_price_usd_per_tco2e: float,
                  pue: float, p95_power_w: Callable[[], float | None] | None = None,
                  host_overhead_w: float = 0.0, demand_charge_usd_per_kw_month: float = 0.0) -> dict:
    """One GPU's recommendation row (see fct_recommendation.sql for the columns). The GPU's 95th
    percentile of power (W) is row["p95_power_w"], or where the row lacks it `p95_power_w()`,
    called only when a clock lock's reason needs it."""
    try:
        default_w, min_w, max_w, note = device_limits_w(row["gpu_model"], row["max_power_limit_w"],
                                                        row.get("limit_source", FROM_READINGS), reported_limits_w(row))
        note = "; ".join(n for n in (note, stray_limit_note(row)) if n) or None
    except ValueError as exc:
        # A GPU whose limits nobody knows (an imported log without power.limit) gets no setting,
        # and the row says why rather than failing the whole day.
        return {"host": row["host"], "gpu_uuid": row["gpu_uuid"], "gpu_model": row["gpu_model"],
                "workload_class": workload_class, "power_limit_w": None, "default_limit_w": None,
                "locked_sm_clock_min_mhz": None, "locked_sm_clock_max_mhz": None, "expected_saving_pct": None,
                "expected_energy_saving_kwh_per_day": None, "expected_slowdown_pct": None,
                "reason": f"{exc}: not recommended"}
    out = {"host": row["host"], "gpu_uuid": row["gpu_uuid"], "gpu_model": row["gpu_model"],
           "workload_class": workload_class, "power_limit_w": None, "default_limit_w": default_w,
           "locked_sm_clock_min_mhz": None, "locked_sm_clock_max_mhz": None, "expected_saving_pct": None,
           "expected_energy_saving_kwh_per_day": None, "expected_slowdown_pct": None}
    if row["gpu_uuid"] in settings.do_not_touch or row["host"] in settings.do_not_touch:
        return out | {"reason": "in do_not_touch: left as it is"}
    coef = coefficients_of(fit) if fit else None
    if coef is None:
        return out | {"reason": f"no power model for {row['gpu_model']}: not recommended"}
    if coef.dyn_freq_exponent is None:
        # the caps model then takes power as proportional to the clock (alpha 1): a cap's slowdown
        # is overstated (about 4x where alpha is 4.4), so fewer caps pass their bound; said, not hidden
        alpha_note = (f"how {row['gpu_model']}'s power follows its clock was not measured (no clock varied "
                      "under load, no clock sweep of the model configured): taken as proportional, which "
                      "overstates a cap's slowdown")
        note = alpha_note if note is None else f"{note}; {alpha_note}"
    if not fit["passed_gate"]:
        return out | {"reason": f"power model of {row['gpu_model']} failed its gate ({fit['gate_reason']}): not recommended"}
    if workload_class == "latency-sensitive":
        return out | {"power_limit_w": default_w, "expected_saving_pct": 0.0, "expected_energy_saving_kwh_per_day": 0.0,
                      "expected_slowdown_pct": 0.0, "reason": "latency-sensitive: keep clocks (default limit)"}
    n_readings = row.get("n_samples")
    if n_readings is not None and n_readings < MIN_PROFILE_READINGS:
        # two readings 10 s apart made a 225 W cap with 17% saving, and one a GPU "idle all day"
        return out | {"reason": f"{n_readings} reading(s) of the day, fewer than the {MIN_PROFILE_READINGS} a profile "
                                "needs to say how it runs: not recommended"}
    # No activity reading is no evidence of idleness: such a GPU gets no setting, and says why.
    measure = PROFILE_MEASURES[fit["feature_set"]][0]
    if row["busy_hours"] is None:
        return out | {"reason": "no activity reading all day: how busy it was is unknown; not recommended"}
    busy_hours = float(row["busy_hours"])
    if busy_hours > 0 and row.get(measure) is None:
        return out | {"reason": f"busy {busy_hours:.1f} h, but without the {measure.removesuffix('_ratio')} readings "
                                f"the {row['gpu_model']} power model reads: not recommended"}
    idle = {"power_limit_w": default_w, "expected_saving_pct": 0.0, "expected_energy_saving_kwh_per_day": 0.0,
            "expected_slowdown_pct": 0.0, "reason": "idle all day: nothing for a cap to save"}
    if busy_hours <= 0:
        return out | idle
    try:
        row, stand_ins = with_stand_ins(row, fit["feature_set"], coef)
    except MissingMeasure as exc:
        return out | {"reason": f"busy {busy_hours:.1f} h, but {exc}: not recommended"}
    note = "; ".join([*stand_ins, *([note] if note else [])]) or None
    profile = gpu_profile(row, fit["feature_set"])
    if profile.activity_ratio <= 0:
        return out | idle
    bound = slowdown_bound_pct(workload_class, settings)
    usd_per_kwh = price_usd_per_kwh * pue + carbon_gco2e_per_kwh * pue * carbon_price_usd_per_tco2e / 1e6
    bins = activity_bins(row, profile, coef.f_max_mhz)
    time_weight = VALUE_OF_TIME_WEIGHT[workload_class]
    demand_usd_per_kw_day = demand_charge_usd_per_kw_month / DAYS_PER_MONTH

    def cost_usd(m: MixSetting) -> float:
        """The busy hours' work at this setting: energy-to-solution at the site's price (the GPU's
        power and its share of the server's, for as long as the work now takes), plus time, plus
        the day's share of the demand charge on what its heaviest phase adds to the site's peak."""
        energy_kwh = busy_hours * (m.power_w + host_overhead_w) * (1 + m.slowdown_pct / 100) / 1000
        return (energy_kwh * usd_per_kwh
                + time_weight * settings.value_of_time_usd_per_gpu_hour * busy_hours * m.slowdown_pct / 100
                + demand_usd_per_kw_day * pue * m.peak_power_w / 1000)

    # Every candidate at once (models.cap_scoring: the caps model over settings x bins arrays), each
    # counted from the run without a setting: the default limit in force, which binds already where
    # the unlimited run would draw more. Counted from the unlimited run, an A100 drawing ~540 W
    # unlimited under its 400 W default was promised 13.7% for a cap that saves ~3%.
    limit_in_force_w = min(default_w, max_w)
    clock_ratios = np.linspace(1.0, MIN_CLOCK_RATIO, 29)
    unlimited_default, *clocks = score_clocks(coef, bins, np.concatenate([[1.0], clock_ratios]), limit_w=limit_in_force_w)
    default_run = relative_to(unlimited_default, unlimited_default)
    default_run_w = default_run.power_w
    clocks = [relative_to(c, unlimited_default) for c in clocks]
    floor_w = max(min_w, settings.min_limit_share_of_default * default_w)
    candidates = np.arange(limit_in_force_w, floor_w - 1e-9, -settings.limit_step_w)
    caps = [(float(w), relative_to(m, unlimited_default)) for w, m in zip(candidates, score_limits(coef, bins, candidates))]
    caps = [c for c in caps if c[1].heavy_slowdown_pct <= bound + 1e-9] or caps[:1]  # the default always qualifies
    cap_w, best_cap = min(caps, key=lambda c: (cost_usd(c[1]), -c[0]))
    clocks = [(float(s), c) for s, c in zip(clock_ratios, clocks) if c.heavy_slowdown_pct <= bound + 1e-9]
    s_best, best_clock = min(clocks, key=lambda c: (cost_usd(c[1]), -c[0]))
    clock_power_w, clock_slowdown = best_clock.power_w, best_clock.slowdown_pct
    head = f"{workload_class} ({profile.bottleneck}, busy {busy_hours:.1f} h)"

    def saving(power_w: float, slowdown_pct: float) -> dict:
        """The GPU's own saving (the outcome measures the GPU's energy)."""
        ratio = 1 - power_w * (1 + slowdown_pct / 100) / default_run_w
        return {"expected_slowdown_pct": slowdown_pct, "expected_saving_pct": 100 * ratio,
                "expected_energy_saving_kwh_per_day": busy_hours * default_run_w * ratio / 1000}

    def reason_note(power_w: float, slowdown_pct: float) -> str:
        # The choice counts the server's overhead over the longer run; the saving columns are the
        # GPU's. Said as "counted over the longer run", a reader took the columns for the wall's:
        # 9.6% on the GPU is 1.7% at the wall beside 300 W of overhead per GPU.
        wall = ""
        if host_overhead_w > 0 and slowdown_pct > 0:
            before_w, after_w = default_run_w + host_overhead_w, (power_w + host_overhead_w) * (1 + slowdown_pct / 100)
            wall = (f"; the server's {host_overhead_w:.0f} W per GPU stays on for the {slowdown_pct:.1f}% longer run: "
                    f"at the wall it saves {100 * (1 - after_w / before_w):.1f}% "
                    f"({busy_hours * (before_w - after_w) / 1000:.3f} kWh/day)")
        return wall + (f"; {note}" if note else "")

    cap_cost, clock_cost, default_cost = cost_usd(best_cap), cost_usd(best_clock), cost_usd(default_run)
    # A cap follows the load (it only bites when power is high) and is what power management
    # prescribes; a locked clock slows every phase alike. Prefer a binding cap that saves at least
    # CAP_PREFERENCE of what the clock lock saves.
    gain_cap, gain_clock = default_cost - cap_cost, default_cost - clock_cost
    if best_cap.binds and gain_cap > 0 and gain_cap >= CAP_PREFERENCE * gain_clock:
        return out | {"power_limit_w": cap_w, **saving(best_cap.power_w, best_cap.slowdown_pct),
                      "reason": f"{head}: cheapest limit within {bound:g}% slowdown"
                                f"{reason_note(best_cap.power_w, best_cap.slowdown_pct)}"}
    if s_best < 1.0 and coef.f_max_mhz is not None and clock_cost < default_cost:
        peak_w = row["p95_power_w"] if "p95_power_w" in row or p95_power_w is None else p95_power_w()
        measured_peak = float(peak_w or default_run_w)
        if measured_peak <= floor_w + settings.limit_step_w:
            why = f"draws {measured_peak:.0f} W at p95, never reaching a cap it allows ({floor_w:.0f} W lowest): a cap does nothing"
        else:
            why = "a locked clock range saves more than any cap in its limit steps"
        return out | {"power_limit_w": default_w, **saving(clock_power_w, clock_slowdown),
                      "locked_sm_clock_min_mhz": round(MIN_CLOCK_RATIO * coef.f_max_mhz),
                      "locked_sm_clock_max_mhz": round(s_best * coef.f_max_mhz),
                      "reason": f"{head}: {why}; lock SM clocks at or below {s_best * coef.f_max_mhz:.0f} MHz"
                                f"{reason_note(clock_power_w, clock_slowdown)}"}
    why_not = ("the time it costs at {:g} USD/GPU-hour outweighs the energy it saves".format(
        settings.value_of_time_usd_per_gpu_hour) if time_weight * settings.value_of_time_usd_per_gpu_hour > 0
        else "none lowers the energy per unit of work")
    return out | {"power_limit_w": default_w, **saving(default_run_w, 0.0),
                  "reason": f"{head}: no cap or clock within {bound:g}% slowdown pays ({why_not}){reason_note(default_run_w, 0.0)}"}


def workload_class_of(profile: dict, classes: dict[str, str]) -> str:
    """The GPU's class from its jobs, or without jobs from how busy it was (module docstring)."""
    workload_class = classes.get(profile["gpu_uuid"]) or ("throughput" if (profile["busy_ratio"] or 0) >= 0.5 else "background")
    if workload_class not in CLASSES:
        raise ValueError(f"GPU {profile['gpu_uuid']}: workload_class {workload_class!r} is not one of {CLASSES}")
    return workload_class


def recommend_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: RecommendSettings, *,
                  price_usd_per_kwh: float | None = None, carbon_gco2e_per_kwh: float | None = None,
                  carbon_price_usd_per_tco2e: float = 0.0, pue: float | None = None,
                  demand_charge_usd_per_kw_month: float = 0.0,
                  fallback_price_usd_per_kwh: float = DEFAULT_PRICE_USD_PER_KWH,
                  fallback_carbon_gco2e_per_kwh: float = DEFAULT_CARBON_GCO2E_PER_KWH, fallback_pue: float = 1.3,
                  samples_relation: str = "stg_gpu_samples") -> int:
    """Write `day`'s rows of fct_recommendation (delete-then-insert); returns the rows written.

    Each GPU's energy is priced at the hours it drew it: the price, grid intensity and PUE of
    rpt_context_hourly (what the cost and carbon accounts charged), weighted by its energy per hour,
    and carbon at `carbon_price_usd_per_tco2e` ([carbon] settings); the site's demand charge
    (`demand_charge_usd_per_kw_month`, [tco]) prices what each GPU's heaviest phase adds to the peak, except
    for a GPU at no site (recommend_gpu_energy_prices.sql's at_no_site: its rate is 0, said in its reason). A value passed here
    (price_usd_per_kwh, carbon_gco2e_per_kwh, pue) replaces the hourly one for every GPU (a what-if);
    a GPU without hourly context gets the fallback_* values (the settings' flat price, default grid
    intensity and default PUE, as the accounts use them). The row records what it was priced at."""
    hourly = gpu_energy_prices(con, day)

    def priced(gpu_uuid: str) -> tuple[float, float, float, str]:
        h = hourly.get(gpu_uuid, {})
        values = [(given if given is not None else h.get(name), fallback) for given, name, fallback in (
            (price_usd_per_kwh, "price_usd_per_kwh", fallback_price_usd_per_kwh),
            (carbon_gco2e_per_kwh, "grid_gco2e_per_kwh", fallback_carbon_gco2e_per_kwh),
            (pue, "pue", fallback_pue))]
        basis = ("given" if all(g is not None for g in (price_usd_per_kwh, carbon_gco2e_per_kwh, pue))
                 else "hourly context" if h and all(v is not None for v, _ in values) else
                 "hourly context, defaults where it had none" if h else "defaults (no hourly context)")
        return (*(float(v if v is not None else fallback) for v, fallback in values), basis)

    fits = latest_fits(con, day)
    profiles = gpu_day_profiles(con, day, samples_relation, fits)
    classes, job_groups = gpu_workload_classes(con, day)
    earlier = earlier_default_limits_w(con, day)
    overhead = ({h: w for h, w, _ in con.execute(load_sql("recommend_host_overhead"),
                                                 {"day": day, "min_coverage": HOST_OVERHEAD_MIN_COVERAGE}).fetchall()}
                if relation_exists(con, "fct_node_reconciliation_hourly") else {})
    # each GPU's own limit, since boards of one NVML name may differ (a model-wide 500 W would exceed
    # a 400 W board's maximum), and from before a cap where the day's readings show only the cap
    profiles = [p | dict(zip(("max_power_limit_w", "limit_source"),
                             limit_seen_w(p["gpu_uuid"], p["gpu_model"], p["max_power_limit_w"], earlier)))
                for p in profiles]
    peaks: dict[tuple[str, str], float | None] = {}

    def p95_power_w(host: str, gpu_uuid: str) -> float | None:
        # Every GPU's at once, the first time a reason needs one (clock locks only).
        if not peaks:
            peaks.update({(h, u): w for h, u, w in con.execute(load_sql("recommend_gpu_peak_power"), {"day": day}).fetchall()})
        return peaks.get((host, gpu_uuid))

    rows = []
    for p in profiles:
        workload_class = workload_class_of(p, classes)
        price, intensity, gpu_pue, basis = priced(p["gpu_uuid"])
        at_no_site = demand_charge_usd_per_kw_month > 0 and hourly.get(p["gpu_uuid"], {}).get("at_no_site")
        demand = 0.0 if at_no_site else demand_charge_usd_per_kw_month
        prices = {"price_usd_per_kwh": price, "grid_gco2e_per_kwh": intensity, "pue": gpu_pue,
                  "carbon_price_usd_per_tco2e": carbon_price_usd_per_tco2e, "energy_price_basis": basis,
                  "demand_charge_usd_per_kw_month": demand}
        row = {"day": day} | prices | recommend_gpu(p, workload_class, fits.get(p["gpu_model"]), settings,
                                            price_usd_per_kwh=price, carbon_gco2e_per_kwh=intensity,
                                            carbon_price_usd_per_tco2e=carbon_price_usd_per_tco2e, pue=gpu_pue,
                                            p95_power_w=lambda p=p: p95_power_w(p["host"], p["gpu_uuid"]),
                                            host_overhead_w=overhead.get(p["host"], settings.host_overhead_w_per_gpu),
                                            demand_charge_usd_per_kw_month=demand)
        if at_no_site:
            row["reason"] = "; ".join(filter(None, [row.get("reason"), AT_NO_SITE_NOTE]))
        rows.append(row)
    rows = hold_out_controls(rows, settings.holdout_share, job_groups)
    con.execute(load_sql("fct_recommendation"))
    for column, kind in (("price_usd_per_kwh", "DOUBLE"), ("grid_gco2e_per_kwh", "DOUBLE"), ("pue", "DOUBLE"),
                         ("carbon_price_usd_per_tco2e", "DOUBLE"), ("energy_price_basis", "VARCHAR"),
                         ("demand_charge_usd_per_kw_month", "DOUBLE")):
        con.execute(f"ALTER TABLE fct_recommendation ADD COLUMN IF NOT EXISTS {column} {kind}")  # tables from before
    # One INSERT of all rows (an Arrow table, columns by name): one statement per row cost ~1 ms each.
    names = list(dict.fromkeys(k for r in rows for k in r))
    new_rows = pa.table({k: [float(v) if isinstance(v, np.floating) else v for v in (r.get(k) for r in rows)]
                         for k in names}) if rows else None
    replace_day_rows(con, day, {"fct_recommendation": new_rows if new_rows is not None else []})
    return len(rows)
