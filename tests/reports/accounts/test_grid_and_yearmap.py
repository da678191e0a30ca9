"""Grid intensity loaders on the real reference files, and the year-mapping rule."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from joulehouse.reports.accounts.grid import GCO2E_PER_KWH_PER_LB_PER_MWH, GridFileError, load_intensity_file, intensity_for_region
from joulehouse.reports.accounts.yearmap import map_to_target_hours, rule_counts

UTC = dt.timezone.utc


def hours(start: dt.datetime, n: int) -> pl.Series:
    return pl.Series([start + dt.timedelta(hours=i) for i in range(n)]).cast(pl.Datetime("us", "UTC"))


def test_lbs_per_mwh_conversion_constant():
    # 1 lb = 453.59237 g and 1 MWh = 1000 kWh, so 1 lb/MWh = 0.4536 g/kWh.
    assert GCO2E_PER_KWH_PER_LB_PER_MWH == pytest.approx(0.4536, abs=1e-4)


def test_electricitymaps_has_every_hour_of_2022_and_both_bases(shared_data):
    path = shared_data / "grid/electricitymaps_FR_2022_hourly.csv"
    direct = load_intensity_file(path, basis="direct")
    lca = load_intensity_file(path, basis="lca")
    assert direct.height == 8760 and direct["hour_at"].dt.year().unique().to_list() == [2022]
    # dd/mm/yyyy: after January's 744 hours comes "01/02/2022 00:00", which is 1 February
    # (read as mm/dd it would be 2 January and the series would not be in time order).
    assert direct["hour_at"][744] == dt.datetime(2022, 2, 1, tzinfo=UTC)
    # Life-cycle includes upstream emissions, so it is never below the direct figure.
    joined = direct.join(lca, on="hour_at", suffix="_lca")
    assert (joined["intensity_gco2e_per_kwh_lca"] >= joined["intensity_gco2e_per_kwh"]).all()
    assert direct["renewable_pct"].null_count() == 0


def test_watttime_five_minute_moer_is_converted_and_averaged_hourly(shared_data):
    path = shared_data / "grid/watttime_moer_CAISO_NORTH_5min_2023-11.csv"
    raw = pl.read_csv(path)
    first_hour_lbs = raw["value"][:12].mean()
    hourly = load_intensity_file(path, region="CAISO_NORTH")
    assert hourly["samples_n"][0] == 12
    assert hourly["intensity_gco2e_per_kwh"][0] == pytest.approx(first_hour_lbs * 0.45359237)
    assert hourly["hour_at"].is_sorted() and hourly["hour_at"].n_unique() == hourly.height
    # WattTime gives no renewable share: unknown (NULL), not 0/0 = NaN, which read as "no premium"
    assert hourly["renewable_pct"].null_count() == hourly.height


def test_miso_half_hourly_file_loads_with_its_location(shared_data):
    """Its readings start at :20 and :50, so an hour holds 20 minutes of one, 30 of the next and 10
    of the third: counted as readings, each hour was a shifted mix (up to 2.6% off)."""
    path = shared_data / "grid/watttime_moer_MISO_MASON_CITY_2022-10_30min_from_zeus.csv"
    frame = load_intensity_file(path)
    assert frame["region"].unique().to_list() == ["MISO_MASON_CITY"]
    assert (frame["samples_n"] <= 3).all() and frame["intensity_gco2e_per_kwh"].min() > 0
    values = dict(pl.read_csv(path).select("timestamp", "value").iter_rows())
    by_hand = (20 * values["2022-10-20T06:50:00+00:00"] + 30 * values["2022-10-20T07:20:00+00:00"]
               + 10 * values["2022-10-20T07:50:00+00:00"]) / 60 * 0.45359237
    seven = frame.filter(pl.col("hour_at") == dt.datetime(2022, 10, 20, 7, tzinfo=UTC))
    assert seven["intensity_gco2e_per_kwh"][0] == pytest.approx(by_hand, rel=1e-12)


def test_each_hour_is_the_mean_over_the_time_each_reading_holds(tmp_path):
    """Hourly readings of a +05:30 zone: each UTC hour is half of one and half of the next (taken
    by its start, 19:00Z read 200 for 150). Uneven readings weigh their minutes; a timestamp given
    twice is one reading; a gap is not bridged."""
    own = tmp_path / "ist.csv"
    own.write_text("at,region,gco2e_per_kwh\n" + "".join(
        f"2026-01-01T{h:02d}:00+05:30,IN,{v}\n" for h, v in ((0, 100), (1, 200), (2, 300), (3, 400))))
    frame = load_intensity_file(own)
    assert frame.select("hour_at", "intensity_gco2e_per_kwh").rows() == [
        (dt.datetime(2025, 12, 31, 18, 0, tzinfo=UTC), 100.0), (dt.datetime(2025, 12, 31, 19, 0, tzinfo=UTC), 150.0),
        (dt.datetime(2025, 12, 31, 20, 0, tzinfo=UTC), 250.0), (dt.datetime(2025, 12, 31, 21, 0, tzinfo=UTC), 350.0),
        (dt.datetime(2025, 12, 31, 22, 0, tzinfo=UTC), 400.0)]
    uneven = tmp_path / "uneven.csv"
    uneven.write_text("at,region,gco2e_per_kwh\n2026-01-01T10:00Z,XX,100\n2026-01-01T10:30Z,XX,200\n"
                      "2026-01-01T10:45Z,XX,300\n2026-01-01T10:45Z,XX,300\n2026-01-01T11:00Z,XX,50\n"
                      "2026-01-01T15:00Z,XX,70\n")
    hours = dict(load_intensity_file(uneven).select("hour_at", "intensity_gco2e_per_kwh").iter_rows())
    assert hours[dt.datetime(2026, 1, 1, 10, tzinfo=UTC)] == pytest.approx((30 * 100 + 15 * 200 + 15 * 300) / 60)
    assert dt.datetime(2026, 1, 1, 12, tzinfo=UTC) not in hours, "the gap to 15:00 is no reading"


def test_users_own_format_and_its_errors(tmp_path):
    good = tmp_path / "mine.csv"
    good.write_text("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,XX,100\n2026-01-01T00:30Z,XX,200\n")
    frame = load_intensity_file(good)
    assert frame.select("region", "intensity_gco2e_per_kwh", "samples_n").row(0) == ("XX", 150.0, 2)
    bad = tmp_path / "bad.csv"
    bad.write_text("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,XX,-5\n")
    with pytest.raises(GridFileError, match="negative"):
        load_intensity_file(bad)
    bad.write_text("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,XX,1e300\n")
    with pytest.raises(GridFileError, match="above 5,000"):
        load_intensity_file(bad)
    with pytest.raises(GridFileError, match="does not exist"):
        load_intensity_file(tmp_path / "none.csv")


@pytest.mark.parametrize("text, said", [
    ("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,XX,100\n2026-01-01T01:00Z,XX,n/a\n",
     "line 3: gco2e_per_kwh = 'n/a' is not a number"),
    ("location,timestamp,duration,value\nCAISO,2026-01-01T00:00:00Z,300,800\nCAISO,yesterday,300,800\n",
     "line 3: timestamp = 'yesterday' is not a time (UTC)"),
    ("Datetime (UTC),Zone Id,Carbon Intensity gCO2eq/kWh (direct),Renewable Percentage\n"
     "01/01/2022 00:00,FR,50,80\n01/01/2022 01:00,FR,45,eighty\n", "line 3: Renewable Percentage = 'eighty' is not a number"),
    # polars parses these as floats: one NaN hour made the day's carbon NaN, with no error
    ("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,XX,100\n2026-01-01T01:00Z,XX,NaN\n",
     "line 3: gco2e_per_kwh = 'NaN' is not a number"),
    ("location,timestamp,duration,value\nCAISO,2026-01-01T00:00:00Z,300,800\nCAISO,2026-01-01T00:05:00Z,300,-inf\n",
     "line 3: value = '-inf' is not a number"),
], ids=["own format", "watttime", "electricity maps", "own format NaN", "watttime infinity"])
def test_a_cell_that_is_not_a_number_or_time_is_named_with_its_file_and_line(tmp_path, text, said):
    """polars' cast error named neither the file nor the line, and only the own format's was a GridFileError."""
    path = tmp_path / "grid.csv"
    path.write_text(text)
    with pytest.raises(GridFileError) as caught:
        load_intensity_file(path, region="CAISO")
    assert str(caught.value) == f"{path} {said}"


def test_region_without_file_says_so():
    frame, sentence = intensity_for_region("MARS", "", None)
    assert frame.height == 0 and "flat default" in sentence


def test_the_settings_grid_file_is_its_regions_alone(tmp_path, shared_data):
    """A single-region file was relabelled for whatever region was asked: a GPU the inventory
    places in DE was charged the FR file's intensity and labelled 'exact'."""
    mine = tmp_path / "fr.csv"
    mine.write_text("at,region,gco2e_per_kwh\n2026-01-01T00:00Z,my-grid,50\n")
    fr, _ = intensity_for_region("FR", str(mine), shared_data, grid_file_region="FR")
    assert fr["intensity_gco2e_per_kwh"].to_list() == [50.0]
    de, sentence = intensity_for_region("DE", str(mine), shared_data, grid_file_region="FR")
    assert de.height == 0 and "flat default" in sentence
    # another region the file does not hold gets its own reference file
    caiso, sentence = intensity_for_region("CAISO_NORTH", str(mine), shared_data, grid_file_region="FR")
    assert caiso.height > 0 and "CAISO_NORTH" in sentence and set(caiso["region"]) == {"CAISO_NORTH"}
    # given with --region (no settings' region), the file is that region's
    given, _ = intensity_for_region("DE", str(mine), shared_data)
    assert given["intensity_gco2e_per_kwh"].to_list() == [50.0]


