"""The export: the day's recommendations, gated on model quality, signed, reproducible."""

from __future__ import annotations

import datetime as dt
import json
import re

import duckdb
import pytest

from joulehouse.collectors.config_contract import (
    BadSignature, ExpiredConfig, HostNotInConfig, generate_keypair, load_public_key, verify_config,
)
from joulehouse.settings import ExportSettings
from joulehouse.reports.export.signed_config import ExportError, export_config

DAY = dt.date(2026, 1, 2)
NOW = dt.datetime(2026, 1, 3, 1, 30, 12, 345678, tzinfo=dt.timezone.utc)
A100, H100, H200 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"


@pytest.fixture()
def con():
    con = duckdb.connect()
    con.execute("""CREATE TABLE fct_recommendation (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR,
        workload_class VARCHAR, power_limit_w DOUBLE, default_limit_w DOUBLE, locked_sm_clock_min_mhz INTEGER,
        locked_sm_clock_max_mhz INTEGER, expected_saving_pct DOUBLE, expected_slowdown_pct DOUBLE, reason VARCHAR)""")
    rows = [
        (DAY, "node-01", "GPU-a1", A100, "throughput", 325.0, 400.0, None, None, 11.234567, 6.1, "cap"),
        (DAY, "node-01", "GPU-a2", A100, "background", 275.0, 400.0, 900, 1200, 21.0, 18.0, "cap+clock"),
        (DAY, "node-01", "GPU-a3", A100, "throughput", 450.0, 400.0, None, None, 0.0, 0.0, "bad optimiser"),
        (DAY, "node-02", "GPU-h1", H100, "throughput", 550.0, 700.0, None, None, 9.0, 5.0, "cap"),
        (DAY, "node-02", "GPU-x1", H200, "latency-sensitive", 650.0, 700.0, None, None, 2.0, 1.0, "cap"),
        (DAY - dt.timedelta(days=1), "node-01", "GPU-a1", A100, "throughput", 200.0, 400.0, None, None, 30.0, 20.0, "old day"),
    ]
    con.executemany("INSERT INTO fct_recommendation VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    con.execute("CREATE TABLE fct_power_model (gpu_model VARCHAR, day DATE, passed_gate BOOLEAN, gate_reason VARCHAR)")
    con.executemany("INSERT INTO fct_power_model VALUES (?,?,?,?)", [
        (A100, DAY, True, None),
        (H100, DAY, False, "held-out MAPE 14.2% above the 10% gate"),
    ])  # H200 has no fit that day at all
    yield con
    con.close()


@pytest.fixture()
def keys(tmp_path):
    private_path, public_path = generate_keypair(tmp_path / "keys")
    return private_path, load_public_key(public_path)


def export(con, tmp_path, keys, now=NOW):
    settings = ExportSettings(out_dir=str(tmp_path / "export"), validity_hours=48.0)
    return export_config(con, DAY, settings, now=now, private_key_path=keys[0])


def test_export_round_trip_carries_only_gated_models_and_says_why(con, tmp_path, keys):
    path = export(con, tmp_path, keys)
    doc = json.loads(path.read_bytes())
    config = verify_config(doc, keys[1], NOW + dt.timedelta(hours=1))
    assert {s.gpu_uuid: s.power_limit_w for s in config.settings} == {"GPU-a1": 325.0, "GPU-a2": 275.0}
    a2 = next(s for s in config.settings if s.gpu_uuid == "GPU-a2")
    assert (a2.locked_sm_clock_min_mhz, a2.locked_sm_clock_max_mhz) == (900, 1200)
    excluded = dict(config.excluded_gpu_models)
    assert excluded[H100] == "held-out MAPE 14.2% above the 10% gate"
    assert "no power model was fitted" in excluded[H200]
    widened = doc["body"]["excluded_gpus"]
    assert [g["gpu_uuid"] for g in widened] == ["GPU-a3"] and "never widens" in widened[0]["reason"]
    assert doc["body"]["day"] == "2026-01-02" and doc["body"]["valid_from"] == "2026-01-03T01:30:12Z"
    assert (path.parent / "recommended-config-2026-01-02.json").read_bytes() == path.read_bytes()


def test_no_exported_limit_is_above_its_device_default(con, tmp_path, keys):
    doc = json.loads(export(con, tmp_path, keys).read_bytes())
    defaults = dict(con.execute("SELECT gpu_uuid, default_limit_w FROM fct_recommendation WHERE day = ?", [DAY]).fetchall())
    for gpus in doc["body"]["hosts"].values():
        for uuid, entry in gpus.items():
            assert entry["power_limit_w"] <= defaults[uuid]


def test_rerunning_a_day_gives_byte_identical_files(con, tmp_path, keys):
    first = export(con, tmp_path, keys).read_bytes()
    second = export(con, tmp_path, keys).read_bytes()
    assert first == second
    assert not list((tmp_path / "export").glob(".*tmp"))


def test_exported_file_is_refused_when_tampered_expired_or_for_another_host(con, tmp_path, keys):
    doc = json.loads(export(con, tmp_path, keys).read_bytes())
    assert doc["body"]["kind"] == "joulehouse-recommended-config"  # told apart from the advice signed alike
    with pytest.raises(ExpiredConfig):
        verify_config(doc, keys[1], NOW + dt.timedelta(hours=48))
    with pytest.raises(HostNotInConfig):
        verify_config(doc, keys[1], NOW, host="node-02")  # node-02's models were all gated out
    doc["body"]["hosts"]["node-01"]["GPU-a1"]["power_limit_w"] = 100.0
    with pytest.raises(BadSignature):
        verify_config(doc, keys[1], NOW)


def test_a_day_without_recommendations_says_so(tmp_path, keys):
    with pytest.raises(ExportError, match="fct_recommendation does not exist"):
        export(duckdb.connect(), tmp_path, keys)


def test_without_any_power_model_table_every_model_is_held_back(con, tmp_path, keys):
    con.execute("DROP TABLE fct_power_model")
    body = json.loads(export(con, tmp_path, keys).read_bytes())["body"]
    assert body["hosts"] == {}
    assert all("fct_power_model does not exist" in e["reason"] for e in body["excluded_gpu_models"])


def test_a_backfilled_older_day_does_not_replace_the_config_agents_poll(con, tmp_path, keys):
    """Backfilling or re-running an old day must not hand the agents that day's (expired) file."""
    con.execute("INSERT INTO fct_recommendation SELECT day + 1, * EXCLUDE (day) FROM fct_recommendation WHERE day = ?", [DAY])
    con.execute("INSERT INTO fct_power_model SELECT gpu_model, day + 1, passed_gate, gate_reason FROM fct_power_model")
    settings = ExportSettings(out_dir=str(tmp_path / "export"), validity_hours=48.0)
    newer = export_config(con, DAY + dt.timedelta(days=1), settings, now=NOW + dt.timedelta(days=1), private_key_path=keys[0])
    assert newer.name == "recommended-config.json"
    polled = newer.read_bytes()

    older = export_config(con, DAY, settings, now=NOW, private_key_path=keys[0])
    assert older.name == "recommended-config-2026-01-02.json" and older.exists()
    assert newer.read_bytes() == polled, "the later day's config stays the one agents poll"
    assert json.loads(newer.read_bytes())["body"]["day"] == "2026-01-03"

    again = export_config(con, DAY + dt.timedelta(days=1), settings, now=NOW + dt.timedelta(days=1), private_key_path=keys[0])
    assert again.name == "recommended-config.json" and again.read_bytes() == polled, "a re-run of the newest day rewrites it"


def test_a_corrected_rerun_of_the_day_reaches_agents_that_took_the_first_export(con, tmp_path, keys):
    """An operator's trial: after a re-run with another setting, every agent that had applied the
    day's first export refused the corrected one as a replay (the same generated_at, another body)."""
    from joulehouse.collectors.agent_replay import ReplayGuard, ReplayedConfig
    from joulehouse.collectors.config_contract import verify_signature

    guard = ReplayGuard(tmp_path / "agent" / "applied.json")
    first = verify_signature(json.loads(export(con, tmp_path, keys).read_bytes()), keys[1])
    guard.record(first, NOW)
    con.execute("UPDATE fct_recommendation SET power_limit_w = 300.0 WHERE gpu_uuid = 'GPU-a1' AND day = ?", [DAY])
    corrected_bytes = export(con, tmp_path, keys).read_bytes()
    corrected = verify_signature(json.loads(corrected_bytes), keys[1])
    assert corrected.generated_at == first.generated_at + dt.timedelta(seconds=1)
    assert corrected.valid_from == first.valid_from  # the same window
    guard.check(corrected)  # newer: accepted
    assert export(con, tmp_path, keys).read_bytes() == corrected_bytes  # the same body again: the same bytes
    with pytest.raises(ReplayedConfig):  # and the first one is now the replay
        guard.record(corrected, NOW)
        guard.check(first)


def test_a_corrected_rerun_is_newer_even_when_the_dated_file_was_deleted(con, tmp_path, keys):
    """The file agents poll still holds the day's first export: a corrected re-run must be newer
    than it, or every agent that took it refuses the correction as a replay."""
    from joulehouse.collectors.config_contract import verify_signature

    first = verify_signature(json.loads(export(con, tmp_path, keys).read_bytes()), keys[1])
    (tmp_path / "export" / "recommended-config-2026-01-02.json").unlink()
    con.execute("UPDATE fct_recommendation SET power_limit_w = 300.0 WHERE gpu_uuid = 'GPU-a1' AND day = ?", [DAY])
    corrected = verify_signature(json.loads(export(con, tmp_path, keys).read_bytes()), keys[1])
    assert corrected.generated_at == first.generated_at + dt.timedelta(seconds=1)


def test_an_earlier_export_that_is_not_ours_sets_no_time(con, tmp_path, keys):
    """A hand-made file at the dated path with generated_at in 2099 would push every later export
    past it and make agents refuse them all; only a file signed by the export's key counts."""
    path = export(con, tmp_path, keys)
    dated = path.parent / "recommended-config-2026-01-02.json"
    doc = json.loads(dated.read_bytes())
    doc["body"]["generated_at"] = "2099-01-01T00:00:00Z"
    doc["body"]["hosts"]["node-01"]["GPU-a1"]["power_limit_w"] = 100.0
    dated.write_text(json.dumps(doc))
    again = json.loads(export(con, tmp_path, keys).read_bytes())
    assert again["body"]["generated_at"] == "2026-01-03T01:30:12Z"


def test_a_planted_later_day_at_the_polled_path_does_not_pin_it(con, tmp_path, keys):
    """An unsigned file claiming day 9999-12-31 where agents poll kept every later export out of it
    (only the dated files were written): the fleet would roll back once its config expired."""
    path = export(con, tmp_path, keys)
    path.write_text(json.dumps({"body": {"day": "9999-12-31"}}))
    again = export(con, tmp_path, keys)
    assert again == path and json.loads(path.read_bytes())["body"]["day"] == "2026-01-02"


def test_the_report_counts_the_settings_the_signed_file_carries(con, tmp_path, keys):
    """The 2026-06-12 demo report said "Settings to apply (19 of 32 GPUs)" and "13 GPUs get no
    setting in the export", while recommended-config.json (and `agent verify`) held 32: the GPUs
    kept at their default are in the file, as explicit default settings. The page's counts are
    the file's."""
    from joulehouse.reports.page.render import render_report

    con.executemany("INSERT INTO fct_recommendation VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
        (DAY, "node-03", "GPU-a4", A100, "latency-sensitive", 400.0, 400.0, None, None, 0.0, 0.0,
         "latency-sensitive: keep clocks (default limit)"),
        (DAY, "node-03", "GPU-a5", A100, "throughput", 400.0, 400.0, None, None, 0.0, 0.0,
         "held out as a control (10% of the A100 GPUs given a setting keep the default); would set 300 W"),
        (DAY, "node-03", "GPU-a6", A100, "throughput", None, 400.0, None, None, None, None,
         "in do_not_touch: left as it is"),
    ])
    body = json.loads(export(con, tmp_path, keys).read_bytes())["body"]
    settings = [g for gpus in body["hosts"].values() for g in gpus.values()]
    changing = [g for g in settings if g["locked_sm_clock_max_mhz"] is not None or g["power_limit_w"] < 400.0]
    at_default = [g for g in settings if g not in changing]
    left_out = len(body["excluded_gpus"]) + con.execute(
        "SELECT count(*) FROM fct_recommendation WHERE day = ? AND gpu_model IN (?, ?)", [DAY, H100, H200]).fetchone()[0]
    total = con.execute("SELECT count(*) FROM fct_recommendation WHERE day = ?", [DAY]).fetchone()[0]
    assert (len(settings), len(changing), len(at_default), left_out, total) == (4, 2, 2, 4, 8)

    text = render_report(con, DAY, tmp_path / "r.html").read_text()
    said = {
        "in the file": re.search(r"Settings in the signed export \((\d+) of (\d+) GPUs\)", text),
        "changing": re.search(r"(\d+) of them change a GPU", text),
        "at the default": re.search(r"(\d+) (?:is|are) set to the device default limit", text),
        "left out": re.search(r"(\d+) GPUs? gets? no setting in the export", text),
    }
    assert all(said.values()), {k: bool(v) for k, v in said.items()}
    assert said["in the file"].groups() == (str(len(settings)), str(total))
    assert said["changing"].group(1) == str(len(changing))
    assert said["at the default"].group(1) == str(len(at_default))
    assert said["left out"].group(1) == str(left_out)


