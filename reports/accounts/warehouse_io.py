"""I/O edge of the accounts: read one day's inputs from the warehouse, write report rows back.

Everything here talks to DuckDB; everything the accounts compute is in pure functions
elsewhere. Optional relations (fct_node_energy_hourly, fct_pue_hourly, dim_gpu, the jobs) that do
not exist yield an empty frame and a note saying what was assumed instead.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from joulehouse.collectors.settings import MAX_PUE
from joulehouse.models.day_jobs import JOB_MAX_DAYS, JOBS_RELATIONS, stage_day_jobs
from joulehouse.reports.accounts.attribution import JOB_COLUMNS, empty_jobs
from joulehouse.reports.accounts.fleet_hours import FLEET_COLUMNS, unmetered_fleet_hours
from joulehouse.warehouse.sqlio import SqlFiles, relation_exists, replace_day_rows
from joulehouse.reports.accounts.it_energy_basis import apply_it_energy_basis, basis_note

UTC = dt.timezone.utc
SQL = SqlFiles("joulehouse.reports.accounts", "sql")
load_sql = SQL.text
HOUR = pl.Datetime("us", "UTC")
# The report tables this module may replace a day in (a fixed allow-list: table names cannot be
# bound parameters). Each maps to the .sql files that create it and the views over it, run in
# order.
REPORT_TABLES = {
    "rpt_carbon_daily": ("rpt_carbon_daily", "rpt_carbon_monthly"),
    "rpt_tco_daily": ("rpt_tco_daily", "rpt_tco_monthly"),
    "rpt_carbon_by_gpu_daily": ("rpt_carbon_by_gpu_daily",),
    "rpt_tco_by_gpu_daily": ("rpt_tco_by_gpu_daily",),
    "rpt_demand_peak_daily": ("rpt_demand_peak_daily",),
    "rpt_context_grid_hourly": ("rpt_context_grid_hourly", "rpt_context_price_hourly", "rpt_context_hourly"),
    "rpt_context_price_hourly": ("rpt_context_grid_hourly", "rpt_context_price_hourly", "rpt_context_hourly"),
    "rpt_shift_carbon_daily": ("rpt_shift_carbon_daily", "rpt_shift_cost_daily", "rpt_shift_opportunity_daily"),
    "rpt_shift_cost_daily": ("rpt_shift_carbon_daily", "rpt_shift_cost_daily", "rpt_shift_opportunity_daily"),
}


def day_bounds(day: dt.date) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + dt.timedelta(days=1)


def _to_utc(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """DuckDB returns TIMESTAMPTZ in the session's time zone: bring it back to UTC, in us."""
    fixes = []
    for c in columns:
        if c in frame.columns:
            dtype = frame.schema[c]
            expr = pl.col(c)
            if isinstance(dtype, pl.Datetime) and dtype.time_zone is None:
                expr = expr.dt.replace_time_zone("UTC")
            fixes.append(expr.dt.convert_time_zone("UTC").dt.cast_time_unit("us").alias(c))
    return frame.with_columns(fixes) if fixes else frame


@dataclass
class DayInputs:
    """One day's inputs. gpu_hours has the metered GPU-hours with site, region, rack and the
    inventory's embodied_kgco2e / lifetime_years / purchase_price_usd (NULL where unknown);
    its energy_kwh is the IT energy (reports.accounts.it_energy_basis), gpu_energy_kwh the board energy and
    it_energy_basis 'node_ipmi' or 'gpu_only'. jobs has JOB_COLUMNS plus `deferrable`.
    unmetered_hours: the hours of the day's fleet without a reading (reports.accounts.fleet_hours),
    with the same inventory columns and no energy: they carry capital and embodied carbon only.
    energy_shares: the jobs' measured shares of each GPU-hour's energy (hour_at, gpu_uuid, job_id,
    energy_share_ratio; the models' fct_job_energy_hourly), None where the day has none."""

    day: dt.date
    gpu_hours: pl.DataFrame
    pue: pl.DataFrame
    jobs: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    basis_counts: dict[str, int] = field(default_factory=dict)
    unmetered_hours: pl.DataFrame | None = None
    energy_shares: pl.DataFrame | None = None