def test_a_file_naming_no_region_is_the_settings_regions_not_the_region_asked(shared_data):
    """A WattTime file carries no region: its rows were named for the region asked, so the settings'
    CAISO_NORTH file charged a GPU placed in France California's 371-446 g/kWh (6x France's)."""
    watttime = shared_data / "grid" / "watttime_moer_CAISO_NORTH_5min_2023-11.csv"
    fr, sentence = intensity_for_region("FR", str(watttime), shared_data, grid_file_region="CAISO_NORTH")
    assert "electricitymaps_FR" in sentence and set(fr["region"]) == {"FR"}
    caiso, _ = intensity_for_region("CAISO_NORTH", str(watttime), shared_data, grid_file_region="CAISO_NORTH")
    assert fr["intensity_gco2e_per_kwh"].mean() < 100 < 300 < caiso["intensity_gco2e_per_kwh"].mean()


def test_year_mapping_takes_the_same_weekday_and_hour_near_the_date_of_the_nearest_year():
    src = pl.DataFrame({"hour_at": pl.concat([hours(dt.datetime(2022, 2, 20, tzinfo=UTC), 24 * 14),
                                              hours(dt.datetime(2023, 2, 20, tzinfo=UTC), 24 * 14)])})
    src = src.with_columns(v=pl.col("hour_at").dt.year().cast(pl.Float64))
    # Monday 2 March 2026 05:00: 2023 is nearer than 2022; 2 March 2023 was a Thursday, and the
    # nearest Monday at 05:00 is 27 February 2023.
    mapped = map_to_target_hours(src, [dt.datetime(2026, 3, 2, 5, tzinfo=UTC)], ["v"], {"v": 0.0})
    assert mapped.row(0, named=True)["v"] == 2023.0
    assert mapped["source_hour_at"][0] == dt.datetime(2023, 2, 27, 5, tzinfo=UTC)
    assert mapped["value_rule"][0] == "year_mapped"
    exact = map_to_target_hours(src, [dt.datetime(2022, 3, 2, 5, tzinfo=UTC)], ["v"], {"v": 0.0})
    assert exact["value_rule"][0] == "exact" and exact["source_hour_at"][0] == dt.datetime(2022, 3, 2, 5, tzinfo=UTC)


