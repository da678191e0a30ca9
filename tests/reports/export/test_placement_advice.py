"""The signed placement-advice file, from hand-written relations, and the example that turns it
into Slurm node weights and Kubernetes node labels (run as a program, as a site would)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from joulehouse.collectors.config_contract import (MalformedConfig, canonical_body, generate_keypair, load_public_key,
                                                   verify_config)
from joulehouse.reports.accounts.prices import load_urdb_tariff
from joulehouse.reports.export.day_ahead import clearing_time, next_day_prices
from joulehouse.reports.export.placement_advice import export_placement_advice
from joulehouse.settings import ExportSettings, TcoSettings

DAY = dt.date(2026, 6, 11)
NOW = dt.datetime(2026, 6, 12, tzinfo=dt.timezone.utc)
A100 = "NVIDIA A100-SXM4-80GB"
EXAMPLE = Path(__file__).resolve().parents[3] / "infra" / "placement" / "advice_to_scheduler.py"


@pytest.fixture()
def con():
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_gpu_energy_hourly (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR)")
    gpus = [("node-01", "GPU-1"), ("node-01", "GPU-2"), ("node-01", "GPU-3"), ("node-02", "GPU-4"), ("node-02", "GPU-5")]
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, ?, ?)", [(DAY, h, u, A100) for h, u in gpus])
    con.execute("CREATE TABLE fct_thermal_gpu (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR, "
                "theta_c_per_w DOUBLE, rank_in_model INTEGER, theta_vs_model_pct DOUBLE, is_outlier BOOLEAN)")
    con.executemany("INSERT INTO fct_thermal_gpu VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
        (DAY, "node-01", "GPU-1", A100, 0.090, 1, -10.0, False), (DAY, "node-01", "GPU-2", A100, 0.100, 2, 0.0, False),
        (DAY, "node-01", "GPU-3", A100, 0.101, 3, 1.0, False), (DAY, "node-02", "GPU-4", A100, 0.102, 4, 2.0, False),
        (DAY, "node-02", "GPU-5", A100, 0.140, 5, 40.0, True)])
    con.execute("CREATE TABLE fct_recommendation_extra (day DATE, kind VARCHAR, host VARCHAR, gpu_uuid VARCHAR, "
                "detail VARCHAR, expected_saving_kwh_per_day DOUBLE, latency_risk VARCHAR, saturated_minutes_ratio DOUBLE)")
    con.execute("INSERT INTO fct_recommendation_extra VALUES (?, 'consolidation', 'node-01', 'GPU-3', 'light work fits on "
                "GPU-2', 1.2, 'low', 0.0)", [DAY])
    con.execute("CREATE TABLE rpt_context_hourly (day DATE, hour_at TIMESTAMPTZ, site VARCHAR, "
                "intensity_gco2e_per_kwh DOUBLE, price_usd_per_mwh DOUBLE)")
    start = dt.datetime.combine(DAY, dt.time(), dt.timezone.utc)
    con.executemany("INSERT INTO rpt_context_hourly VALUES (?, ?, 'site-a', ?, ?)", [
        (DAY, start + dt.timedelta(hours=h), 50.0 + abs(h - 13) * 5, 40.0 + abs(h - 3) * 2) for h in range(24)])
    con.execute("CREATE TABLE rpt_shift_opportunity_daily (day DATE, site VARCHAR, job_id VARCHAR, energy_kwh DOUBLE, "
                "gpu_hours DOUBLE, carbon_saving_gco2e DOUBLE, cost_saving_usd DOUBLE)")
    con.executemany("INSERT INTO rpt_shift_opportunity_daily VALUES (?, 'site-a', ?, ?, ?, ?, ?)", [
        (DAY, "j1", 10.0, 4.0, 500.0, 0.30), (DAY, "j2", 5.0, 2.0, 250.0, 0.15)])
    yield con
    con.close()


@pytest.fixture()
def keys(tmp_path):
    private_path, public_path = generate_keypair(tmp_path / "keys")
    return private_path, public_path


def advice(con, tmp_path, keys, tco: TcoSettings | None = None, now: dt.datetime = NOW) -> Path:
    settings = ExportSettings(out_dir=str(tmp_path / "export"), validity_hours=48.0)
    return export_placement_advice(con, DAY, settings, window_hours=3, now=now, private_key_path=keys[0], tco=tco)


def pjm_file(path: Path, day: dt.date, prices: list[float], market: str = "da") -> Path:
    """A PJM Data Miner 2 export (the real files' columns) of one node over `day`'s first len(prices) hours."""
    lines = [f"datetime_beginning_utc,datetime_beginning_ept,pnode_id,pnode_name,voltage,equipment,type,zone,"
             f"system_energy_price_{market},total_lmp_{market},congestion_price_{market},marginal_loss_price_{market},"
             "row_is_current,version_nbr"]
    start = dt.datetime.combine(day, dt.time())
    for h, price in enumerate(prices):
        t = start + dt.timedelta(hours=h)
        lines.append(f"{t:%m/%d/%Y %I:%M:%S %p},,1,PJM-RTO,,,ZONE,,{price},{price},0,0,True,1")
    path.write_text("\n".join(lines) + "\n")
    return path


def sites_of(path: Path) -> dict:
    return json.loads(path.read_bytes())["body"]["sites"]["site-a"]


def test_advice_is_signed_like_the_config_and_holds_preference_parking_and_hours(con, tmp_path, keys):
    path = advice(con, tmp_path, keys)
    doc = json.loads(path.read_bytes())
    load_public_key(keys[1]).verify(__import__("base64").b64decode(doc["signature"]["value"]), canonical_body(doc["body"]))
    body = doc["body"]
    assert (body["kind"], body["schema_version"], body["advice_for_day"]) == ("joulehouse-placement-advice", 1, "2026-06-12")
    gpus = {u: g for host in body["hosts"].values() for u, g in host["gpus"].items()}
    assert [gpus[u]["preference"] for u in ("GPU-1", "GPU-2", "GPU-4", "GPU-5")] == [100, 75, 25, 0]
    assert gpus["GPU-1"]["action"] == "prefer" and gpus["GPU-5"]["action"] == "avoid"
    assert gpus["GPU-3"]["action"] == "park" and gpus["GPU-3"]["expected_saving_kwh_per_day"] == 1.2
    assert gpus["GPU-3"]["latency_risk"] == "low"
    assert body["hosts"]["node-01"]["node_preference"] == round((100 + 75) / 2), "parked GPUs do not count"
    site = body["sites"]["site-a"]
    assert site["cheapest_hours_utc"] == ["2026-06-12T02:00:00Z", "2026-06-12T03:00:00Z", "2026-06-12T04:00:00Z"]
    assert site["cleanest_hours_utc"] == ["2026-06-12T12:00:00Z", "2026-06-12T13:00:00Z", "2026-06-12T14:00:00Z"]
    assert (site["deferrable_energy_kwh"], site["expected_cost_saving_usd"], site["expected_carbon_saving_kgco2e"]) == (
        15.0, 0.45, 0.75)
    assert "persistence" in site["forecast_basis"]
    assert (tmp_path / "export" / "placement-advice-2026-06-11.json").read_bytes() == path.read_bytes()


def test_the_agent_refuses_the_advice_served_in_place_of_its_config(con, tmp_path, keys):
    """Same key, same envelope: an advice at the agent's config URL (a publishing slip) is refused
    by its kind, not taken as a config that sets nothing and rolls every GPU back."""
    doc = json.loads(advice(con, tmp_path, keys).read_bytes())
    with pytest.raises(MalformedConfig, match="joulehouse-placement-advice"):
        verify_config(doc, load_public_key(keys[1]), NOW, host="node-01", host_may_be_absent=True)


def run_example(path: Path, public_key: Path, fmt: str) -> subprocess.CompletedProcess:
    """The example at NOW, when advice() made the file: it refuses one outside its validity window."""
    return subprocess.run([sys.executable, str(EXAMPLE), str(path), "--public-key", str(public_key), "--format", fmt,
                           "--at", NOW.strftime("%Y-%m-%dT%H:%M:%SZ")], capture_output=True, text=True)


def test_the_example_turns_it_into_slurm_weights_and_kubernetes_labels(con, tmp_path, keys):
    path = advice(con, tmp_path, keys)
    slurm = run_example(path, keys[1], "slurm")
    assert slurm.returncode == 0, slurm.stderr
    assert slurm.stdout.splitlines() == ["scontrol update NodeName=node-01 Weight=13",   # 1 + 100 - 88
                                         "scontrol update NodeName=node-02 Weight=89"]   # (25 + 0) / 2 rounds to 12
    kube = run_example(path, keys[1], "kubernetes")
    assert kube.returncode == 0, kube.stderr
    assert kube.stdout.splitlines()[0] == (
        "kubectl label node node-01 --overwrite joulehouse.io/placement-preference=88 joulehouse.io/parked-gpus=1 "
        "joulehouse.io/cheapest-hours=02.03.04 joulehouse.io/cleanest-hours=12.13.14")


def test_the_example_piped_into_a_reader_that_stops_early_ends_without_a_traceback(con, tmp_path, keys):
    """`... | head -1` ended in BrokenPipeError's traceback: here the reader is gone before it writes."""
    path = advice(con, tmp_path, keys)
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), str(path), "--public-key", str(keys[1]), "--format",
                             "kubernetes", "--at", NOW.strftime("%Y-%m-%dT%H:%M:%SZ")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait() == 0 and "Traceback" not in stderr, stderr


