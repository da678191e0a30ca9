"""Split per-GPU-hour quantities among the jobs that held the GPU in that hour (frame in, frame out).

Rule: a job's share of a GPU-hour is the seconds its [started_at, ended_at) interval overlaps
the hour, divided by 3600. Jobs that overlap each other on one GPU share the seconds any of them
held it (the union of their intervals in the hour) in proportion to their own seconds, so that no
GPU-hour is counted twice and the time none of them held stays unallocated. Amounts that follow the energy (energy, operational
carbon, energy cost, demand charge) are split instead by the jobs' measured shares of the hour's
energy where the models measured them (fct_job_energy_hourly: the energy the GPU's readings drew
inside each job's window, from the readings the hour's energy came from), so a job that ran the GPU at 700 W for half an hour of 60 W idle pays
for 92% of that hour's energy, not 50% (a GPU-hour where a job holding it has no measured share
goes wholly by time held); amounts of calendar time (capital, operations, embodied
carbon: `time_cols`) stay by time held. What no job held is the explicit `unallocated`
line (job_id/team/user "unallocated", stage "idle"). The unallocated amount is computed as the
hour's total minus the jobs' amounts, so attributed + unallocated == metered, always.

`spread_unallocated` then implements `idle_policy = "proportional"`: the day's unallocated
amounts are spread over that day's job rows in proportion to their energy_kwh (overhead
allocation). With no job rows there is nobody to spread to and the line stays.

`account_by_gpu` keeps the same amounts at (day, job_id, gpu_model, site) as well: what each job
(and the idle line) incurred on each GPU model and inventory site, so that a split over models and
sites is the accounts' own and not a later guess. Spread idle amounts stay on the model and site of
the idle GPUs they came from.
"""

from __future__ import annotations

import polars as pl

UNALLOCATED = "unallocated"
IDLE_STAGE = "idle"
HOUR_S = 3600.0
GROUP_KEYS = ["day", "team", "user", "job_id", "stage"]
GPU_KEYS = ["day", "job_id", "gpu_model", "site"]
JOB_COLUMNS = {
    "job_id": pl.String, "host": pl.String, "gpu_uuid": pl.String,
    "started_at": pl.Datetime("us", "UTC"), "ended_at": pl.Datetime("us", "UTC"),
    "user": pl.String, "team": pl.String, "stage": pl.String, "flops_total": pl.Float64,
}


def sum_known(column: str) -> pl.Expr:
    """The sum of a column's known values, NULL where none is known (polars' sum() of only NULLs is
    0, and a GPU-hour whose energy was not measured is not a GPU-hour that drew 0 kWh).

    Where some values are known and some are not, the sum is that of the known ones: a job with
    measured and unmeasured hours is charged the energy (carbon, cost) that was measured, never
    NULL for all of it and never a guess for the rest, so the jobs' sums still add up to the
    measured total. Its unmeasured hours are not hidden: they count in unmetered_gpu_hours
    (reports.accounts.carbon / tco), which says how much of a row's gpu_hours the amounts miss."""
    return pl.when(pl.col(column).count() > 0).then(pl.col(column).sum())


def _plus_share(amount: str, share: pl.Expr) -> pl.Expr:
    """amount + its share of the day's idle amount, where an unknown (NULL) amount stays NULL
    unless a share of a known idle amount actually lands on it (then that share is all it knows)."""
    return (pl.when(share.is_null() | (share == 0)).then(pl.col(amount))
            .otherwise(pl.col(amount).fill_null(0.0) + share))


def empty_jobs() -> pl.DataFrame:
    """A jobs frame with no rows (a site without a scheduler feed)."""
    return pl.DataFrame(schema=JOB_COLUMNS)


def empty_account(amount_columns) -> pl.DataFrame:
    """The rows of a day with no metered GPU-hours: an account's columns, no rows."""
    return pl.DataFrame(schema={"day": pl.Date, "team": pl.String, "user": pl.String, "job_id": pl.String,
                                "stage": pl.String, "gpu_hours": pl.Float64, "flops_total": pl.Float64,
                                **{c: pl.Float64 for c in amount_columns}})