ODD_ROWS = {  # one odd row each; signed as they were, each made the whole file fail at signing
    "a 0 W limit": ("GPU-o1", "throughput", 0.0, 400.0, None, None, "must be > 0 W"),
    "a NaN limit": ("GPU-o2", "throughput", float("nan"), 400.0, None, None, "no power limit was recommended"),
    "a NaN default": ("GPU-o3", "throughput", 900.0, float("nan"), None, None, "device default limit is unknown"),
    "a lone clock": ("GPU-o4", "throughput", 300.0, 400.0, 900, None, "give both locked_sm_clock_min_mhz"),
    "an unknown class": ("GPU-o5", "inference", 300.0, 400.0, None, None, "workload_class = 'inference'"),
    "no host": ("GPU-o6", "throughput", 300.0, 400.0, None, None, "names no host or GPU uuid"),
}


def test_an_odd_recommendation_leaves_out_its_gpu_with_the_reason_not_the_whole_file(con, tmp_path, keys):
    for name, (uuid, cls, limit, default, lo, hi, _) in ODD_ROWS.items():
        con.execute("INSERT INTO fct_recommendation VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (DAY, None if name == "no host" else "node-09", uuid, A100, cls, limit, default, lo, hi, 5.0, 1.0, name))
    con.execute("INSERT INTO fct_recommendation VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",  # an unknown saving is no reason
                (DAY, "node-09", "GPU-ok", A100, "throughput", 300.0, 400.0, None, None, float("nan"), float("inf"), "ok"))
    doc = json.loads(export(con, tmp_path, keys).read_bytes())
    config = verify_config(doc, keys[1], host="node-09", now=NOW)
    assert [s.gpu_uuid for s in config.settings] == ["GPU-ok"]
    assert (config.settings[0].expected_saving_pct, config.settings[0].expected_slowdown_pct) == (None, None)
    reasons = {e["gpu_uuid"]: e["reason"] for e in doc["body"]["excluded_gpus"]}
    for name, (uuid, *_, said) in ODD_ROWS.items():
        assert said in reasons[uuid], name
    assert "GPU-a1" in doc["body"]["hosts"]["node-01"]  # the good rows of the day are there
