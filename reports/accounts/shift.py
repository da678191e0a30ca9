"""Time-shifting: what moving the deferrable jobs to the cleanest (or cheapest) hours of their
day would have saved (pure, frame in, frame out).

Rule, per site and day (per site and grid region where a site spans two: a job moves only onto its
region's GPUs, valued by its hours), for one hourly value v(h) per IT kWh (PUE x grid intensity in gCO2e, or
PUE x price in USD):
- A job's energy is moved unchanged in amount: its GPU-hours g are placed in new hours and each
  placed GPU-hour carries the job's mean IT energy per GPU-hour (energy_kwh / g).
- Only measured GPU-hours move: an hour whose energy was not measured (NULL) stays where it ran
  and counts in neither total (read as 0 kWh, it made a job that could not move save a quarter);
  a job with no measured hour has NULL totals.
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
carbon_shift_rows and cost_shift_rows give the rows carbon_day and tco_day write
(rpt_shift_carbon_daily, rpt_shift_cost_daily).
"""

from __future__ import annotations

import polars as pl

from joulehouse.reports.accounts.attribution import UNALLOCATED, attribute_gpu_hours

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
    # Every float sum below in one order whatever order the query gave the rows in: a re-run of a
    # day gave the plans' savings other last bits (10-19 of 55 rows)
    usage, idle, values = (to_us(f).sort(f.columns, nulls_last=True) for f in (usage, idle, values))
    rows = []
    for site in sorted(usage["site"].unique().to_list()):
        value = {h: v for h, v in values.filter(pl.col("site") == site).select("_h", "value_per_kwh").iter_rows()}
        capacity: dict[int, float] = {}
        for h, g in idle.filter(pl.col("site") == site).select("_h", "idle_gpu_hours").iter_rows():
            capacity[h] = capacity.get(h, 0.0) + max(float(g or 0.0), 0.0)
        per_job = (usage.filter(pl.col("site") == site)
                   .group_by("job_id", "team", "_h").agg(
                       pl.col("gpu_hours").sum(),
                       pl.col("gpu_hours").filter(pl.col("energy_kwh").is_not_null()).sum().alias("_measured_gpu_hours"),
                       # NULL where none of the hour's GPUs was measured (polars' sum of NULLs is 0)
                       pl.when(pl.col("energy_kwh").is_not_null().any()).then(pl.col("energy_kwh").sum()))
                   .sort("job_id", "team", "_h", nulls_last=True))
        order = (per_job.group_by("job_id", "team").agg(pl.col("energy_kwh").sum().alias("_e"))
                 .sort(["_e", "job_id"], descending=[True, False]))
        for job_id, team, _ in order.iter_rows():
            mine = per_job.filter((pl.col("job_id") == job_id) & pl.col("team").eq_missing(team))
            held = {h: float(g) for h, g in mine.select("_h", "gpu_hours").iter_rows()}
            energy = {h: float(e) for h, e in mine.select("_h", "energy_kwh").iter_rows() if e is not None}
            own = {h: float(g) for h, g in mine.select("_h", "_measured_gpu_hours").iter_rows() if g}
            placed, as_run, planned = _plan_job(own, energy, capacity, value, window_hours) if own else (own, None, None)
            if planned is None or planned >= as_run:
                placed, planned = dict(own), as_run
            else:
                for h, g in own.items():
                    capacity[h] = capacity.get(h, 0.0) + g
                for h, g in placed.items():
                    capacity[h] = capacity.get(h, 0.0) - g
            for h, g in held.items():  # the unmeasured GPU-hours stay where they ran
                if g - own.get(h, 0.0) > 1e-12:
                    placed[h] = placed.get(h, 0.0) + g - own.get(h, 0.0)
            best = max(placed, key=lambda h: (placed[h], -(value.get(h) or 0.0), -h)) if placed else None
            moved = sum(max(g - held.get(h, 0.0), 0.0) for h, g in placed.items())
            rows.append((site, team, job_id, sum(energy.values()) if energy else None, sum(held.values()), as_run,
                         planned, None if as_run is None else as_run - planned, moved, best))
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


def shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, values: pl.DataFrame, window_hours: int,
               energy_shares: pl.DataFrame | None = None) -> pl.DataFrame:
    """Plan the day's deferrable jobs (jobs.deferrable true) against `values` (site, hour_at,
    value_per_kwh per IT kWh) -> plan_shifts' rows plus `day`. gpu_hours: hour_at, day,
    gpu_uuid, site, energy_kwh [IT]; a job's energy as the accounts split it (energy_shares:
    reports.accounts.attribution.attribute_gpu_hours)."""
    day = gpu_hours["day"][0] if gpu_hours.height else None
    deferrable = jobs.filter(pl.col("deferrable").fill_null(False))["job_id"].unique().to_list() if "deferrable" in jobs.columns else []
    if not deferrable or gpu_hours.height == 0:
        return plan_shifts(*_empty_shift_inputs(), values.head(0)).with_columns(pl.lit(day, dtype=pl.Date).alias("day"))
    attributed = attribute_gpu_hours(gpu_hours.select("hour_at", "day", "gpu_uuid", "energy_kwh"), jobs, ["energy_kwh"],
                                     energy_shares)
    by_region = "region" in gpu_hours.columns and "region" in values.columns
    if by_region:  # a site in two grid regions: each region's GPUs are a pool of their own, valued by its hours
        gpu_hours, values = (frame.with_columns(_pool_key()) for frame in (gpu_hours, values))
    usage, idle = shift_inputs(attributed, gpu_hours.select("gpu_uuid", "site"), deferrable, UNALLOCATED)
    plans = plan_shifts(usage, idle, values, window_hours)
    return (_jobs_over_pools(plans) if by_region else plans).with_columns(pl.lit(day, dtype=pl.Date).alias("day"))


_POOL_SEPARATOR = "\x1f"  # a control character: in no site or region name


def _pool_key() -> pl.Expr:
    """The planning pool (site, region) as one `site` key for plan_shifts."""
    return pl.concat_str(pl.col("site").fill_null("unknown"), pl.lit(_POOL_SEPARATOR),
                         pl.col("region").fill_null("")).alias("site")


def _jobs_over_pools(plans: pl.DataFrame) -> pl.DataFrame:
    """plan_shifts' rows per (pool, job) -> per (site, job): amounts added up, a total NULL when one
    region's part could not be valued (as a job with an unvalued hour in one pool), the best hour
    that of the part with the most GPU-hours."""
    def all_known(column: str) -> pl.Expr:
        return pl.when(pl.col(column).is_not_null().all()).then(pl.col(column).sum())

    return (plans.with_columns(pl.col("site").str.split(_POOL_SEPARATOR).list.first())
            .sort("gpu_hours", descending=True, maintain_order=True)
            .group_by("site", "team", "job_id", maintain_order=True)
            .agg(pl.when(pl.col("energy_kwh").is_not_null().any()).then(pl.col("energy_kwh").sum()).alias("energy_kwh"),
                 pl.col("gpu_hours").sum(), all_known("as_run"), all_known("planned"), all_known("saving"),
                 pl.col("moved_gpu_hours").sum(), pl.col("best_hour_at").first())
            .select(list(PLAN_SCHEMA)))


def _empty_shift_inputs() -> tuple[pl.DataFrame, pl.DataFrame]:
    usage = pl.DataFrame(schema={"site": pl.String, "hour_at": HOUR, "team": pl.String, "job_id": pl.String,
                                 "gpu_hours": pl.Float64, "energy_kwh": pl.Float64})
    idle = pl.DataFrame(schema={"site": pl.String, "hour_at": HOUR, "idle_gpu_hours": pl.Float64})
    return usage, idle


def carbon_shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, grid: pl.DataFrame, window_hours: int,
                      energy_shares: pl.DataFrame | None = None) -> pl.DataFrame:
    """rpt_shift_carbon_daily rows: plan against PUE x intensity (gCO2e per IT kWh) of `grid`
    (rpt_context_grid_hourly rows)."""
    values = grid.select("site", *(["region"] if "region" in grid.columns else []), "hour_at",
                         (pl.col("pue") * pl.col("intensity_gco2e_per_kwh")).alias("value_per_kwh"))
    return shift_rows(gpu_hours, jobs, values, window_hours, energy_shares).select(
        "day", "site", "team", "job_id", "energy_kwh", "gpu_hours", pl.col("as_run").alias("carbon_gco2e"),
        pl.col("planned").alias("shifted_carbon_gco2e"), pl.col("saving").alias("carbon_saving_gco2e"),
        "moved_gpu_hours", pl.col("best_hour_at").alias("best_carbon_hour_at"))


def cost_shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, site_pue: pl.DataFrame, prices: pl.DataFrame,
                    window_hours: int, energy_shares: pl.DataFrame | None = None) -> pl.DataFrame:
    """rpt_shift_cost_daily rows: plan against PUE x price (USD per IT kWh). site_pue: (site,
    hour_at, pue) for every hour of the day; prices: (hour_at, price_usd_per_kwh)."""
    values = site_pue.join(prices, on="hour_at", how="left").select(
        "site", "hour_at", (pl.col("pue") * pl.col("price_usd_per_kwh")).alias("value_per_kwh"))
    return shift_rows(gpu_hours, jobs, values, window_hours, energy_shares).select(
        "day", "site", "team", "job_id", "energy_kwh", "gpu_hours", pl.col("as_run").alias("energy_cost_usd"),
        pl.col("planned").alias("shifted_energy_cost_usd"), pl.col("saving").alias("cost_saving_usd"),
        "moved_gpu_hours", pl.col("best_hour_at").alias("best_cost_hour_at"))
