"""Price and tariff loaders on the real PJM and OpenEI files, and the tariff lookup rules."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from joulehouse.reports.accounts.prices import (
    PriceFileError, load_pjm_lmp_csv, load_urdb_tariff, parse_urdb_item, tariff_prices, usd_per_mwh_to_usd_per_kwh,
)

UTC = dt.timezone.utc


def test_usd_per_mwh_to_usd_per_kwh():
    assert usd_per_mwh_to_usd_per_kwh(80.0) == pytest.approx(0.08)
    assert usd_per_mwh_to_usd_per_kwh(-69.34) == pytest.approx(-0.06934)


def test_day_ahead_file_is_one_node_with_utc_hours(shared_data):
    da = load_pjm_lmp_csv(shared_data / "prices/pjm_rto_da_hourly_lmp_2025.csv", "PJM-RTO")
    # The export starts at midnight Eastern (05:00 UTC) on 1 January 2025.
    assert da["hour_at"][0] == dt.datetime(2025, 1, 1, 5, tzinfo=UTC)
    assert da["hour_at"].is_sorted() and da["hour_at"].n_unique() == da.height
    assert 8700 < da.height <= 8760


def test_real_time_negative_prices_and_spikes_are_kept(shared_data):
    path = shared_data / "prices/pjm_hubs_rt_hourly_lmp_2025-05.csv"
    raw = pl.read_csv(path)
    nodes = raw["pnode_name"].unique().to_list()
    frames = pl.concat([load_pjm_lmp_csv(path, n) for n in nodes])
    assert frames["price_usd_per_mwh"].min() == pytest.approx(raw["total_lmp_rt"].min())
    assert frames["price_usd_per_mwh"].min() < 0
    assert frames["price_usd_per_mwh"].max() == pytest.approx(raw["total_lmp_rt"].max())
    assert frames["price_usd_per_mwh"].max() > 1500


def test_unknown_node_names_the_nodes_it_has(shared_data):
    with pytest.raises(PriceFileError, match="WESTERN HUB"):
        load_pjm_lmp_csv(shared_data / "prices/pjm_hubs_rt_hourly_lmp_2025-05.csv", "NOWHERE")


def test_a_price_that_is_not_a_number_is_named_with_its_line(tmp_path):
    path = tmp_path / "lmp.csv"
    path.write_text("datetime_beginning_utc,pnode_name,total_lmp_da\n"
                    "1/1/2025 5:00:00 AM,PJM-RTO,31.2\n1/1/2025 6:00:00 AM,OTHER,n/a\n1/1/2025 6:00:00 AM,PJM-RTO,30.1\n")
    with pytest.raises(PriceFileError) as caught:
        load_pjm_lmp_csv(path, "PJM-RTO")
    assert str(caught.value) == f"{path} line 3: total_lmp_da = 'n/a' is not a number"


def test_an_empty_price_cell_is_an_hour_the_file_does_not_price(tmp_path):
    """Kept as a NULL row, ten empty hours were bridged by a straight line (labelled exact), and
    empty last hours were NULL and left out of the day's cost; absent, the year mapping fills them."""
    path = tmp_path / "lmp.csv"
    path.write_text("datetime_beginning_utc,pnode_name,total_lmp_da\n"
                    "1/1/2025 5:00:00 AM,PJM-RTO,31.2\n1/1/2025 6:00:00 AM,PJM-RTO,\n1/1/2025 7:00:00 AM,PJM-RTO,30.1\n")
    frame = load_pjm_lmp_csv(path, "PJM-RTO")
    assert frame["hour_at"].dt.hour().to_list() == [5, 7] and frame["price_usd_per_mwh"].null_count() == 0


def test_of_an_hours_versions_the_current_one_is_the_price(tmp_path):
    """An export that keeps PJM's corrections: version 1 (no longer current) at 50, version 2 at 70;
    the first row had won. Without row_is_current, the highest version_nbr is the current one."""
    path = tmp_path / "lmp.csv"
    path.write_text("datetime_beginning_utc,pnode_name,total_lmp_da,row_is_current,version_nbr\n"
                    "1/1/2025 5:00:00 AM,PJM-RTO,50,False,1\n1/1/2025 5:00:00 AM,PJM-RTO,70,True,2\n"
                    "1/1/2025 6:00:00 AM,PJM-RTO,40,True,1\n")
    assert load_pjm_lmp_csv(path, "PJM-RTO")["price_usd_per_mwh"].to_list() == [70.0, 40.0]
    path.write_text("datetime_beginning_utc,pnode_name,total_lmp_da,version_nbr\n"
                    "1/1/2025 5:00:00 AM,PJM-RTO,50,1\n1/1/2025 5:00:00 AM,PJM-RTO,70,3\n1/1/2025 5:00:00 AM,PJM-RTO,60,2\n")
    assert load_pjm_lmp_csv(path, "PJM-RTO")["price_usd_per_mwh"].to_list() == [70.0]