def read_day_inputs(con, day: dt.date, fallback_region: str, min_node_coverage_ratio: float = 0.9, *,
                    job_max_days: int = JOB_MAX_DAYS) -> DayInputs:
    """Read fct_gpu_energy_hourly for `day` and whatever optional relations exist; where the
    server's BMC energy is usable (reports.accounts.it_energy_basis) it becomes the GPU-hours' IT energy.
    The jobs are those the efficiency step measured shares for: models.day_jobs, under the same
    `job_max_days` (models.job_max_days) as build_efficiency was given."""
    start, end = day_bounds(day)
    notes: list[str] = []
    if not relation_exists(con, "fct_gpu_energy_hourly"):
        raise LookupError("relation fct_gpu_energy_hourly does not exist: build the warehouse for this day first")
    gpu_hours = _to_utc(con.sql(load_sql("acct_gpu_hours"), params={"day": day}).pl(), ["hour_at"])
    gpu_hours = gpu_hours.with_columns(pl.col("day").cast(pl.Date), pl.col("energy_kwh").cast(pl.Float64))
    if relation_exists(con, "fct_node_energy_hourly"):
        node_hours = _to_utc(con.sql(load_sql("acct_node_hours"), params={"day": day}).pl(), ["hour_at"])
    else:
        node_hours = pl.DataFrame(schema={"hour_at": HOUR, "host": pl.String, "energy_kwh": pl.Float64,
                                          "coverage_ratio": pl.Float64})
        notes.append("fct_node_energy_hourly absent: IT energy is GPU board energy only (gpu_only)")
    if relation_exists(con, "fct_pue_hourly"):
        pue = _to_utc(con.sql(load_sql("acct_pue_hours"), params={"day_start": start, "day_end": end,
                                                                  "max_pue": MAX_PUE}).pl(), ["hour_at"])
    else:
        pue = pl.DataFrame(schema={"hour_at": HOUR, "site": pl.String, "pue": pl.Float64,
                                   "facility_kw": pl.Float64, "coverage_ratio": pl.Float64})
        notes.append("fct_pue_hourly absent: default PUE used for every hour")

    inventory_cols = {"site": pl.String, "region": pl.String, "rack": pl.String, "embodied_kgco2e": pl.Float64,
                      "lifetime_years": pl.Float64, "purchase_price_usd": pl.Float64, "purchased_on": pl.Date}
    if relation_exists(con, "dim_gpu"):
        raw_dim = con.sql(load_sql("acct_dim_gpu")).pl()
        dim = raw_dim.select(["gpu_uuid"] + [
            (pl.col(c).cast(t) if c in raw_dim.columns else pl.lit(None, dtype=t)).alias(c) for c, t in inventory_cols.items()
        ] + [(pl.col("gpu_model").cast(pl.String) if "gpu_model" in raw_dim.columns else pl.lit(None, dtype=pl.String))
             .alias("inventory_gpu_model")]).unique("gpu_uuid")
        # A dim_gpu without in_inventory (an older warehouse, a hand-made one) is all inventory.
        fleet = raw_dim.select([(pl.col(c).cast(t) if c in raw_dim.columns else pl.lit(None, dtype=t)).alias(c)
                                for c, t in FLEET_COLUMNS.items()]).unique("gpu_uuid")
    else:
        dim = pl.DataFrame(schema={"gpu_uuid": pl.String, **inventory_cols, "inventory_gpu_model": pl.String})
        fleet = pl.DataFrame(schema=FLEET_COLUMNS)
        notes.append("dim_gpu absent: settings defaults used for site, region, embodied carbon and capital")
    unmetered = unmetered_fleet_hours(gpu_hours, fleet, day)
    # after the fleet's unread GPU-hours are known: a server's BMC energy is never split among only
    # the GPUs that were read
    gpu_hours, basis_counts = apply_it_energy_basis(gpu_hours, node_hours, min_node_coverage_ratio,
                                                    unread=unmetered.select("hour_at", "host"))
    if gpu_hours.height and node_hours.height:
        notes.append(basis_note(basis_counts, min_node_coverage_ratio))
    # Without an inventory site, a warehouse with exactly one PUE site is that site.
    sites = pue["site"].unique().to_list()
    default_site = sites[0] if len(sites) == 1 else "unknown"

    def with_inventory(hours: pl.DataFrame) -> pl.DataFrame:
        # inventory_site: the inventory's own site (NULL outside it), before any default fills `site`;
        # the model the readings name, else the inventory's (one GPU's unread hours took the inventory's
        # and its read ones none: two embodied rates in one day, its carbon filed under no model)
        hours = hours.join(dim, on="gpu_uuid", how="left").with_columns(pl.col("site").alias("inventory_site"))
        model = (pl.coalesce("gpu_model", "inventory_gpu_model") if "gpu_model" in hours.columns
                 else pl.col("inventory_gpu_model"))
        return hours.with_columns(
            pl.col("site").fill_null(default_site), pl.col("region").fill_null(fallback_region),
            pl.col("rack").fill_null(pl.col("host")), model.alias("gpu_model"),
        ).drop("inventory_gpu_model")

    gpu_hours, unmetered = with_inventory(gpu_hours), with_inventory(unmetered)
    assumed = sorted(set(gpu_hours.filter(pl.col("inventory_site").is_null())["gpu_uuid"].to_list())) \
        if default_site != "unknown" else []
    if assumed:  # its demand charge, contracts and price are then that site's: say it was assumed
        notes.append(f"{len(assumed)} GPU(s) the inventory places at no site ({', '.join(assumed[:3])}"
                     f"{', ...' if len(assumed) > 3 else ''}) taken to be at {default_site}, the only site with a "
                     "facility meter that day: its demand charge, contracts and prices are theirs")
    if unmetered.height:
        notes.append(f"{unmetered.height} GPU-hours of GPUs in the fleet had no reading: charged capital, operations "
                     "and embodied carbon (calendar time in the fleet), no energy (unmetered_gpu_hours)")

    if stage_day_jobs(con, "acct_input_jobs", day, job_max_days) is not None:
        jobs = _to_utc(con.sql(load_sql("acct_jobs")).pl(), ["started_at", "ended_at"])
        jobs = jobs.select([(pl.col(c).cast(t) if c in jobs.columns else pl.lit(None, dtype=t)).alias(c)
                            for c, t in {**JOB_COLUMNS, "deferrable": pl.Boolean}.items()])
    else:
        jobs = empty_jobs().with_columns(pl.lit(None, dtype=pl.Boolean).alias("deferrable"))
        notes.append(f"no jobs relation ({', '.join(JOBS_RELATIONS)}): all energy is on the unallocated line")
    return DayInputs(day=day, gpu_hours=gpu_hours, pue=pue, jobs=jobs, notes=notes, basis_counts=basis_counts,
                     unmetered_hours=unmetered, energy_shares=_energy_shares(con, day, jobs, notes))


