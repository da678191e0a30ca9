"""Time-shifting: what moving the deferrable jobs to the cleanest (or cheapest) hours of their
day would have saved (pure, frame in, frame out).

Rule, per site and day, for one hourly value v(h) per IT kWh (PUE x grid intensity in gCO2e, or
PUE x price in USD):
- A job's energy is moved unchanged in amount: its GPU-hours g are placed in new hours and each
  placed GPU-hour carries the job's mean IT energy per GPU-hour (energy_kwh / g).
- Candidate hours are the day's hours with a known v(h); with `window_hours` > 0 only those
  within that many hours of the job's own first and last hour.
- Capacity of an hour is the site's idle GPU-hours in it (what no job held), plus the job's own
  GPU-hours there (it frees them when it moves). Hours are filled cheapest v first (ties: the
  job's own hours, then the earlier hour).
- Jobs choose in order of energy, largest first (then job_id); a job's plan uses up capacity
  and frees its own hours for the jobs after it.
- A plan that would not lower the job's total (a job already in its best hours, or one whose
  power was higher in its cleaner hours) is not taken: the job stays, saving 0.
What it leaves out, stated: the idle draw of the GPUs a job moves onto or off is not
re-modelled (same energy, moved), nor demand charges or uplifts in the cost plan.
"""

from __future__ import annotations

import polars as pl

HOUR = pl.Datetime("us", "UTC")
PLAN_SCHEMA = {
    "site": pl.String, "team": pl.String, "job_id": pl.String, "energy_kwh": pl.Float64, "gpu_hours": pl.Float64,
    "as_run": pl.Float64, "planned": pl.Float64, "saving": pl.Float64, "moved_gpu_hours": pl.Float64,
    "best_hour_at": HOUR,
}


def _plan_job(own: dict, energy_by_hour: dict, capacity: dict, value: dict, window_hours: int) -> tuple[dict, float, float]:
    """Place one job's GPU-hours. Returns (placed GPU-hours by hour, as-run total, planned total);
    the planned total is None when an own hour has no value (the job cannot be priced)."""
    if any(value.get(h) is None for h in own):
        return dict(own), None, None
    as_run = sum(energy_by_hour[h] * value[h] for h in own)
    gpu_hours = sum(own.values())
    if gpu_hours <= 0:
        return dict(own), as_run, as_run
    density_kwh = sum(energy_by_hour.values()) / gpu_hours
    first, last = min(own), max(own)
    span = (first - window_hours * 3600_000_000, last + window_hours * 3600_000_000)
    candidates = [h for h, v in value.items() if v is not None and (window_hours <= 0 or span[0] <= h <= span[1])]
    candidates.sort(key=lambda h: (value[h], 0 if h in own else 1, h))
    placed, left = {}, gpu_hours
    for h in candidates:
        if left <= 1e-12:
            break
        take = min(left, capacity.get(h, 0.0) + own.get(h, 0.0))
        if take > 0:
            placed[h] = take
            left -= take
    if left > 1e-9:  # cannot happen (own hours are candidates), but never lose GPU-hours silently
        return dict(own), as_run, as_run
    planned = sum(g * density_kwh * value[h] for h, g in placed.items())
    return placed, as_run, planned


def plan_shifts(usage: pl.DataFrame, idle: pl.DataFrame, values: pl.DataFrame, window_hours: int = 0) -> pl.DataFrame:
    """usage: deferrable jobs' (site, hour_at, team, job_id, gpu_hours, energy_kwh [kWh IT]);
    idle: (site, hour_at, idle_gpu_hours); values: (site, hour_at, value_per_kwh [unit per IT kWh]).
    Returns one row per (site, job_id): team, energy_kwh, gpu_hours, as_run and planned (the
    value's unit, e.g. gCO2e or USD), saving (as_run - planned, >= 0), moved_gpu_hours and
    best_hour_at (the hour taking the most of the job in the plan). See the module rule."""
    if window_hours < 0:
        raise ValueError(f"shift window_hours={window_hours}: expected 0 (whole day) or a positive number of hours")
    to_us = lambda frame: frame.with_columns(pl.col("hour_at").cast(HOUR).dt.epoch("us").alias("_h"))  # noqa: E731
    usage, idle, values = to_us(usage), to_us(idle), to_us(values)
    rows = []
    for site in sorted(usage["site"].unique().to_list()):
        value = {h: v for h, v in values.filter(pl.col("site") == site).select("_h", "value_per_kwh").iter_rows()}
        capacity: dict[int, float] = {}
        for h, g in idle.filter(pl.col("site") == site).select("_h", "idle_gpu_hours").iter_rows():
            capacity[h] = capacity.get(h, 0.0) + max(float(g or 0.0), 0.0)
        per_job = (usage.filter(pl.col("site") == site)
                   .group_by("job_id", "team", "_h").agg(pl.col("gpu_hours").sum(), pl.col("energy_kwh").sum()))
        order = (per_job.group_by("job_id", "team").agg(pl.col("energy_kwh").sum().alias("_e"))
                 .sort(["_e", "job_id"], descending=[True, False]))
        for job_id, team, _ in order.iter_rows():
            mine = per_job.filter((pl.col("job_id") == job_id) & pl.col("team").eq_missing(team))
            own = {h: float(g) for h, g in mine.select("_h", "gpu_hours").iter_rows()}
            energy = {h: float(e or 0.0) for h, e in mine.select("_h", "energy_kwh").iter_rows()}
            placed, as_run, planned = _plan_job(own, energy, capacity, value, window_hours)
            if planned is None or planned >= as_run:
                placed, planned = dict(own), as_run
            else:
                for h, g in own.items():
                    capacity[h] = capacity.get(h, 0.0) + g
                for h, g in placed.items():
                    capacity[h] = capacity.get(h, 0.0) - g
            best = max(placed, key=lambda h: (placed[h], -(value.get(h) or 0.0), -h)) if placed else None
            moved = sum(max(g - own.get(h, 0.0), 0.0) for h, g in placed.items())
            rows.append((site, team, job_id, sum(energy.values()), sum(own.values()), as_run, planned,
                         None if as_run is None else as_run - planned, moved, best))
    out = pl.DataFrame(rows, schema={**PLAN_SCHEMA, "best_hour_at": pl.Int64}, orient="row")
    return out.with_columns(pl.from_epoch("best_hour_at", time_unit="us").dt.replace_time_zone("UTC").alias("best_hour_at"))


def shift_inputs(attributed: pl.DataFrame, gpu_sites: pl.DataFrame, deferrable_job_ids: list[str],
                 unallocated: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """From reports.accounts.attribution.attribute_gpu_hours rows (hour_at, gpu_uuid, job_id, team,
    gpu_hours, energy_kwh) and (gpu_uuid, site): (usage of the deferrable jobs, idle GPU-hours
    per site-hour) as plan_shifts wants them."""
    rows = attributed.join(gpu_sites.unique("gpu_uuid"), on="gpu_uuid", how="left").with_columns(
        pl.col("site").fill_null("unknown"))
    usage = rows.filter(pl.col("job_id").is_in(pl.Series(deferrable_job_ids, dtype=pl.String).implode())).select(
        "site", "hour_at", "team", "job_id", "gpu_hours", "energy_kwh")
    idle = rows.filter(pl.col("job_id") == unallocated).group_by("site", "hour_at").agg(
        pl.col("gpu_hours").sum().alias("idle_gpu_hours"))
    return usage, idle