def test_a_weekly_pattern_of_another_year_lands_on_the_same_weekdays():
    """A price lower at weekends, from 2025: every Saturday and Sunday of 2026 gets a weekend hour,
    the turn of the year included. Matching dates alone put 2025's Saturdays on 2026's Sundays
    and its Fridays on Saturdays (2026 starts a weekday later)."""
    src_hours = hours(dt.datetime(2025, 1, 1, tzinfo=UTC), 365 * 24)
    src = pl.DataFrame({"hour_at": src_hours, "v": [2.0 if h.weekday() >= 5 else 1.0 for h in src_hours]})
    target = hours(dt.datetime(2026, 1, 1, tzinfo=UTC), 365 * 24)
    mapped = map_to_target_hours(src, target, ["v"], {"v": 0.0})
    assert mapped["v"].to_list() == [2.0 if h.weekday() >= 5 else 1.0 for h in target]
    assert rule_counts(mapped)["year_mapped"] == 365 * 24
    lag_days = [(t - s).days for t, s in zip(mapped["hour_at"], mapped["source_hour_at"])]
    assert set(lag_days) <= {357, 364, 371}  # 52 weeks; a week either side at the ends of the source's year


def test_the_right_week_of_last_year_beats_a_neighbouring_week_of_this_year():
    """A source of 2025 and January 2026: February 2026 takes February 2025's same weekdays, not
    the end of January 2026 (the week either side is a fallback, not a nearer year)."""
    src = pl.DataFrame({"hour_at": hours(dt.datetime(2025, 1, 1, tzinfo=UTC), (365 + 31) * 24)})
    src = src.with_columns(v=pl.col("hour_at").dt.year().cast(pl.Float64))
    mapped = map_to_target_hours(src, hours(dt.datetime(2026, 2, 1, tzinfo=UTC), 7 * 24), ["v"], {"v": 0.0})
    assert set(mapped["v"]) == {2025.0} and rule_counts(mapped)["year_mapped"] == 7 * 24
    assert all((t - s).days == 364 for t, s in zip(mapped["hour_at"], mapped["source_hour_at"]))


