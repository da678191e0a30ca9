"""The day's warehouse relations as the HTML report reads them: each one a frame, or None and the
reason it is missing (relation absent, or no rows for the day).

Every relation is optional: a site without BMC access, facility meters or a job scheduler, or a
day whose pipeline skipped a step, still gets a report that says what it could not compute.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl

from joulehouse.reports.accounts.attribution import sum_known
from joulehouse.reports.export.selection import export_verdicts, held_back_models, settings_to_apply
from joulehouse.reports.page.outcome_checks import gpu_outcomes
from joulehouse.warehouse.sqlio import SqlFiles
from joulehouse.reports.warehouse_tables import count_day_by, read_day, relation_columns

SQL = SqlFiles("joulehouse.reports.page", "sql")
# The columns each of the page's own queries (sql/) reads, per relation: a warehouse an older
# version wrote (or a site's partial one) without them gets no answer, not a failed report.
QUERY_INPUTS = {
    "applied_setting_bounds": {
        "fct_recommendation_outcome": {"day", "scope", "gpu_uuid", "effective_day", "power_limit_w_after"},
        "fct_recommendation": {"day", "gpu_uuid", "power_limit_w", "workload_class"},
        "fct_power_interval": {"day", "workload_class", "max_slowdown_pct"}},
    "demand_peak_set_on": {
        "rpt_demand_peak_daily": {"day", "site", "billing_month", "peak_kw", "month_peak_before_kw", "charged_kw",
                                  "demand_charge_usd"}},
}


def _answerable(con, query: str) -> bool:
    return all(needed <= set(relation_columns(con, name)) for name, needed in QUERY_INPUTS[query].items())

# Where a relation's input comes from, so a missing one names what the site lacks.
NEEDS = {
    "fct_node_reconciliation_hourly": "the node_samples dataset (IPMI/BMC readings)",
    "fct_pue_hourly": "the facility_samples dataset (site meters)",
    "fct_job_efficiency": "the jobs dataset with work counters (requests, tokens, samples, FLOPs)",
    "fct_efficiency_setting_daily": "the jobs dataset with work counters (requests, tokens, samples, FLOPs)",
    "fct_efficiency_precision_daily": "the jobs dataset with work counters (models.efficiency_precision)",
    "fct_flops_per_watt_daily": "the jobs dataset with flops_total (models.efficiency_precision)",
    "rpt_compute_cost_daily": "jobs with flops_total and the cost accounts (reports.accounts.compute_cost)",
    "rpt_carbon_daily": "the carbon accounts step (grid intensity file or default)",
    "rpt_tco_daily": "the cost accounts step (price file or default)",
    "fct_recommendation_outcome": "the outcome step (models.outcome) over the days after a setting took effect",
    "fct_recommendation_extra": "the consolidation and placement step (models.placement)",
    "fct_sensitivity_daily": "the sensitivities step (models.sensitivity)",
    "fct_sensitivity_hourly": "the sensitivities step with link occupancy (models.joint_sensitivity)",
    "fct_power_interval": "the power-interval step (models.power_interval)",
    "fct_job_energy_prediction": "jobs run on two GPU models with the same profile",
}


def applied_setting_bounds(con, day: dt.date) -> pl.DataFrame | None:
    """(gpu_uuid, effective_day, recommended_day, workload_class, max_slowdown_pct) of each GPU the
    day's outcome measures (sql/applied_setting_bounds.sql), or None where a relation it reads is missing."""
    if not _answerable(con, "applied_setting_bounds"):
        return None
    return con.sql(SQL.text("applied_setting_bounds"), params={"day": day}).pl()


def demand_peak_set_on(con, day: dt.date) -> list[dict]:
    """Per site of `day`: whether its month was billed a demand charge, and where the day's was 0,
    the earlier day that set the month's peak (sql/demand_peak_set_on.sql); [] without the relation."""
    if not _answerable(con, "demand_peak_set_on"):
        return []
    return SQL.records(con, "demand_peak_set_on", {"day": day})


def as_frame(value: Any) -> pl.DataFrame | None:
    if value is None:
        return None
    return value if isinstance(value, pl.DataFrame) else pl.DataFrame(value)


def usable(frame: pl.DataFrame | None, why: str | None, name: str, day: dt.date) -> tuple[pl.DataFrame | None, str]:
    """The frame if it has rows, else None and the reason (missing relation or empty day)."""
    if frame is None:
        reason = why or f"relation {name} does not exist"
        return None, reason + (f"; it needs {NEEDS[name]}" if name in NEEDS else "")
    if frame.height == 0:
        return None, f"{name} has no rows for {day}"
    return frame, ""


def has(frame: pl.DataFrame | None, *cols: str) -> bool:
    """True when `frame` exists and each of `cols` is present with at least one non-NULL value."""
    return frame is not None and all(c in frame.columns and frame[c].null_count() < frame.height for c in cols)


def total(frame: pl.DataFrame | None, col: str) -> float | None:
    """Sum of `col`, or None when the frame or column is missing or all NULL."""
    return float(frame[col].sum()) if has(frame, col) else None


# Unicode direction controls: a GPU model named with U+202E turned the rest of its sentence around,
# numbers too ("saves about 3.0 kWh" read "0.3"). Nothing the lake names needs them.
BIDI_CONTROLS = "[\u200e\u200f\u202a-\u202e\u2066-\u2069]"