def test_virginia_tou_matrix_lookup_in_local_time(shared_data):
    tariff = load_urdb_tariff(shared_data / "prices/openei_urdb_tou_rate_virginia.json")
    raw = json.loads((shared_data / "prices/openei_urdb_tou_rate_virginia.json").read_text())["items"][0]
    rates = [p[0]["rate"] + p[0]["adj"] for p in raw["energyratestructure"]]
    assert tariff.rates_usd_per_kwh == pytest.approx(tuple(rates))
    # Monday 2 March 2026, 07:00 UTC = 02:00 EST: period energyweekdayschedule[2][2].
    frame = tariff_prices(tariff, pl.Series([dt.datetime(2026, 3, 2, 7, tzinfo=UTC)]), "America/New_York")
    period = raw["energyweekdayschedule"][2][2]
    assert frame["tou_period"][0] == period
    assert frame["price_usd_per_kwh"][0] == pytest.approx(rates[period])


def _two_schedule_item() -> dict:
    weekday = [[1] * 8 + [2] * 12 + [1] * 4 for _ in range(12)]
    weekday[6] = [1] * 8 + [3] * 12 + [1] * 4  # July on-peak is its own period
    weekend = [[0] * 24 for _ in range(12)]
    return {
        "name": "test", "utility": "test",
        "energyweekdayschedule": weekday, "energyweekendschedule": weekend,
        "energyratestructure": [[{"rate": 0.05}], [{"rate": 0.08, "adj": 0.01}], [{"rate": 0.20}], [{"rate": 0.40}]],
    }


def test_weekend_and_weekday_use_their_own_matrix_and_month_row():
    tariff = parse_urdb_item(_two_schedule_item())
    assert tariff.rate_at(dt.datetime(2026, 3, 7, 12)) == 0.05  # Saturday noon: weekend matrix
    assert tariff.rate_at(dt.datetime(2026, 3, 9, 12)) == 0.20  # Monday noon: weekday on-peak
    assert tariff.rate_at(dt.datetime(2026, 3, 9, 3)) == pytest.approx(0.09)  # Monday night: rate + adj
    assert tariff.rate_at(dt.datetime(2026, 7, 6, 12)) == 0.40  # July row differs


def test_a_tiered_tariff_charges_its_last_tier_unless_told_and_says_which():
    """A data centre's month runs far past a tier's few thousand kWh: by default each period's last
    tier is charged (the first was, whatever the volume); `tier` picks another, a period with fewer
    tiers charges its last, and the tariff says which tier it charged."""
    item = _two_schedule_item()
    item["energyratestructure"][2] = [{"rate": 0.20, "max": 1000, "unit": "kWh"}, {"rate": 0.15, "max": 50000},
                                      {"rate": 0.12, "adj": 0.005}]
    monday_noon = dt.datetime(2026, 3, 9, 12)
    by_default = parse_urdb_item(item)
    assert by_default.rate_at(monday_noon) == pytest.approx(0.125)
    assert by_default.rate_at(dt.datetime(2026, 3, 9, 3)) == pytest.approx(0.09)  # one tier: that tier
    assert by_default.tier_note.startswith("volume tier 3 of 3")
    first = parse_urdb_item(item, tier=0)
    assert first.rate_at(monday_noon) == 0.20 and first.tier_note == "volume tier 1 of 3"
    assert parse_urdb_item(item, tier=7).rate_at(monday_noon) == pytest.approx(0.125)
    assert parse_urdb_item(_two_schedule_item()).tier_note == ""
    item["energyratestructure"][1] = {"rate": 0.08}  # a period that is not a list of tiers
    with pytest.raises(PriceFileError, match="period 1 must be a list of tiers"):
        parse_urdb_item(item)


def test_bad_tariff_structure_is_refused():
    item = _two_schedule_item()
    item["energyweekdayschedule"] = item["energyweekdayschedule"][:11]
    with pytest.raises(PriceFileError, match="12x24"):
        parse_urdb_item(item)
    item = _two_schedule_item()
    item["energyratestructure"] = item["energyratestructure"][:2]
    with pytest.raises(PriceFileError, match="period 3"):
        parse_urdb_item(item)


@pytest.mark.parametrize("cell, said", [("NaN", "'NaN' is not a number"), ("inf", "'inf' is not a number"),
                                        ("1e300", "'1e300' is beyond +/-100,000 USD/MWh")])
def test_a_price_that_is_not_finite_or_beyond_any_market_is_refused_with_its_line(tmp_path, cell, said):
    """polars parses "NaN" and "inf" as floats: one such hour made the whole day's cost NaN, unsaid."""
    path = tmp_path / "lmp.csv"
    path.write_text("datetime_beginning_utc,pnode_name,total_lmp_da\n"
                    f"1/1/2025 5:00:00 AM,PJM-RTO,31.2\n1/1/2025 6:00:00 AM,PJM-RTO,{cell}\n")
    with pytest.raises(PriceFileError) as caught:
        load_pjm_lmp_csv(path, "PJM-RTO")
    assert str(caught.value) == f"{path} line 3: total_lmp_da = {said}"