def test_the_example_refuses_a_tampered_file(con, tmp_path, keys):
    path = advice(con, tmp_path, keys)
    doc = json.loads(path.read_bytes())
    doc["body"]["hosts"]["node-02"]["node_preference"] = 100
    path.write_text(json.dumps(doc))
    done = run_example(path, keys[1], "slurm")
    assert done.returncode == 1 and "signature does not match" in done.stderr and not done.stdout


# the next day's day-ahead prices: cheapest at 20-22 UTC, where the pipeline day's were at 02-04
NEXT_DAY_PRICES = [60.0 + abs(h - 21) for h in range(24)]


def test_day_ahead_prices_of_the_next_day_set_its_cheapest_hours(con, tmp_path, keys):
    prices = pjm_file(tmp_path / "da.csv", DAY + dt.timedelta(days=1), NEXT_DAY_PRICES)
    site = sites_of(advice(con, tmp_path, keys, tco=TcoSettings(price_file=str(prices))))
    assert site["cheapest_hours_utc"] == ["2026-06-12T20:00:00Z", "2026-06-12T21:00:00Z", "2026-06-12T22:00:00Z"]
    assert site["cleanest_hours_utc"] == ["2026-06-12T12:00:00Z", "2026-06-12T13:00:00Z", "2026-06-12T14:00:00Z"], (
        "grid intensity has no day-ahead market: persistence")
    assert site["forecast_basis"].startswith("cheapest hours: day-ahead prices of 2026-06-12 (da.csv")
    assert "cleanest hours: persistence" in site["forecast_basis"]


