"""Which of a day's recommendations the export applies, and what each saves a day (pure rules:
frames in, frames out).

The signed export (reports.export.signed_config) and the report's page
(reports.page.relations) both ask here, so the page lists exactly the settings the file carries:
- the gate: a GPU model's settings go out only when its power model passed its quality gate
  that day (fct_power_model.passed_gate; any of its feature sets); a model with no fit, or a day
  with no fct_power_model, leaves every GPU of that model out (a node agent returns any GPU it
  capped before to its default: collectors/agent_loop.py);
- per GPU (`limit_verdict`): a cap below the device default or a locked SM clock range is a
  setting that changes the GPU; a limit at the device default with no lock (latency-sensitive,
  idle, a held-out control, no cap pays) is exported too, as an explicit default setting: the
  node agent sets it (the default limit, clocks unlocked) and audits it like any other, where an
  absent GPU is only reset when the agent starts or the GPU leaves the config in force
  (collectors/agent_loop.py), and an operator can read every treated and untreated GPU in the
  file; no limit, an unknown default, or a limit above the default (it would widen) is left out,
  in excluded_gpus with the reason;
- its saving, kWh/day: fct_recommendation.expected_energy_saving_kwh_per_day where the row
  has it, else expected_saving_pct x the GPU's measured energy of the day
  (fct_gpu_energy_hourly), for relations written before that column existed.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Mapping

import polars as pl

SAVING = "saving_kwh_per_day"
CHANGE, AT_DEFAULT = "change", "default"  # the two kinds of setting the export carries


def gate_by_model(models: pl.DataFrame | None, why_missing: str | None) -> dict[str, str | None]:
    """{gpu_model: None if its power model passed the gate, else the reason it did not}.
    A model with several fits that day (feature sets) passes when any of them passed."""
    if models is None:
        return {"*": f"no power-model quality gate to check ({why_missing})"}
    verdict: dict[str, str | None] = {}
    for row in models.sort("gpu_model").iter_rows(named=True):
        name = row["gpu_model"]
        if row.get("passed_gate"):
            verdict[name] = None
        elif verdict.get(name, "") is not None:
            reason = row.get("gate_reason") or "power model did not pass its quality gate"
            earlier = verdict.get(name)
            verdict[name] = reason if not earlier or reason in earlier else f"{earlier}; {reason}"
    return verdict


def exclusion_reason(gate: dict[str, str | None], model: str, day: dt.date) -> str | None:
    """Why `model`'s settings stay out of the day's export (None: they go in), from gate_by_model."""
    return gate.get(model, gate.get("*", f"no power model was fitted for {model} on {day}"))


def held_back_models(recs: pl.DataFrame | None, models: pl.DataFrame | None, models_why: str | None,
                     day: dt.date) -> dict[str, str]:
    """{GPU model: why} for the models of the day's recommendations whose settings the export
    leaves out. `models`: the day's fct_power_model rows (None when there are none usable, then
    `models_why` says why)."""
    if recs is None or "gpu_model" not in recs.columns:
        return {}
    usable = models is not None and "passed_gate" in models.columns and models["passed_gate"].null_count() < models.height
    gate = gate_by_model(models if usable else None, models_why)
    whys = {model: exclusion_reason(gate, model, day) for model in sorted(recs["gpu_model"].unique().to_list())}
    return {model: why for model, why in whys.items() if why is not None}


def known_number(value: Any) -> float | None:
    """A number, or None for NULL, NaN and infinity (no limit can be checked against those, and
    JSON holds neither)."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def limit_verdict(row: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """What the export does with one fct_recommendation row of a model that passed its gate:
    (CHANGE, None), (AT_DEFAULT, None), or (None, why it is left out). A column the row lacks
    (an older relation) counts as NULL."""
    limit, default = known_number(row.get("power_limit_w")), known_number(row.get("default_limit_w"))
    if limit is None:
        return None, "no power limit was recommended"
    if default is None:
        # NaN too: both comparisons below are false for it, and a 900 W cap was signed unchecked
        return None, "the device default limit is unknown, so a cap cannot be checked against it"
    if float(limit) > float(default):
        return None, (f"recommended {float(limit):.1f} W is above the device default {float(default):.1f} W; "
                      "the export never widens a limit")
    locked = row.get("locked_sm_clock_min_mhz") is not None or row.get("locked_sm_clock_max_mhz") is not None
    return (CHANGE if float(limit) < float(default) or locked else AT_DEFAULT), None


def export_verdicts(recs: pl.DataFrame, held_back: dict[str, str]) -> pl.DataFrame:
    """`recs` with `export` (CHANGE or AT_DEFAULT: the file sets the GPU; NULL: it leaves it out)
    and `left_out` (why, for NULL: the held-back model's reason, else limit_verdict's)."""
    verdicts = [(None, held_back[r["gpu_model"]]) if r.get("gpu_model") in held_back else limit_verdict(r)
                for r in recs.iter_rows(named=True)]
    return recs.with_columns(pl.Series("export", [v[0] for v in verdicts], dtype=pl.String),
                             pl.Series("left_out", [v[1] for v in verdicts], dtype=pl.String))


def settings_to_apply(recs: pl.DataFrame | None, held_back: dict[str, str],
                      energy: pl.DataFrame | None) -> pl.DataFrame | None:
    """The exported settings that change a GPU (export_verdicts: CHANGE), each with
    `saving_kwh_per_day`. `energy`: the day's fct_gpu_energy_hourly rows (gpu_uuid, energy_kwh),
    for the saving of rows that give only a percentage."""
    if recs is None:
        return None
    recs = export_verdicts(recs, held_back).filter(pl.col("export") == CHANGE).drop("export", "left_out")
    per_gpu = (energy.group_by("gpu_uuid").agg(pl.col("energy_kwh").sum().alias("day_energy_kwh"))
               if energy is not None else pl.DataFrame(schema={"gpu_uuid": pl.String, "day_energy_kwh": pl.Float64}))
    recs = recs.join(per_gpu, on="gpu_uuid", how="left")
    from_pct = (pl.col("day_energy_kwh") * pl.col("expected_saving_pct") / 100 if "expected_saving_pct" in recs.columns
                else pl.lit(None, dtype=pl.Float64))
    own = (pl.col("expected_energy_saving_kwh_per_day") if "expected_energy_saving_kwh_per_day" in recs.columns
           else pl.lit(None, dtype=pl.Float64))
    return recs.with_columns(pl.coalesce(own, from_pct).alias(SAVING))