def test_leap_day_maps_to_the_nearest_same_weekday_and_gaps_are_interpolated():
    src = pl.DataFrame({"hour_at": hours(dt.datetime(2022, 2, 21, tzinfo=UTC), 24 * 14)})
    src = src.with_columns(v=pl.col("hour_at").dt.day().cast(pl.Float64) * 100 + pl.col("hour_at").dt.hour())
    src = src.filter(pl.col("hour_at") != dt.datetime(2022, 3, 1, 1, tzinfo=UTC))  # a gap in the source
    # Tuesday 29 February 2028 counts as 28 February 2022 (a Monday): the nearest Tuesday is 1 March.
    mapped = map_to_target_hours(src, hours(dt.datetime(2028, 2, 29, tzinfo=UTC), 3), ["v"], {"v": 0.0})
    assert mapped["v"].to_list() == [100.0, 101.0, 102.0]
    assert rule_counts(mapped) == {"exact": 0, "year_mapped": 2, "interpolated": 1, "hour_of_day_mean": 0, "default": 0}


def test_a_null_the_file_wrote_stays_null_and_only_absent_hours_are_bridged():
    """A renewable share the file left empty for ten hours is unknown, not a line from 07:00 to
    18:00 labelled exact; an hour the file does not have at all is still bridged and flagged."""
    src = pl.DataFrame({"hour_at": hours(dt.datetime(2025, 3, 3, tzinfo=UTC), 24)}).with_columns(
        v=pl.when(pl.col("hour_at").dt.hour().is_between(8, 17)).then(None).otherwise(pl.col("hour_at").dt.hour() * 1.0))
    src = src.filter(pl.col("hour_at").dt.hour() != 3)
    mapped = map_to_target_hours(src, hours(dt.datetime(2025, 3, 3, tzinfo=UTC), 24), ["v"], {"v": None})
    assert mapped["v"].to_list() == [float(h) if not 8 <= h <= 17 else None for h in range(24)]
    assert mapped.filter(pl.col("value_rule") == "interpolated")["hour_at"].dt.hour().to_list() == [3]


def test_a_long_gap_between_source_years_is_not_a_straight_line():
    """Files of 2023 and 2025 and a fleet in 2024: each 2024 hour takes the same weekday and hour
    of a source year (2023, the earlier of two equally near), keeping its day's shape, instead of
    a line drawn across the year between the files. A gap of a few hours is still bridged."""
    src_hours = pl.concat([hours(dt.datetime(2023, 1, 1, tzinfo=UTC), 365 * 24),
                           hours(dt.datetime(2025, 1, 1, tzinfo=UTC), 365 * 24)])
    src = pl.DataFrame({"hour_at": src_hours, "v": [float(h.hour) for h in src_hours]})
    src = src.filter(~pl.col("hour_at").is_between(dt.datetime(2023, 6, 7, 10, tzinfo=UTC),
                                                   dt.datetime(2023, 6, 7, 12, tzinfo=UTC)))
    target = hours(dt.datetime(2024, 6, 3, tzinfo=UTC), 7 * 24)
    mapped = map_to_target_hours(src, target, ["v"], {"v": -1.0})
    assert mapped["v"].to_list() == [float(h.hour) for h in target]
    assert rule_counts(mapped) == {"exact": 0, "year_mapped": 7 * 24 - 3, "interpolated": 3,
                                   "hour_of_day_mean": 0, "default": 0}
    assert {s.year for s in mapped["source_hour_at"]} == {2023}