@pytest.mark.parametrize("case", ["missing hour", "real-time", "before clearing", "flat"])
def test_prices_not_known_the_day_before_stay_a_persistence_forecast(con, tmp_path, keys, case):
    tomorrow = DAY + dt.timedelta(days=1)
    now, tco = NOW, TcoSettings(price_file=str(pjm_file(tmp_path / "p.csv", tomorrow, NEXT_DAY_PRICES)))
    if case == "missing hour":
        tco = TcoSettings(price_file=str(pjm_file(tmp_path / "p.csv", tomorrow, NEXT_DAY_PRICES[:23])))
    elif case == "real-time":
        tco = TcoSettings(price_file=str(pjm_file(tmp_path / "p.csv", tomorrow, NEXT_DAY_PRICES, market="rt")))
    elif case == "before clearing":
        now = clearing_time(tomorrow) - dt.timedelta(minutes=1)
    else:
        tco = None
    site = sites_of(advice(con, tmp_path, keys, tco=tco, now=now))
    assert site["cheapest_hours_utc"] == ["2026-06-12T02:00:00Z", "2026-06-12T03:00:00Z", "2026-06-12T04:00:00Z"]
    assert site["forecast_basis"].startswith("persistence: the hours of 2026-06-11 one day later (prices: ")
    why = {"missing hour": "has 23 of the 24", "real-time": "real-time", "before clearing": "clears at",
           "flat": "no price settings"}[case]
    assert why in site["forecast_basis"]


def test_pjm_clears_the_next_day_at_1330_eastern():
    assert clearing_time(dt.date(2026, 6, 12)) == dt.datetime(2026, 6, 11, 17, 30, tzinfo=dt.timezone.utc)  # EDT
    assert clearing_time(dt.date(2026, 1, 15)) == dt.datetime(2026, 1, 14, 18, 30, tzinfo=dt.timezone.utc)  # EST


def test_the_real_pjm_day_ahead_file_gives_the_next_days_prices_where_it_holds_them(shared_data):
    path = shared_data / "prices" / "pjm_rto_da_hourly_lmp_2025.csv"
    tco = TcoSettings(price_file=str(path))
    known = next_day_prices(dt.date(2025, 6, 11), dt.datetime(2025, 6, 12, tzinfo=dt.timezone.utc), tco)
    assert known.prices is not None and known.prices.height == 24 and "day-ahead prices of 2025-06-12" in known.basis
    assert known.prices["hour_at"].min() == dt.datetime(2025, 6, 12, tzinfo=dt.timezone.utc)
    # the file stops at 2025-12-31 05:00 UTC, and 2026 is not in it (year-mapped accounting is no forecast)
    for day in (dt.date(2025, 12, 30), dt.date(2026, 6, 11)):
        late = next_day_prices(day, dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.timezone.utc), tco)
        assert late.prices is None and "of the 24 day-ahead hours" in late.basis
    rt = TcoSettings(price_file=str(shared_data / "prices" / "pjm_hubs_rt_hourly_lmp_2025-05.csv"))
    assert next_day_prices(dt.date(2025, 5, 10), dt.datetime(2025, 5, 11, tzinfo=dt.timezone.utc), rt).prices is None