def saving_basis(outcome: pl.DataFrame) -> str:
    """What the outcome rows' saving percentages are of (fct_recommendation_outcome.outcome_unit): a
    setting measured where no job reported work is measured per active hour, a saving of power while
    busy, not of energy per unit of work; the report called both the latter."""
    units = set(outcome["outcome_unit"].drop_nulls().to_list()) if "outcome_unit" in outcome.columns else set()
    if units == {"active_hour"}:
        return "power while busy"
    if "active_hour" in units:
        return "energy per unit of work (power while busy where no job reported work)"
    return "energy per unit of work"


def to_utc(frame: pl.DataFrame) -> pl.DataFrame:
    """Zoned timestamp columns shown in UTC whatever the session time zone was, and text without
    direction controls."""
    return frame.with_columns([pl.col(c).dt.convert_time_zone("UTC") for c, t in frame.schema.items()
                               if isinstance(t, pl.Datetime) and t.time_zone]
                              + [pl.col(c).str.replace_all(BIDI_CONTROLS, "") for c, t in frame.schema.items()
                                 if t == pl.String])


class ReportData:
    """The day's relations, read once. Attribute `x` holds the frame (None if unusable) and
    `x_why` the reason it is unusable; `to_apply` the settings the export applies that change a
    GPU (with saving_kwh_per_day), `exported` every recommendation with what the export does with
    it (export_verdicts) and `held_back` {GPU model: why} the models it leaves out."""

    RELATIONS = {
        "energy": "fct_gpu_energy_hourly", "models": "fct_power_model", "residual": "fct_power_residual_hourly",
        "thermal": "fct_thermal_gpu", "carbon": "rpt_carbon_daily", "tco": "rpt_tco_daily",
        "checks": "fct_check_results", "recs": "fct_recommendation", "reconciliation": "fct_node_reconciliation_hourly",
        "coverage": "fct_gpu_coverage_daily", "pue": "fct_pue_hourly", "shift": "rpt_shift_opportunity_daily",
        "sensitivity": "fct_sensitivity_daily", "interval": "fct_power_interval",
        "job_prediction": "fct_job_energy_prediction", "placement": "fct_recommendation_extra",
        "job_efficiency": "fct_job_efficiency", "setting_efficiency": "fct_efficiency_setting_daily",
        "outcome": "fct_recommendation_outcome", "sensitivity_hourly": "fct_sensitivity_hourly",
        "precision_efficiency": "fct_efficiency_precision_daily", "flops_per_watt": "fct_flops_per_watt_daily",
        "compute_cost": "rpt_compute_cost_daily",
    }

    def __init__(self, con, day: dt.date, notes: dict[str, Any]):
        self.day = day
        for attr, name in self.RELATIONS.items():
            frame, why = usable(*read_day(con, name, day), name, day)
            setattr(self, attr, to_utc(frame) if frame is not None else None)
            setattr(self, f"{attr}_why", why)
        # An outcome table that exists but is empty for the day means nothing has taken effect yet.
        self.outcome_exists = not self.outcome_why.startswith("relation ")
        self.outcome_gpus = gpu_outcomes(self.outcome, applied_setting_bounds(con, day))
        self.demand_peak_set_on = demand_peak_set_on(con, day)
        self.quarantine, self.quarantine_why = usable(*count_day_by(con, "quarantine_gpu_samples", day, "reason"),
                                                      "quarantine_gpu_samples", day)
        context = as_frame(notes.get("hourly_context"))
        if context is not None:
            self.context, self.context_why = context, ""
        else:
            frame, self.context_why = usable(*read_day(con, "rpt_context_hourly", day), "rpt_context_hourly", day)
            self.context = to_utc(frame) if frame is not None else None
        self.curve = as_frame(notes.get("energy_vs_limit"))
        self.curve_why = ""
        if self.curve is None:
            curve, why = read_day(con, "fct_energy_vs_limit", day)
            self.curve_why = why or f"fct_energy_vs_limit has no rows for {day}"
            if has(curve, "is_dominant_bottleneck"):
                # One curve per GPU model: the bottleneck its fleet mostly runs.
                self.curve = curve.filter(pl.col("is_dominant_bottleneck"))
        # What the export applies and leaves out is the export's rule (reports.export.selection):
        # the page shows the same settings the signed file carries.
        self.held_back = held_back_models(self.recs, self.models, self.models_why, day)
        self.to_apply = settings_to_apply(self.recs, self.held_back, self.energy)
        self.exported = export_verdicts(self.recs, self.held_back) if self.recs is not None else None

    def fleet_load(self) -> tuple[pl.DataFrame, str]:
        """(hour_at, power_kw) and its label: the IT load from the context where known, else GPU power."""
        if has(self.context, "hour_at", "fleet_it_energy_kwh"):
            # NULL, not 0 kW, in an hour nothing was measured in (context fleet energies are NULL there)
            return (self.context.group_by("hour_at").agg(sum_known("fleet_it_energy_kwh").alias("power_kw"))
                    .sort("hour_at"), "fleet IT power")
        return (self.energy.group_by("hour_at").agg((sum_known("avg_power_w") / 1000).alias("power_kw"))
                .sort("hour_at"), "fleet GPU power")

    def hourly_context(self) -> pl.DataFrame:
        """One row per hour: the context's value columns averaged over sites."""
        values = [c for c in ("intensity_gco2e_per_kwh", "price_usd_per_mwh") if c in self.context.columns]
        return self.context.group_by("hour_at").agg([pl.col(c).mean() for c in values]).sort("hour_at")
