"""The demand charge: rate x the month's highest site demand, billed once a month.

A utility bills `demand_charge_usd_per_kw_month` x the highest demand (kW) the site's meter saw
in the month. A day's account carries the part of that bill the day added:

    charged_kw(day, site) = max(0, peak_kw(day) - the peak of the month's earlier days)
    demand_charge_usd     = rate x charged_kw, on the GPU-hours of the day's peak hour, pro rata
                            by their energy at the meter (the coincident-peak rule: who draws
                            at the peak pays for it); equally over them where none of their
                            energy was measured (the charge is still owed: `allocate`)

so the days of a month, accounted in date order, add up to exactly rate x the month's peak, and
the day that set or raised the peak pays for it. The month is the utility's: the local calendar
month of the site's time zone (its `[tco] site_prices` entry's, else `[tco] tariff_timezone`: the
`timezone` argument, which reports.accounts.tco gives per price source) that each demand interval
starts in (each hour, where demand is hourly), so the UTC day that holds a month's turn where the
site is has one row for each of its two months. In a zone off the hour (Asia/Kolkata +05:30,
Nepal +05:45, Adelaide +09:30) the turn falls inside a UTC hour: its quarter-hours after the turn
are the new month's peak, not the old one's (a 9 kW quarter-hour at 00:00 on 1 April in Kolkata,
18:30 UTC, had raised March to 9 kW and left April at 3), and that hour's GPU-hours pay both
months' peaks where both lie in it; an interval that itself holds the turn (30 minutes in Nepal:
the meter's intervals are UTC's) counts in the month it starts in. The earlier days' peaks are
read from rpt_demand_peak_daily (one row per day, site and billing month, written here). A day
accounted again after later days of its month were accounted leaves their charges computed against
the old peak; `tco_day` says so and names them (re-run them, in order, to restate).

Demand is billed on the utility's interval, `[tco] demand_interval_minutes` (15 or 30, a divisor
of 60): the month's peak is the highest average power over one such interval, above the highest
hourly average wherever the site's power swings within the hour (training jobs start, checkpoint,
stop: the demo's simulated fleet peaked at 19.86 kW over 15 minutes against 19.36 kW hourly, two
real 8xH200 servers at 11.63 against 11.20 kW). Site demand per interval: the facility meter's
energy over the part of the interval it covered / that time (fct_pue_hourly's own SQL run per
interval: one integration of the meter for the hour's energy and the bill's peak) when it covered at least `min_meter_coverage_ratio` of the
interval, in an hour whose PUE the accounts take (acct_pue_hours); any other interval takes its
hour's demand: the meter's average power over the part of the hour it covered (fct_pue_hourly)
when it covered at least `min_meter_coverage_ratio` of the hour, else the GPU-hours' energy at the
meter (IT x PUE) summed (NULL where none of it was measured: unknown, never 0; a day whose every
hour is unknown has no peak and no charge, NULL). An hour's demand is its highest interval's, and
the coincident-peak rule charges the GPU-hours of the hour that holds the day's peak interval. At
60 minutes, or where the meter's readings are gone (raw_facility_samples absent: said in a note),
demand is the hourly average, whose peak is a lower bound of the bill's; so is an hour without a
meter, whose power within the hour nothing measured; an hour's demand stands in for its intervals
the meter did not cover, not for a part of the hour in one month whose intervals it read whole (the
hour's average holds the other month's power). An hour the meter covered at a site-day with
GPU-hours counts even where no GPU was read in it (the collectors were down, the bill was not):
its charge falls on the fleet's unread GPU-hours of that hour, equally (reports.accounts.tco).

Each row records the interval it was taken over (demand_interval_minutes: 60 at a site whose meter
was not read per interval). A day whose billing month holds earlier days taken over another
interval (the setting changed within the month, a day re-run) is compared with their peaks all the
same, since they are the month's only ones (restating them would mean accounting those days again,
from readings that may be gone), and its account's notes name those days: the month's charges then
add up to rate x the highest of peaks of mixed intervals, which is neither bill (a day hourly at
4.6 kW, the next at 15 minutes at 6 kW: 69 + 21 = 90 USD, where the 15-minute bill is 135 and the
hourly one 69). Re-running the month from its first day, in order, at one interval restates it.

A GPU at no site ("unknown" beside known sites: reports.accounts.fleet_hours.unplaced) is on no
utility's meter: reports.accounts.tco leaves its GPU-hours out of site_hour_kw, so "unknown" has no
demand row, and `allocate` gives them a NULL charge (unknown, not 0; the day's notes name them).

The coincident-peak rule charges by the GPU-hours' energy over the whole hour that holds the peak
interval: it approximates each GPU's draw in that interval by its hour's average, exact where the
GPUs draw steadily through the hour. The accounts hold GPU-hours, not minutes, so a GPU that drew
only in the peak quarter-hour pays less than its part: 4 kW in a 6 kW quarter-hour beside a GPU at
a steady 2 kW (1 and 2 kWh in the hour) pays a third of the charge, not two thirds.

Taken by the UTC month, a peak in a month's first UTC hours that were still the month before where
the site is (00:00-04:00 UTC on the 1st in New York) raised the wrong month: in a review's case
19.50 + 195 USD were charged for a bill of 195 + 195. Rows written before the billing month was
kept (billing_month NULL) are read as their UTC day's month.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import duckdb
import polars as pl

from joulehouse.reports.accounts.attribution import sum_known
from joulehouse.reports.accounts.warehouse_io import HOUR, _to_utc, day_bounds, replace_report_day
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.sqlio import SqlFiles, ensure_columns, relation_exists

WAREHOUSE_SQL = SqlFiles("joulehouse.warehouse", "sql")

PEAK_TABLE = "rpt_demand_peak_daily"
# No facility meter: site demand is the GPU-hours' energy at the meter (IT x PUE).
NO_METER = pl.DataFrame(schema={"site": pl.String, "hour_at": pl.Datetime("us", "UTC"), "facility_kw": pl.Float64,
                                 "coverage_ratio": pl.Float64})
# No meter readings per demand interval (60 minutes, no raw_facility_samples): hourly demand.
NO_INTERVALS = pl.DataFrame(schema={"site": pl.String, "interval_at": HOUR, "hour_at": HOUR, "facility_kw": pl.Float64,
                                    "coverage_ratio": pl.Float64})


def billing_month(hour_at: pl.Expr, timezone: str) -> pl.Expr:
    """The first day of the local calendar month (in `timezone`, the tariff's) the hour starts in."""
    return hour_at.dt.convert_time_zone(timezone).dt.date().dt.truncate("1mo")


def day_billing_months(day: dt.date, timezone: str) -> list[dt.date]:
    """The billing months the UTC day's hours fall in: one, or two on the day of a month's turn."""
    zone = ZoneInfo(timezone)
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    return sorted({(start + dt.timedelta(hours=h)).astimezone(zone).date().replace(day=1) for h in (0, 23)})


def read_meter_intervals(con: duckdb.DuckDBPyConnection, day: dt.date, meter: pl.DataFrame, interval_minutes: int,
                         max_meter_gap_s: float | None, notes: list[str]) -> pl.DataFrame:
    """The facility meter's kW per `interval_minutes` of `day` (fct_pue_hourly's rule per interval) for
    site_hour_kw, every interval of the day at each site it read (facility_kw NULL and coverage_ratio 0
    where it has no reading); NO_INTERVALS at 60 minutes or where `meter` (acct_pue_hours) read no power.
    `max_meter_gap_s`: the build's [warehouse] max_meter_gap_s (None: its default), so that the
    intervals bridge the gaps fct_pue_hourly bridged. Appends to `notes` where the readings are gone."""
    if interval_minutes == 60 or meter.filter(pl.col("facility_kw").is_not_null()).is_empty():
        return NO_INTERVALS
    if not relation_exists(con, "raw_facility_samples"):
        notes.append(f"raw_facility_samples absent: the demand charge takes the facility meter's hourly averages, "
                     f"not its {interval_minutes}-minute ones (the bill's peak is higher)")
        return NO_INTERVALS
    gap_s = WarehouseSettings().max_meter_gap_s if max_meter_gap_s is None else max_meter_gap_s
    interval_s = interval_minutes * 60
    rows = con.sql(WAREHOUSE_SQL.body("fct_pue_hourly"), params={
        "day": day, "margin_s": float(gap_s), "max_meter_gap_s": float(gap_s), "meter_bucket_s": interval_s}).pl()
    covered_s = pl.col("coverage_ratio") * interval_s
    rows = _to_utc(rows.select(
        "site", pl.col("hour_at").alias("interval_at"),
        pl.when(covered_s > 0).then(pl.col("facility_energy_kwh") * 3600 / covered_s).alias("facility_kw"),
        "coverage_ratio"), ["interval_at"])
    # the SQL has no row for an interval without a reading: site_hour_kw counts an hour's unread
    # intervals (they take the hour's demand), so each site gets every interval of the day
    start, end = day_bounds(day)
    grid = pl.datetime_range(start, end, dt.timedelta(minutes=interval_minutes), closed="left", time_unit="us",
                             time_zone="UTC", eager=True).alias("interval_at").to_frame()
    return (rows.select("site").unique().join(grid, how="cross").join(rows, on=["site", "interval_at"], how="left")
            .with_columns(pl.col("interval_at").dt.truncate("1h").alias("hour_at"),
                          pl.col("coverage_ratio").fill_null(0.0))  # nothing read: none of it covered
            .select(NO_INTERVALS.columns))


def site_hour_kw(gpu_hours: pl.DataFrame, meter: pl.DataFrame, min_meter_coverage_ratio: float,
                 timezone: str = "UTC", meter_intervals: pl.DataFrame = NO_INTERVALS) -> pl.DataFrame:
    """(day, site, hour_at, billing_month, site_kw, peak_basis) for every site-hour with GPU-hours,
    and every hour the meter covered enough of (the hour, or one of its `meter_intervals`) at a
    site-day with GPU-hours: site_kw the hour's highest demand interval's kW (see the module
    docstring; the hour's where `meter_intervals` has none), peak_basis what measured it;
    billing_month the local month in `timezone` the hour starts in, or, for the part of an hour
    whose intervals start in another month (a zone off the hour: +05:30, +05:45, +09:30), a second
    row of that month's intervals. `meter_intervals`: every interval of the hours it holds
    (read_meter_intervals)."""
    hour = pl.col("hour_at").cast(HOUR)
    hour_month = billing_month(pl.col("hour_at"), timezone).alias("billing_month")
    gpu = gpu_hours.group_by(["day", "site", "hour_at"]).agg(sum_known("facility_energy_kwh").alias("_gpu_kw"))
    usable = (meter.filter(pl.col("facility_kw").is_not_null() & (pl.col("coverage_ratio") >= min_meter_coverage_ratio))
              .select("site", hour, "facility_kw").unique(["site", "hour_at"])
              .with_columns(pl.col("hour_at").dt.date().alias("day")))
    read = pl.col("facility_kw").is_not_null() & (pl.col("coverage_ratio") >= min_meter_coverage_ratio)
    # only in hours whose PUE the accounts take: acct_pue_hours leaves out a meter that read less
    # than the IT load (a feed it does not see), and the hour's demand falls back to IT x PUE
    parts = (meter_intervals.join(meter.select("site", hour), on=["site", "hour_at"], how="semi")
             .with_columns(billing_month(pl.col("interval_at"), timezone).alias("billing_month"), read.alias("_read"))
             .group_by("site", "hour_at", "billing_month")
             .agg(pl.col("facility_kw").filter("_read").max().alias("_interval_kw"),
                  pl.col("_read").all().alias("_all_read"))
             .filter(pl.col("_interval_kw").is_not_null())
             .with_columns(pl.col("hour_at").dt.date().alias("day")))
    # a metered hour of a site-day without a GPU reading (the collectors were down) is still on the
    # bill: left out, a 200 kW hour the meter saw lost to a 100 kW hour the GPUs were read in
    metered = pl.concat([usable.select("day", "site", "hour_at", hour_month),
                         parts.select("day", "site", "hour_at", "billing_month")])
    metered_only = metered.join(gpu.select("day", "site").unique(), on=["day", "site"], how="semi")
    rows = pl.concat([gpu.select("day", "site", hour).with_columns(hour_month), metered_only]).unique()
    joined = (rows.join(gpu.with_columns(hour), on=["day", "site", "hour_at"], how="left")
              .join(usable.drop("day"), on=["site", "hour_at"], how="left")
              .join(parts.drop("day"), on=["site", "hour_at", "billing_month"], how="left"))
    hour_kw = pl.coalesce("facility_kw", "_gpu_kw")
    # an interval the meter did not cover takes the hour's demand: the part's peak is the higher.
    # A part read whole does not: in an hour split between two months the hour's average is
    # partly the other month's power
    all_read = pl.col("_all_read").fill_null(False)
    interval_sets_it = pl.col("_interval_kw").is_not_null() & (hour_kw.is_null() | (pl.col("_interval_kw") >= hour_kw))
    return joined.select(
        "day", "site", "hour_at", "billing_month",
        pl.when(all_read).then(pl.col("_interval_kw")).otherwise(pl.max_horizontal("_interval_kw", hour_kw))
        .alias("site_kw"),
        pl.when(all_read | pl.col("facility_kw").is_not_null() | interval_sets_it).then(pl.lit("facility_meter"))
        .otherwise(pl.lit("gpu_it_x_pue")).alias("peak_basis"),
    )


def day_peaks(site_hours: pl.DataFrame, month_peak_before_kw: dict[tuple[str, dt.date], float],
              rate_usd_per_kw_month: float) -> pl.DataFrame:
    """One row per (day, site, billing_month): the peak hour (the earliest of equal ones), its kW
    and basis, the billing month's peak before the day, the kW the day adds to it and what that
    costs. Over several days (a planned run: reports.accounts.estimate) the days are charged in
    date order, each against its billing month's earlier days, a new month from zero;
    `month_peak_before_kw` {(site, billing month): kW} is the peak of the months before the first
    day (the warehouse's earlier days: month_peak_before)."""
    keys = ["day", "site", "billing_month"]
    peaks = (site_hours.sort([*keys, "site_kw", "hour_at"], descending=[False, False, False, True, False],
                             nulls_last=True)
             .group_by(keys, maintain_order=True).first()
             .rename({"hour_at": "peak_hour_at", "site_kw": "peak_kw"}).sort(keys))
    before = pl.DataFrame({"site": [site for site, _ in month_peak_before_kw],
                           "billing_month": [month for _, month in month_peak_before_kw],
                           "_given_kw": list(month_peak_before_kw.values())},
                          schema={"site": pl.String, "billing_month": pl.Date, "_given_kw": pl.Float64})
    return (peaks.join(before, on=["site", "billing_month"], how="left")
            .with_columns(pl.max_horizontal(pl.col("peak_kw").cum_max().shift(1).over(["site", "billing_month"]),
                                            pl.col("_given_kw")).alias("month_peak_before_kw"))
            .with_columns((pl.col("peak_kw") - pl.col("month_peak_before_kw").fill_null(0.0)).clip(lower_bound=0.0)
                          .alias("charged_kw"))
            .with_columns((pl.col("charged_kw") * rate_usd_per_kw_month).alias("demand_charge_usd"))
            .select("day", "site", "billing_month", "peak_hour_at", "peak_kw", "peak_basis", "month_peak_before_kw",
                    "charged_kw", "demand_charge_usd"))


def allocate(gpu_hours: pl.DataFrame, peaks: pl.DataFrame, timezone: str = "UTC") -> pl.DataFrame:
    """gpu_hours with demand_charge_usd: each site-day's charge (per billing month, in `timezone`)
    on its peak hour's GPU-hours, pro rata by facility_energy_kwh (0 elsewhere; NULL on every hour
    of a site-day's billing month whose charge is unknown); and demand_charge_other_month_usd, the
    part of it billed in a month other than the UTC day's (the peak's local month is another: the
    UTC day of a month's turn), so that a monthly roll-up bills each row's own hours in their month.
    An hour that holds two months' peaks (a zone off the hour) charges its GPU-hours both.

    Where the peak hour's GPU-hours have no measured energy, or it sums to 0 (the facility meter
    set the peak while the GPUs' readings were too sparse to give their energy), the charge is
    split equally over them: each row is one GPU-hour, so this is by GPU time held in the hour.
    The charge was incurred (rpt_demand_peak_daily records it) and the GPUs in the peak hour are
    who drew it; dropping it would make the accounts disagree with the bill. Either way the
    allocated charges of a site-day add up to its demand_charge_usd. A GPU-hour without measured
    energy beside measured ones takes no share: the measured ones are the peak's known draw."""
    hour = ["day", "site", "hour_at"]
    energy = pl.col("facility_energy_kwh")
    hour_kwh = energy.sum().over(hour)
    share = (pl.when(hour_kwh > 0).then(energy.fill_null(0.0) / hour_kwh)
             .otherwise(1.0 / pl.len().over(hour)))
    usd = pl.col("demand_charge_usd")
    # by the peak's hour, whatever month the hour starts in: in a zone off the hour (+05:30) a
    # peak interval after the month's turn is the next month's, in an hour that starts in this one
    other_month = pl.col("billing_month") != pl.col("day").dt.truncate("1mo")
    charges = (peaks.filter(usd.is_not_null())
               .select("day", "site", pl.col("peak_hour_at").cast(gpu_hours.schema["hour_at"]).alias("hour_at"),
                       usd.alias("_site_usd"), pl.when(other_month).then(usd).otherwise(0.0).alias("_other_month_usd"))
               .group_by(hour).agg(pl.col("_site_usd", "_other_month_usd").sum()))
    # a site-day whose charge is unknown (no hour's demand known) charges NULL, not 0
    known = peaks.select("day", "site", pl.col("billing_month").alias("_billing_month"),
                         usd.is_not_null().alias("_known"))
    charged = (gpu_hours.with_columns(billing_month(pl.col("hour_at"), timezone).alias("_billing_month"))
               .join(known, on=["day", "site", "_billing_month"], how="left")
               .join(charges, on=hour, how="left"))
    parts = {"demand_charge_usd": "_site_usd", "demand_charge_other_month_usd": "_other_month_usd"}
    return (charged.with_columns(pl.when(pl.col("_known").fill_null(False)).then(pl.col(part).fill_null(0.0) * share)
                                 .alias(name) for name, part in parts.items())
            .drop("_billing_month", "_known", *parts.values()))


def allocated_demand_charge(gpu_hours: pl.DataFrame, meter: pl.DataFrame, min_meter_coverage_ratio: float,
                            month_peak_before_kw: dict[tuple[str, dt.date], float],
                            rate_usd_per_kw_month: float, timezone: str = "UTC") -> tuple[pl.DataFrame, pl.DataFrame]:
    """The demand charge from hourly energy at the meter to the GPU-hours that pay it: (gpu_hours
    with demand_charge_usd, the day_peaks rows). gpu_hours: day, site, hour_at, facility_energy_kwh.
    The one rule the daily accounts (reports.accounts.tco) and the planning estimate
    (reports.accounts.estimate) both charge by, so that an estimate of a run costs what the
    accounts would charge for the same hourly power. `timezone`: the tariff's (its billing months)."""
    peaks = day_peaks(site_hour_kw(gpu_hours, meter, min_meter_coverage_ratio, timezone), month_peak_before_kw,
                      rate_usd_per_kw_month)
    return allocate(gpu_hours, peaks, timezone), peaks


def with_interval_minutes(peaks: pl.DataFrame, meter_intervals: pl.DataFrame, interval_minutes: int) -> pl.DataFrame:
    """`peaks` with demand_interval_minutes, the interval each site's demand was taken over:
    `interval_minutes` at a site whose meter `meter_intervals` read, else 60 (its hourly averages)."""
    read_sites = meter_intervals.filter(pl.col("facility_kw").is_not_null())["site"].unique().to_list()
    return peaks.with_columns(pl.when(pl.col("site").is_in(read_sites)).then(pl.lit(interval_minutes))
                              .otherwise(pl.lit(60)).cast(pl.Int32).alias("demand_interval_minutes"))


def month_peak_before(con: duckdb.DuckDBPyConnection, day: dt.date, timezone: str = "UTC",
                      ) -> dict[tuple[str, dt.date], float]:
    """{(site, billing month): the highest peak kW of the days before `day` in each billing month
    of `day`} from rpt_demand_peak_daily, whatever interval each was taken over (the module
    docstring)."""
    if not _ensure_columns(con):
        return {}
    rows = con.execute(f"SELECT site, {_BILLING_MONTH}, max(peak_kw) FROM {PEAK_TABLE} WHERE day < ? "
                       f"AND {_BILLING_MONTH} IN (SELECT unnest(?::DATE[])) GROUP BY ALL",
                       [day, day_billing_months(day, timezone)]).fetchall()
    return {(site, month): float(kw) for site, month, kw in rows if kw is not None}


def later_days_accounted(con: duckdb.DuckDBPyConnection, day: dt.date, timezone: str = "UTC") -> list[dt.date]:
    """Days after `day` in its billing months that already have demand rows (their charges assumed
    this day's old peak)."""
    if not _ensure_columns(con):
        return []
    rows = con.execute(f"SELECT DISTINCT day FROM {PEAK_TABLE} WHERE day > ? "
                       f"AND {_BILLING_MONTH} IN (SELECT unnest(?::DATE[])) ORDER BY day",
                       [day, day_billing_months(day, timezone)]).fetchall()
    return [r[0] for r in rows]


def other_interval_notes(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[str]:
    """A note where `day`'s stored rows share a billing month with earlier days' rows taken over
    another interval (or one not recorded): their peaks were compared all the same."""
    if not _ensure_columns(con):
        return []
    rows = con.execute(f"WITH kept AS (SELECT site, day, {_BILLING_MONTH} AS month, demand_interval_minutes AS minutes "
                       f"FROM {PEAK_TABLE}) SELECT DISTINCT earlier.day, earlier.site, earlier.minutes, this.minutes "
                       "FROM kept AS this JOIN kept AS earlier USING (site, month) WHERE this.day = ? "
                       "AND earlier.day < this.day AND earlier.minutes IS DISTINCT FROM this.minutes ORDER BY ALL",
                       [day]).fetchall()
    if not rows:
        return []

    def taken(minutes: int | None) -> str:
        return "not recorded (written before it was kept)" if minutes is None else f"{minutes}-minute"

    now = "; ".join(sorted({f"{site}: {taken(minutes)}" for _, site, _, minutes in rows}))
    earlier = "; ".join(f"{earlier_day} at {site}: {taken(minutes)}" for earlier_day, site, minutes, _ in rows)
    return [f"demand interval: this day's peaks ({now}) were compared with those of earlier days of their billing "
            f"month taken over another interval ({earlier}): the month's charges add up to rate x the highest of "
            "peaks of mixed intervals, not to its bill at one; re-run the month from its first day, in order, at "
            "one [tco] demand_interval_minutes to restate it"]


# A row's billing month; rows from before the column was kept are their UTC day's month.
_BILLING_MONTH = "coalesce(billing_month, date_trunc('month', day))::DATE"


def _ensure_columns(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether rpt_demand_peak_daily exists; a table from before billing_month or
    demand_interval_minutes gets the column (NULL in its rows)."""
    if not relation_exists(con, PEAK_TABLE):
        return False
    ensure_columns(con, PEAK_TABLE, {"billing_month": "DATE", "demand_interval_minutes": "INTEGER"})
    return True


def store_peaks(con: duckdb.DuckDBPyConnection, day: dt.date, peaks: pl.DataFrame) -> int:
    """Replace `day`'s rows of rpt_demand_peak_daily by `peaks` (with_interval_minutes's)."""
    _ensure_columns(con)  # an older table kept every column but the newer ones
    return replace_report_day(con, PEAK_TABLE, day, peaks)