def test_a_time_of_use_tariff_gives_the_next_days_own_periods(shared_data):
    path = shared_data / "prices" / "openei_urdb_tou_rate_virginia.json"
    tariff = load_urdb_tariff(path)
    friday = dt.date(2026, 6, 12)
    known = next_day_prices(friday, dt.datetime(2026, 6, 13, tzinfo=dt.timezone.utc), TcoSettings(tariff_file=str(path)))
    assert known.prices is not None and "time-of-use tariff" in known.basis
    zone = __import__("zoneinfo").ZoneInfo("America/New_York")
    for t, price in known.prices.iter_rows():
        local = t.astimezone(zone)
        period = (tariff.weekend_periods if local.weekday() >= 5 else tariff.weekday_periods)[local.month - 1][local.hour]
        assert price == pytest.approx(1000 * tariff.rates_usd_per_kwh[period])


def test_a_saving_that_rounds_to_nothing_is_written_as_zero_not_minus_zero():
    import json

    import polars as pl

    from joulehouse.reports.export.placement_advice import _hosts

    prefs = {("n1", "GPU-0"): {"preference": 1, "action": "prefer"}}
    extra = pl.DataFrame(dict(host=["n1"], gpu_uuid=["GPU-0"], kind=["thermal_placement"], detail=["x"],
                              expected_saving_kwh_per_day=[-0.00004], latency_risk=[None]))
    text = json.dumps(_hosts(prefs, extra))
    assert '"expected_saving_kwh_per_day": 0.0' in text and "-0.0" not in text


def test_a_later_dated_file_that_is_not_our_advice_does_not_pin_the_polled_file(con, tmp_path, keys):
    """By file names alone, an empty placement-advice-2099-01-01.json kept every day's advice from
    the file schedulers poll; only our signed advice of a later day holds it back."""
    out = tmp_path / "export"
    out.mkdir()
    (out / "placement-advice-2099-01-01.json").write_bytes(b"")
    path = advice(con, tmp_path, keys)
    assert path == out / "placement-advice.json" and json.loads(path.read_bytes())["body"]["day"] == "2026-06-11"
    # a backfill of an older day still leaves our signed advice of the later day where it is
    settings = ExportSettings(out_dir=str(out), validity_hours=48.0)
    backfill = export_placement_advice(con, DAY - dt.timedelta(days=1), settings, window_hours=3, now=NOW,
                                       private_key_path=keys[0])
    assert backfill == out / "placement-advice-2026-06-10.json"
    assert json.loads(path.read_bytes())["body"]["day"] == "2026-06-11"


def test_a_nan_figure_is_written_as_unknown_and_the_advice_still_signs(con, tmp_path, keys):
    con.execute("UPDATE fct_thermal_gpu SET theta_c_per_w = 'NaN'::DOUBLE WHERE gpu_uuid = 'GPU-2'")
    con.execute("UPDATE fct_recommendation_extra SET expected_saving_kwh_per_day = 'NaN'::DOUBLE")
    body = json.loads(advice(con, tmp_path, keys).read_bytes())["body"]
    gpus = {u: g for host in body["hosts"].values() for u, g in host["gpus"].items()}
    assert gpus["GPU-2"]["theta_c_per_w"] is None and gpus["GPU-3"]["expected_saving_kwh_per_day"] is None
    assert gpus["GPU-3"]["action"] == "park"


def test_hours_no_lower_than_the_rest_of_the_day_are_not_listed_as_the_lowest():
    """Under a flat price (or one grid intensity all day) the advice listed the day's first six
    hours as the cheapest (cleanest), for a scheduler to move deferrable work into for nothing."""
    import polars as pl

    from joulehouse.reports.export.placement_advice import lowest_hours

    start = dt.datetime(2026, 3, 3, tzinfo=dt.timezone.utc)
    hours = [start + dt.timedelta(hours=h) for h in range(24)]
    flat = pl.DataFrame({"hour_at": hours, "price_usd_per_mwh": [80.0] * 24})
    assert lowest_hours(flat, "price_usd_per_mwh", 6).is_empty()
    nearly = pl.DataFrame({"hour_at": hours, "price_usd_per_mwh": [80.0] * 23 + [80.01]})
    assert lowest_hours(nearly, "price_usd_per_mwh", 6).is_empty()  # 00-05 were listed below 80.01
    two_tier = pl.DataFrame({"hour_at": hours, "price_usd_per_mwh": [40.0 if h < 4 else 90.0 for h in range(24)]})
    assert lowest_hours(two_tier, "price_usd_per_mwh", 6)["hour_at"].to_list() == hours[:4]  # not 4 + 2 dear ones