@pytest.mark.parametrize("rate", [float("nan"), float("inf"), 1e300, "0.1", None])
def test_a_tariff_rate_that_is_not_a_finite_price_is_refused(tmp_path, rate):
    """Python's json reads NaN, Infinity and 1e999: every hour of that period cost NaN or infinity."""
    item = _two_schedule_item()
    item["energyratestructure"][2] = [{"rate": rate}]
    path = tmp_path / "tariff.json"
    path.write_text(json.dumps({"items": [item]}))
    with pytest.raises(PriceFileError, match="period 2: rate .* must be finite numbers"):
        load_urdb_tariff(path)
    item["energyratestructure"][2] = [{"rate": 0.1, "adj": None}]  # URDB's "no adjustment"
    assert parse_urdb_item(item).rates_usd_per_kwh[2] == 0.1


HEADER = "datetime_beginning_utc,pnode_name,total_lmp_da\n"


@pytest.mark.parametrize("body, said", [
    (HEADER + "1/1/2025 5:00:00 AM,PJM-RTO,31.2,extra\n", "is not a CSV file that can be read"),  # a ragged row
    (HEADER + '"1/1/2025 5:00:00 AM,PJM-RTO,31.2\n', "is not a CSV file that can be read"),  # an open quote
    ("", "is not a CSV file that can be read"),
    (HEADER.encode() + "1/1/2025 5:00:00 AM,PJM-RT\xd6,31.2\n".encode("latin-1"), "is not a CSV file that can be read"),
])
def test_a_file_that_is_no_csv_is_one_error_naming_it(tmp_path, body, said):
    """Each was a polars traceback naming no file (exit 1 from `tco estimate`)."""
    path = tmp_path / "lmp.csv"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(PriceFileError, match=f"^price file {path} {said}"):
        load_pjm_lmp_csv(path, "PJM-RTO")


def test_two_current_prices_of_one_hour_are_refused_with_their_lines(tmp_path):
    """The first was charged and nothing said so (20 for an hour also listed at 500 USD/MWh)."""
    path = tmp_path / "lmp.csv"
    path.write_text(HEADER + "1/1/2025 5:00:00 AM,PJM-RTO,20\n1/1/2025 6:00:00 AM,PJM-RTO,30\n"
                    "1/1/2025 5:00:00 AM,OTHER,99\n1/1/2025 5:00:00 AM,PJM-RTO,500\n")
    with pytest.raises(PriceFileError, match=rf"^{path} lines 2, 5: the hour 2025-01-01 05:00 UTC has different prices"):
        load_pjm_lmp_csv(path, "PJM-RTO")
    same = tmp_path / "same.csv"  # the same price twice is the same hour, kept once
    same.write_text(HEADER + "1/1/2025 5:00:00 AM,PJM-RTO,20\n1/1/2025 5:00:00 AM,PJM-RTO,20\n")
    assert load_pjm_lmp_csv(same, "PJM-RTO")["price_usd_per_mwh"].to_list() == [20.0]


def test_a_quarter_hourly_file_is_refused_not_read_at_its_full_hours(tmp_path):
    """Re-gridded to hours, its :00 prices stood for every hour (10 where the mean was 77.5)."""
    path = tmp_path / "lmp.csv"
    path.write_text(HEADER + "1/1/2025 5:00:00 AM,PJM-RTO,10\n1/1/2025 5:15:00 AM,PJM-RTO,100\n")
    with pytest.raises(PriceFileError, match=rf"^{path} line 3: datetime_beginning_utc '1/1/2025 5:15:00 AM' is not on the hour"):
        load_pjm_lmp_csv(path, "PJM-RTO")


@pytest.mark.parametrize("change, said", [
    (lambda item: item["energyweekdayschedule"][0].__setitem__(3, "peak"), "energyweekdayschedule must hold whole period"),
    (lambda item: item["energyweekendschedule"][0].__setitem__(3, 1.7), "energyweekendschedule must hold whole period"),
    (lambda item: item.__setitem__("fixedchargefirstmeter", "ten"), "fixedchargefirstmeter must be a finite number"),
])
def test_a_tariff_of_the_wrong_types_is_refused_naming_the_key(tmp_path, change, said):
    item = _two_schedule_item()
    change(item)
    path = tmp_path / "tariff.json"
    path.write_text(json.dumps({"items": [item]}))
    with pytest.raises(PriceFileError, match=said):
        load_urdb_tariff(path)


@pytest.mark.parametrize("document, said", [({"items": {"a": 1}}, "no rate records under items"),
                                            ([[1, 2]], "a rate record must be a JSON object")])
def test_a_tariff_file_of_another_shape_is_refused(tmp_path, document, said):
    path = tmp_path / "tariff.json"
    path.write_text(json.dumps(document))
    with pytest.raises(PriceFileError, match=said):
        load_urdb_tariff(path)