def test_a_gap_of_the_same_year_is_filled_from_one_week_the_week_before():
    """Eight hours missing on 2 March: the week before (23 February) and the week after (9 March)
    tied, and the join's order picked one per hour, two hours at 110 g/kWh among 250s."""
    hours = pl.datetime_range(dt.datetime(2026, 2, 23, tzinfo=UTC), dt.datetime(2026, 3, 9, 23, tzinfo=UTC), "1h",
                              eager=True, time_zone="UTC", time_unit="us")
    week = (hours - dt.datetime(2026, 2, 23, tzinfo=UTC)).dt.total_days() // 7
    src = pl.DataFrame({"hour_at": hours, "v": (100.0 + 50 * week).cast(pl.Float64)})
    day = [dt.datetime(2026, 3, 2, h, tzinfo=UTC) for h in range(24)]
    gap = day[8:16]
    mapped = map_to_target_hours(src.filter(~pl.col("hour_at").is_in(gap)), day, ["v"], {"v": 0.0})
    filled = mapped.filter(pl.col("hour_at").is_in(gap))
    assert filled["v"].to_list() == [100.0] * 8  # the week of 23 February
    assert set(filled["value_rule"]) == {"year_mapped"}
    assert filled["source_hour_at"].to_list() == [h - dt.timedelta(weeks=1) for h in gap]


def test_uncovered_days_fall_back_to_hour_of_day_mean_and_empty_to_default():
    src = pl.DataFrame({"hour_at": hours(dt.datetime(2023, 11, 1, tzinfo=UTC), 48),
                        "v": [float(i % 24) for i in range(48)]})
    june = map_to_target_hours(src, hours(dt.datetime(2026, 6, 1, tzinfo=UTC), 24), ["v"], {"v": -1.0})
    assert june["v"].to_list() == [float(h) for h in range(24)]
    assert rule_counts(june)["hour_of_day_mean"] == 24
    empty = map_to_target_hours(src.clear(), hours(dt.datetime(2026, 6, 1, tzinfo=UTC), 2), ["v"], {"v": 7.0})
    assert empty["v"].to_list() == [7.0, 7.0] and rule_counts(empty)["default"] == 2


def test_an_hour_of_the_day_the_source_never_holds_is_the_default_and_counted_so():
    """A file of daytime hours only: its night hours took the default under the label
    'hour_of_day_mean', and the CLI's default of 0 read a night-time run as 0 gCO2e."""
    from joulehouse.reports.accounts.estimate import hourly_mean
    day = pl.DataFrame({"hour_at": hours(dt.datetime(2023, 11, 1, 8, tzinfo=UTC), 12), "v": [300.0] * 12})
    mapped = map_to_target_hours(day, hours(dt.datetime(2026, 1, 15, tzinfo=UTC), 24), ["v"], {"v": 400.0})
    assert rule_counts(mapped)["hour_of_day_mean"] == 12 and rule_counts(mapped)["default"] == 12
    assert mapped.filter(pl.col("value_rule") == "default")["v"].to_list() == [400.0] * 12
    with pytest.raises(ValueError, match="4 of the run's 4 hours have no v"):
        hourly_mean(day, "v", dt.datetime(2026, 1, 15, 22, tzinfo=UTC), 4.0, None)
    assert hourly_mean(day, "v", dt.datetime(2026, 1, 15, 9, tzinfo=UTC), 4.0, None)[0] == 300.0


def test_an_hour_outside_the_sources_weeks_keeps_a_column_without_default_null():
    """A WattTime file has no renewable share (default None): polars refused fill_null(None), so an
    hour that fell back to the hour-of-day profile stopped the whole carbon day."""
    src = pl.DataFrame({"hour_at": hours(dt.datetime(2023, 11, 1, tzinfo=UTC), 24 * 7)}).with_columns(
        v=pl.col("hour_at").dt.hour().cast(pl.Float64), share=pl.lit(None, pl.Float64))
    mapped = map_to_target_hours(src, [dt.datetime(2026, 3, 2, 5, tzinfo=UTC)], ["v", "share"], {"v": 0.0, "share": None})
    assert mapped.select("v", "share", "value_rule").row(0) == (5.0, None, "hour_of_day_mean")
