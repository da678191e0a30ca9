"""The report's efficiency by precision and batch (fct_efficiency_precision_daily) and its FP16-
equivalent FLOPs per watt against the 20% gain goal (fct_flops_per_watt_daily). Layout only: the
numbers are models.efficiency_precision's."""

from __future__ import annotations

import polars as pl

from joulehouse.reports.page.blocks import Section, fmt_number, table
from joulehouse.reports.page.relations import ReportData, has


def _supported(r: dict) -> str:
    """What the jobs' spread leaves of a line's saving (saving_low_kwh_per_day summed; n_single: its
    rows whose batch or best batch ran a single job)."""
    if r["n_single"]:
        return " (some of those batches ran a single job: no spread to judge them by)"
    low = r["saving_low_kwh_per_day"]
    if low <= 0:
        return " (within the jobs' own spread: not a saving to count on)"
    return f" (at least {fmt_number(low, 2)} kWh given the jobs' spread)"


def _best_batches(rows: pl.DataFrame) -> list[str]:
    """One line per (GPU model, precision, unit) where another batch would have saved energy."""
    saving = rows.filter(pl.col("saving_kwh_per_day") > 0)
    spread = "saving_low_kwh_per_day" in rows.columns  # not in warehouses written before it was stated
    saving = saving.group_by("gpu_model", "precision", "work_unit", "best_batch_size").agg(
        pl.col("saving_kwh_per_day").sum(),
        *([pl.col("saving_low_kwh_per_day").sum(), pl.col("saving_low_kwh_per_day").is_null().sum().alias("n_single")]
          if spread else [])).sort("saving_kwh_per_day", descending=True)
    return [f"{r['gpu_model']}, {r['precision']}: batch {r['best_batch_size']} does the most {r['work_unit']}s per "
            f"joule; running the other batches' work there would have saved {fmt_number(r['saving_kwh_per_day'], 2)} kWh "
            f"that day{_supported(r) if spread else ''}." for r in saving.head(5).to_dicts()]


def precision_efficiency_block(data: ReportData, s: Section) -> None:
    s.heading("By precision and batch size")
    rows = data.precision_efficiency
    if not has(rows, "j_per_unit"):
        s.missing(f"no efficiency by precision and batch ({data.precision_efficiency_why}); it needs jobs that report "
                  "work done, and their precision and batch_size for the split")
    else:
        s.note("Energy per unit of work by GPU model, numeric precision and batch size, from the day's own jobs. "
               "eta = throughput / power (units per joule); the best batch has the highest eta of its GPU model and "
               "precision, and the saving is what the other batches' work would have used less at it. Jobs that "
               "do different work (another model, another sequence length) compare only as well as their units do, "
               "so saving_low_kwh_per_day keeps only what the jobs' own spread still supports (the best batch's "
               "J/unit raised by twice the two groups' combined standard error); "
               "a larger batch also lengthens each request: check the latency budget before moving serving there, "
               "and a larger training batch can need more epochs to reach the same accuracy (samples per joule is "
               "not energy to accuracy): check convergence before moving training there.")
        lines = _best_batches(rows) if has(rows, "saving_kwh_per_day") else []
        if lines:
            s.bullets(lines)
        cols = [c for c in ("gpu_model", "precision", "batch_size", "work_unit", "n_jobs", "energy_kwh", "j_per_unit",
                            "eta_units_per_j", "best_batch_size", "saving_kwh_per_day", "saving_low_kwh_per_day")
                if c in rows.columns]
        shown = rows.select(cols).rename({"j_per_unit": "energy per unit (J/unit)", "eta_units_per_j": "eta (units/J)",
                                          "n_jobs": "n_jobs", "batch_size": "batch (count)",
                                          "best_batch_size": "best batch (count)"})
        s.add(table(shown, digits={"energy per unit (J/unit)": 4, "eta (units/J)": 3, "energy_kwh": 3,
                                   "saving_kwh_per_day": 3, "saving_low_kwh_per_day": 3},
                    source="fct_efficiency_precision_daily"))
    s.heading("FLOPs per watt, FP16-equivalent")
    flops = data.flops_per_watt
    if not has(flops, "fp16_equivalent_flops_per_w"):
        s.missing(f"no FLOPs per watt ({data.flops_per_watt_why}); it needs jobs that report flops_total")
        return
    fleet = flops.filter(pl.col("gpu_model") == "fleet").to_dicts()
    if fleet:
        f = fleet[0]
        s.note(f"Sustained, not peak: the jobs' own FLOPs (converted to FP16-equivalent by each precision's datasheet "
               f"peak ratio on the GPU that ran it) over their own energy, at a mean chip temperature of "
               f"{fmt_number(f['avg_temp_c'], 1)} °C. Fleet: {fmt_number(f['fp16_equivalent_flops_per_w'] / 1e9, 1)} "
               f"GFLOP/s per W, {fmt_number(f['gain_vs_first_day_pct'], 1)}% since {f['first_day']} against the goal of "
               f"+20% ({fmt_number(f['goal_flops_per_w'] / 1e9, 1)} GFLOP/s per W).")
    shown = flops.with_columns((pl.col("fp16_equivalent_flops_per_w") / 1e9).alias("sustained_gflops_per_w"),
                               (pl.col("peak_fp16_flops_per_w") / 1e9).alias("peak_gflops_per_w"),
                               (pl.col("goal_flops_per_w") / 1e9).alias("goal_gflops_per_w"))
    cols = [c for c in ("gpu_model", "n_jobs", "sustained_gflops_per_w", "peak_gflops_per_w", "avg_temp_c",
                        "precision_reported_ratio", "first_day", "gain_vs_first_day_pct", "goal_gflops_per_w")
            if c in shown.columns]
    labels = {"sustained_gflops_per_w": "sustained (GFLOP/s per W)", "peak_gflops_per_w": "datasheet peak (GFLOP/s per W)",
              "goal_gflops_per_w": "goal (GFLOP/s per W)"}
    s.add(table(shown.select(cols).rename(labels), digits={v: 1 for v in labels.values()} | {"avg_temp_c": 1},
                source="fct_flops_per_watt_daily"))
    if has(data.compute_cost, "total_cost_per_tflops_hour_usd"):
        cols = [c for c in ("gpu_model", "fp16_equivalent_tflops_hours", "energy_cost_per_tflops_hour_usd",
                            "total_cost_per_tflops_hour_usd") if c in data.compute_cost.columns]
        s.note("Cost per TFLOPS-hour of FP16-equivalent work (10^12 FLOP/s for an hour), energy alone and all costs.")
        s.add(table(data.compute_cost.select(cols).rename({
            "fp16_equivalent_tflops_hours": "work (TFLOPS-hours)",
            "energy_cost_per_tflops_hour_usd": "energy cost (USD/TFLOPS-hour)",
            "total_cost_per_tflops_hour_usd": "total cost (USD/TFLOPS-hour)"}),
            digits={"work (TFLOPS-hours)": 1, "energy cost (USD/TFLOPS-hour)": 4, "total cost (USD/TFLOPS-hour)": 4},
            source="rpt_compute_cost_daily"))
    else:
        s.missing(f"no cost per TFLOPS-hour ({data.compute_cost_why})")