def empty_by_gpu(amount_columns) -> pl.DataFrame:
    """The split by GPU model and site of a day with no metered GPU-hours: its columns, no rows."""
    return empty_account(amount_columns).with_columns(pl.lit(None, pl.String).alias(c) for c in ("gpu_model", "site"))


def account_total(rows: pl.DataFrame, column: str) -> float | None:
    """A column of an account summed over the day's rows: 0.0 for an empty account (nothing to
    account), None where every row's value is unknown (polars sums nulls to 0, so a day of
    unmeasured GPU-hours had said 0 kWh and an energy cost of $0)."""
    if not rows.height:
        return 0.0
    values = rows[column]
    return None if values.null_count() == rows.height else float(values.sum())


def split_valid_jobs(jobs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(valid, quarantined-with-reason). A job whose end is not after its start cannot hold
    any GPU time; it is set aside with a reason, never silently dropped."""
    reason = (
        pl.when(pl.col("started_at").is_null() | pl.col("ended_at").is_null()).then(pl.lit("missing start or end time"))
        .when(pl.col("ended_at") <= pl.col("started_at")).then(pl.lit("ended_at is not after started_at"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    marked = jobs.with_columns(reason.alias("reason"))
    return marked.filter(pl.col("reason").is_null()).drop("reason"), marked.filter(pl.col("reason").is_not_null())


def _energy_share(energy_shares: pl.DataFrame | None) -> pl.Expr:
    """Each (GPU-hour, job row)'s share of the hour's energy: in a GPU-hour where `energy_shares`
    measured every job that held it, the job's measured share, its rows in the hour sharing it by
    their seconds; elsewhere the share of time held."""
    if energy_shares is None or energy_shares.height == 0:
        return pl.col("gpu_hours")
    return (pl.when(pl.col("_measured")).then(pl.col("_job_energy_share") * pl.col("overlap_s")
                                               / pl.col("overlap_s").sum().over(["hour_at", "gpu_uuid", "job_id"]))
            .otherwise(pl.col("gpu_hours")))


def _with_measured_shares(pairs: pl.DataFrame, energy_shares: pl.DataFrame | None) -> pl.DataFrame:
    if energy_shares is None or energy_shares.height == 0:
        return pairs
    keys = ["hour_at", "gpu_uuid"]
    shares = energy_shares.select(pl.col("hour_at").cast(pairs.schema["hour_at"]), "gpu_uuid", "job_id",
                                  pl.col("energy_share_ratio").cast(pl.Float64).alias("_job_energy_share"))
    # shares of one hour sum to at most 1 by construction; a rounding excess is scaled away so
    # the unallocated rest is never negative
    shares = shares.with_columns(pl.col("_job_energy_share")
                                 / pl.max_horizontal(pl.col("_job_energy_share").sum().over(keys), pl.lit(1.0)))
    # A GPU-hour is split by the measured shares only when every job the accounts see holding it
    # has one: a job the models did not see (it held the GPU between two readings only, or the
    # jobs changed after the efficiency step ran) would otherwise get 0 while the others keep
    # shares measured without it. Then the whole hour goes by time held; never measured shares for
    # some jobs and time for others, whose sum could pass the hour's energy.
    return (pairs.join(shares, on=[*keys, "job_id"], how="left")
            .with_columns(pl.col("_job_energy_share").is_not_null().all().over(keys).alias("_measured")))


def _with_union_s(pairs: pl.DataFrame) -> pl.DataFrame:
    """Add `union_s` to (GPU-hour, job) pairs (hour_at, _hour_end, gpu_uuid, started_at, ended_at):
    the seconds of the hour that any job held the GPU, the union of their intervals in the hour."""
    keys = ["hour_at", "gpu_uuid"]
    clipped = pairs.with_columns(
        ((pl.max_horizontal("started_at", "hour_at") - pl.col("hour_at")).dt.total_microseconds() / 1e6).alias("_from_s"),
        ((pl.min_horizontal("ended_at", "_hour_end") - pl.col("hour_at")).dt.total_microseconds() / 1e6).alias("_to_s"),
    ).sort([*keys, "_from_s"])
    # taken in order of start, each interval adds what reaches past the furthest end before it
    reach_s = pl.col("_to_s").cum_max().shift(1).over(keys)
    added_s = (pl.col("_to_s") - pl.max_horizontal("_from_s", reach_s)).clip(lower_bound=0.0)
    return clipped.with_columns(added_s.sum().over(keys).alias("union_s")).drop("_from_s", "_to_s")


def attribute_gpu_hours(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, additive_cols: list[str],
                        energy_shares: pl.DataFrame | None = None, time_cols: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per (GPU-hour, job) rows, plus one `unallocated` row per GPU-hour not fully held.

    gpu_hours: hour_at (UTC hour start), day, gpu_uuid and the additive columns (energy_kwh,
    carbon, cost... anything that adds up). jobs: JOB_COLUMNS. energy_shares: (hour_at, gpu_uuid,
    job_id, energy_share_ratio), the jobs' measured shares of each GPU-hour's energy, or None.
    Returns hour_at, day, gpu_uuid, job_id, team, user, stage, gpu_hours (the share of time,
    0..1 GPU-hours), flops_total (the job's FLOPs pro rata by its seconds in that hour) and each
    additive column split: those in `time_cols` by the share of time, the others by the share of
    energy (module docstring)."""
    jobs = jobs.select([pl.col(c).cast(t) for c, t in JOB_COLUMNS.items()])
    hours = gpu_hours.with_columns((pl.col("hour_at") + pl.duration(hours=1)).alias("_hour_end"))
    overlap_s = (
        (pl.min_horizontal("ended_at", "_hour_end") - pl.max_horizontal("started_at", "hour_at"))
        .dt.total_microseconds() / 1e6
    )
    job_s = (pl.col("ended_at") - pl.col("started_at")).dt.total_microseconds() / 1e6
    pairs = (
        hours.select(["hour_at", "_hour_end", "day", "gpu_uuid"])
        .join(jobs.drop("host"), on="gpu_uuid", how="inner")
        .filter((pl.col("started_at") < pl.col("_hour_end")) & (pl.col("ended_at") > pl.col("hour_at")))
        .with_columns(overlap_s.alias("overlap_s"), job_s.alias("job_s"))
        .with_columns(pl.col("overlap_s").sum().over(["hour_at", "gpu_uuid"]).alias("held_s"))
        .pipe(_with_union_s)
        .with_columns(
            # by the sum of seconds alone, two jobs sharing a GPU for the hour's first half held it
            # 0.5 + 0.5 GPU-hours and the idle second half left the unallocated line
            (pl.col("overlap_s") / pl.col("held_s") * pl.col("union_s") / HOUR_S).alias("gpu_hours"),
            (pl.col("flops_total") * pl.col("overlap_s") / pl.col("job_s")).alias("flops_total"),
        )
    )
    pairs = _with_measured_shares(pairs, energy_shares)
    pairs = (
        pairs.with_columns(_energy_share(energy_shares).alias("_energy_share"))
        .join(hours.select(["hour_at", "gpu_uuid", *additive_cols]), on=["hour_at", "gpu_uuid"], how="left")
        .with_columns([(pl.col(c) * pl.col("gpu_hours" if c in time_cols else "_energy_share")).alias(c)
                       for c in additive_cols])
        .select(["hour_at", "day", "gpu_uuid", "job_id", "team", "user", "stage", "gpu_hours", "flops_total", *additive_cols])
    )
    held = pairs.group_by(["hour_at", "gpu_uuid"]).agg(
        [pl.col("gpu_hours").sum()] + [pl.col(c).sum() for c in additive_cols]
    )
    rest = (
        gpu_hours.select(["hour_at", "day", "gpu_uuid", *additive_cols])
        .join(held, on=["hour_at", "gpu_uuid"], how="left", suffix="_held")
        .with_columns(
            (1.0 - pl.col("gpu_hours").fill_null(0.0)).alias("gpu_hours"),
            *[(pl.col(c) - pl.col(f"{c}_held").fill_null(0.0)).alias(c) for c in additive_cols],
            pl.lit(UNALLOCATED).alias("job_id"), pl.lit(UNALLOCATED).alias("team"),
            pl.lit(UNALLOCATED).alias("user"), pl.lit(IDLE_STAGE).alias("stage"),
            pl.lit(None, dtype=pl.Float64).alias("flops_total"),
        )
        # A fully held hour leaves nothing: drop only rows where every amount is exactly zero.
        .filter((pl.col("gpu_hours") > 1e-12) | pl.any_horizontal([pl.col(c) != 0 for c in additive_cols]))
        .select(pairs.columns)
    )
    return pl.concat([pairs, rest], how="vertical_relaxed")


def group_by_job(attributed: pl.DataFrame, additive_cols: list[str]) -> pl.DataFrame:
    """Sum to the report grain: day x team x user x job x stage."""
    return (
        attributed.group_by(GROUP_KEYS)
        .agg([pl.col("gpu_hours").sum(), sum_known("flops_total")] + [sum_known(c) for c in additive_cols])
        .sort(GROUP_KEYS)
    )


def _spread_weights(jobs: pl.DataFrame, weight_col: str) -> pl.DataFrame:
    """The job rows with `_w`: each row's share of its day's idle amounts (its `weight_col` over
    the day's, equal shares where the day's weights sum to zero). A row whose weight is unknown
    (no measured energy) weighs nothing: the idle amounts go to the rows that drew measured energy."""
    weight = pl.col(weight_col).fill_null(0.0)
    return jobs.with_columns(weight.sum().over("day").alias("_w_day")).with_columns(
        pl.when(pl.col("_w_day") != 0).then(weight / pl.col("_w_day"))
        .otherwise(1.0 / pl.len().over("day")).alias("_w"))


# Amounts that are a part of gpu_hours (the unread GPU-hours): they stay where gpu_hours stays.
PARTS_OF_GPU_HOURS = ("unmetered_gpu_hours",)


def spread_unallocated(grouped: pl.DataFrame, additive_cols: list[str], weight_col: str = "energy_kwh") -> pl.DataFrame:
    """idle_policy "proportional": move each day's unallocated amounts onto that day's jobs in
    proportion to `weight_col`. gpu_hours stays where it was (idle time is reported, not hidden),
    and so does its part PARTS_OF_GPU_HOURS."""
    is_idle = pl.col("job_id") == UNALLOCATED
    jobs = grouped.filter(~is_idle)
    idle = grouped.filter(is_idle)
    if jobs.height == 0 or idle.height == 0:
        return grouped
    # a part of gpu_hours stays with them: moved, a job held 1 GPU-hour of which 24 were unread
    additive_cols = [c for c in additive_cols if c not in PARTS_OF_GPU_HOURS]
    idle_totals = idle.group_by("day").agg([sum_known(c).alias(f"_idle_{c}") for c in additive_cols])
    spread = (
        _spread_weights(jobs, weight_col).join(idle_totals, on="day", how="left")
        .with_columns([_plus_share(c, pl.col("_w") * pl.col(f"_idle_{c}")).alias(c) for c in additive_cols])
        .select(grouped.columns)
    )
    # Idle rows keep their gpu_hours (so idle time stays visible) but carry no amounts any more;
    # days with idle but no jobs keep their amounts. An idle amount nobody knew (NULL) moved nowhere
    # and stays NULL.
    days_with_jobs = jobs.select("day").unique()
    moved = idle.join(days_with_jobs, on="day", how="semi").with_columns(
        [pl.when(pl.col(c).is_not_null()).then(0.0).alias(c) for c in additive_cols])
    kept = idle.join(days_with_jobs, on="day", how="anti")
    return pl.concat([spread, moved, kept], how="vertical_relaxed").sort(GROUP_KEYS)


def account_to_jobs(per_hour: pl.DataFrame, jobs: pl.DataFrame, additive_cols: list[str], idle_policy: str,
                    energy_shares: pl.DataFrame | None = None, time_cols: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per-GPU-hour amounts attributed to the jobs that held each GPU-hour (attribute_gpu_hours) and
    summed at the report grain; what no job held stays an "unallocated" line, or with idle_policy
    "proportional" is spread onto the day's jobs in proportion to their energy."""
    grouped = group_by_job(attribute_gpu_hours(per_hour, jobs, additive_cols, energy_shares, time_cols), additive_cols)
    return spread_unallocated(grouped, additive_cols) if idle_policy == "proportional" else grouped


def _gpu_keys(per_hour: pl.DataFrame) -> pl.DataFrame:
    """gpu_uuid -> gpu_model and site as the inventory names it (`inventory_site`; NULL for a GPU
    outside it, whatever site the accounts assumed for its PUE and prices)."""
    return per_hour.select(
        "gpu_uuid",
        (pl.col("gpu_model") if "gpu_model" in per_hour.columns else pl.lit(None)).cast(pl.String).alias("gpu_model"),
        (pl.col("inventory_site") if "inventory_site" in per_hour.columns else pl.lit(None)).cast(pl.String).alias("site"),
    ).unique("gpu_uuid")


def account_by_gpu(per_hour: pl.DataFrame, jobs: pl.DataFrame, additive_cols: list[str], idle_policy: str,
                   energy_shares: pl.DataFrame | None = None,
                   time_cols: tuple[str, ...] = ()) -> tuple[pl.DataFrame, pl.DataFrame]:
    """account_to_jobs, plus the same amounts at GPU_KEYS (day, job_id, gpu_model, site): summed
    over the GPU models and sites, a (day, job_id)'s amounts are its report rows' amounts. With
    idle_policy "proportional" each job takes its report share of the day's idle amounts of every
    model and site, so a model's or site's amounts stay those of its own GPU-hours."""
    attributed = attribute_gpu_hours(per_hour, jobs, additive_cols, energy_shares, time_cols)
    grouped = group_by_job(attributed, additive_cols)
    by_gpu = (attributed.join(_gpu_keys(per_hour), on="gpu_uuid", how="left")
              .group_by(GPU_KEYS).agg([sum_known(c) for c in additive_cols]))
    if idle_policy != "proportional":
        return grouped, by_gpu.sort(GPU_KEYS, nulls_last=True)
    is_idle = pl.col("job_id") == UNALLOCATED
    job_rows = grouped.filter(~is_idle)
    idle = by_gpu.filter(is_idle)
    if job_rows.height and idle.height:
        weights = _spread_weights(job_rows, "energy_kwh").group_by(["day", "job_id"]).agg(pl.col("_w").sum())
        # a job that takes no share (w 0) gets no row: 0 would stand for its unknown energy
        moved = (weights.filter(pl.col("_w") != 0).join(idle.drop("job_id"), on="day", how="inner")
                 .with_columns([pl.col(c) * pl.col("_w") for c in additive_cols]).select(by_gpu.columns))
        kept = idle.join(job_rows.select("day").unique(), on="day", how="anti")
        by_gpu = (pl.concat([by_gpu.filter(~is_idle), moved, kept], how="vertical_relaxed")
                  .group_by(GPU_KEYS).agg([sum_known(c) for c in additive_cols]))
    return spread_unallocated(grouped, additive_cols), by_gpu.sort(GPU_KEYS, nulls_last=True)