def _energy_shares(con, day: dt.date, jobs: pl.DataFrame, notes: list[str]) -> pl.DataFrame | None:
    """The jobs' measured shares of the day's GPU-hours' energy, or None (then energy is split
    among jobs by time held, and a note says so)."""
    shares = None
    if relation_exists(con, "fct_job_energy_hourly"):
        shares = _to_utc(con.sql(load_sql("acct_job_energy_shares"), params={"day": day}).pl(), ["hour_at"])
    if jobs.height and (shares is None or shares.height == 0):
        notes.append("no measured job energy shares for the day (fct_job_energy_hourly, the efficiency step): "
                     "energy split among jobs by time held")
    return shares if shares is not None and shares.height else None


def replace_report_day(con, table: str, day: dt.date, rows: pl.DataFrame,
                       together: dict[str, pl.DataFrame] | None = None) -> int:
    """Create `table` (and the views over it) if needed, then replace `day`'s rows with the
    rows of `rows` that belong to `day`, in one transaction. `together` {table: rows}: more report
    tables whose day is replaced in the same transaction (all change or none does). Returns the
    rows of `rows`."""
    tables = {table: rows, **(together or {})}
    for name in tables:
        if name not in REPORT_TABLES:
            raise ValueError(f"report table {name!r}: expected one of {sorted(REPORT_TABLES)}")
        for sql_name in REPORT_TABLES[name]:
            con.execute(load_sql(sql_name))
    replace_day_rows(con, day, {name: frame.select(con.table(name).columns).filter(pl.col("day") == day)
                                for name, frame in tables.items()})
    return rows.height


@dataclass
class PreparedDay:
    """A day's inputs as both accounts start from: valid jobs split from those set aside, and
    the GPU-hours with the PUE of their site and hour (or the default, counted)."""

    inputs: DayInputs
    jobs: pl.DataFrame
    quarantined_jobs: int
    gpu_hours: pl.DataFrame
    pue_defaulted: int
    notes: list[str]

    @property
    def unmetered_hours(self) -> pl.DataFrame | None:
        return self.inputs.unmetered_hours

    @property
    def energy_shares(self) -> pl.DataFrame | None:
        return self.inputs.energy_shares

    def has_hours_to_account(self, metered: pl.DataFrame, calendar_amounts: str) -> bool:
        """True when the day has GPU-hours to account: `metered` (the GPU-hours read, with their
        context) or the fleet's unread ones. A note says when only the unread hours are, carrying
        `calendar_amounts` (what an hour in the fleet costs whatever it drew), or when none is."""
        unread = self.unmetered_hours is not None and self.unmetered_hours.height > 0
        if metered.height:
            return True
        day = self.inputs.day
        if unread:
            self.notes.append(f"no metered GPU-hours on {day}: {calendar_amounts} of the fleet's hours only")
            return True
        self.notes.append(f"no metered GPU-hours on {day}: nothing to account")
        return False


def prepare_day(con, day: dt.date, settings, job_max_days: int = JOB_MAX_DAYS) -> PreparedDay:
    """read_day_inputs, then set invalid jobs aside and attach PUE, saying in notes what was done.
    `settings`: CarbonSettings or TcoSettings, whose region, node_energy_min_coverage_ratio and
    default_pue it reads (the two accounts start a day alike); `job_max_days`: models.job_max_days."""
    from joulehouse.reports.accounts.attribution import split_valid_jobs
    from joulehouse.reports.accounts.hour_factors import attach_pue

    default_pue = settings.default_pue
    inputs = read_day_inputs(con, day, settings.region, settings.node_energy_min_coverage_ratio,
                             job_max_days=job_max_days)
    notes = list(inputs.notes)
    jobs, quarantined = split_valid_jobs(inputs.jobs)
    if quarantined.height:
        notes.append(f"{quarantined.height} job rows set aside: " + "; ".join(sorted(set(quarantined["reason"]))))
    with_pue, pue_defaulted = attach_pue(inputs.gpu_hours, inputs.pue, default_pue)
    if pue_defaulted:
        notes.append(f"{pue_defaulted} GPU-hours without a measured PUE used default_pue={default_pue}")
    return PreparedDay(inputs, jobs, quarantined.height, with_pue, pue_defaulted, notes)
