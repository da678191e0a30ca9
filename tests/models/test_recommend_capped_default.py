"""A board built for more than its catalogue default (an A100-SXM4-80GB on a 500 W HGX board has the
400 W board's NVML name) keeps its own default once the agent caps it: the next day's readings show
only the cap, and the default is then the GPU's own from before the cap (the agent's audit, else
its earlier days' recommendations), never the catalogue's 400 W, which caps such a board, nor a
model-wide figure, which would lift the fleet's 400 W boards above their maximum."""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.device_limits import EarlierDefaults, earlier_default_limits_w, limit_seen_w
from joulehouse.models.power import fit_day
from joulehouse.models.power_interval import power_interval_day
from joulehouse.models.recommend import recommend_day
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import TruePower, load_samples, synthetic_samples

DAY_1 = dt.date(2026, 3, 2)
DAY_2 = DAY_1 + dt.timedelta(days=1)
A100 = "NVIDIA A100-SXM4-80GB"
SEED = 21
HGX_BOARD_W = 500.0  # GPU 0; GPUs 1 and 2 are 400 W boards (the catalogue's default)
# Power that reaches past 500 W at full activity, so a cap binds on the 500 W board too.
TRUTH = TruePower(dyn_w=500.0)
ROW = ("default_limit_w", "power_limit_w", "locked_sm_clock_max_mhz", "expected_saving_pct",
       "expected_energy_saving_kwh_per_day", "expected_slowdown_pct")


def _uuid(gpu: int) -> str:
    return f"GPU-node-01-{gpu}-{SEED}"


def _load_day(con: duckdb.DuckDBPyConnection, day: dt.date, limits_w: dict[int, float]) -> None:
    """The day's readings (the same work every day), GPU g at limits_w[g] (power clipped to it),
    all background work so that caps pay."""
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    load_samples(con, synthetic_samples(seed=SEED, n_gpus=3, truth=TRUTH, capped_limit_w=limits_w[0], start=start))
    for gpu, limit_w in limits_w.items():
        con.execute("UPDATE stg_gpu_samples SET power_limit_w = $w, power_w = least(power_w, $w), "
                    "clock_event_reasons = CASE WHEN power_w > $w THEN 4 ELSE clock_event_reasons END "
                    "WHERE gpu_uuid = $gpu AND day = $day", {"w": limit_w, "gpu": _uuid(gpu), "day": day})
    con.execute("CREATE OR REPLACE TABLE stg_jobs (job_id VARCHAR, host VARCHAR, gpu_uuid VARCHAR, "
                "started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, workload_class VARCHAR)")
    for gpu in limits_w:
        con.execute("INSERT INTO stg_jobs VALUES (?, 'node-01', ?, ?, ?, 'background')",
                    [f"job-{gpu}", _uuid(gpu), start, start + dt.timedelta(hours=6)])


def _recommendations(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, dict]:
    cur = con.execute("SELECT * FROM fct_recommendation WHERE day = ?", [day])
    names = [d[0] for d in cur.description]
    return {r["gpu_uuid"]: r for r in (dict(zip(names, v)) for v in cur.fetchall())}


def _two_days(audit_rows: list[tuple] = ()) -> tuple[dict, dict, list, list]:
    """Day 1 uncapped, the day's caps applied by the agent, day 2 read under them (day 1's power
    model for both, so that only the limits differ). Returns both days' rows and intervals."""
    con = duckdb.connect()
    settings = RecommendSettings(holdout_share=0.0)
    _load_day(con, DAY_1, {0: HGX_BOARD_W, 1: TRUTH.limit_w, 2: TRUTH.limit_w})
    fit_day(con, DAY_1, ModelSettings())
    recommend_day(con, DAY_1, settings)
    day_1 = _recommendations(con, DAY_1)
    intervals_1, _ = power_interval_day(con, DAY_1, settings)
    caps_w = {gpu: day_1[_uuid(gpu)]["power_limit_w"] for gpu in range(3)}
    assert all(caps_w[gpu] < (HGX_BOARD_W if gpu == 0 else TRUTH.limit_w) for gpu in caps_w), \
        f"day 1 capped every GPU (else day 2 shows nothing): {caps_w}"
    if audit_rows:
        _audit(con, audit_rows)
    _load_day(con, DAY_2, caps_w)
    recommend_day(con, DAY_2, settings)
    intervals_2, _ = power_interval_day(con, DAY_2, settings)
    return day_1, _recommendations(con, DAY_2), intervals_1, intervals_2


def _audit(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """raw_agent_audit as the lake's view gives it; rows are (gpu_uuid, action, audited_at,
    power_limit_w_before, power_limit_w_after)."""
    con.execute("CREATE TABLE IF NOT EXISTS raw_agent_audit (audited_at TIMESTAMPTZ, host VARCHAR, gpu_uuid VARCHAR, "
                "action VARCHAR, config_sha256 VARCHAR, power_limit_w_before DOUBLE, power_limit_w_requested DOUBLE, "
                "power_limit_w_after DOUBLE, reason VARCHAR, date DATE)")
    for gpu_uuid, action, at, before_w, after_w in rows:
        con.execute("INSERT INTO raw_agent_audit VALUES (?, 'node-01', ?, ?, 'sha', ?, ?, ?, 'test', ?)",
                    [at, gpu_uuid, action, before_w, after_w, after_w, at.date()])


def _rounded(row: dict) -> dict:
    return {k: None if row[k] is None else round(row[k], 9) for k in ROW}


def test_a_500_w_board_capped_by_the_agent_keeps_its_500_w_default_and_the_400_w_boards_keep_400():
    """Before: day 1 gave the 500 W board (GPU 0) a 300 W cap saving 15.3% from its 500 W run; on
    day 2, read at 300 W, its default became the catalogue's 400 W and the same work got a 250 W cap
    "saving 16.8%" counted from a 400 W run, its keep-the-default and rollback target a 400 W cap,
    and every power interval of the model ended at 400 W."""
    day_1, day_2, intervals_1, intervals_2 = _two_days()
    hgx = _uuid(0)
    assert day_1[hgx]["default_limit_w"] == HGX_BOARD_W
    assert _rounded(day_2[hgx]) == _rounded(day_1[hgx])
    # the 400 W boards of the same NVML name keep their own 400 W, not the model's highest default
    for gpu in (1, 2):
        assert day_1[_uuid(gpu)]["default_limit_w"] == TRUTH.limit_w
        assert _rounded(day_2[_uuid(gpu)]) == _rounded(day_1[_uuid(gpu)])
    # the reason says what the default is and why, where the day's readings do not show it
    assert "this day's readings show 300 W at most, but on earlier days it held a 500 W limit" in day_2[hgx]["reason"]
    assert "default 500 W" in day_2[hgx]["reason"]
    assert {i.default_limit_w for i in intervals_1} == {i.default_limit_w for i in intervals_2} == {HGX_BOARD_W}


def test_the_agents_audit_of_the_first_apply_names_the_default_and_says_so():
    """The limit before the agent's first apply is the device's own: it stands where no earlier
    recommendation of the GPU was kept (a warehouse rebuilt from day 2), or where one was wrong."""
    applied_at = dt.datetime.combine(DAY_2, dt.time(0, 30), dt.timezone.utc)
    audit = [(_uuid(0), "apply", applied_at, HGX_BOARD_W, 300.0), (_uuid(1), "apply", applied_at, 400.0, 250.0),
             (_uuid(0), "apply", applied_at + dt.timedelta(hours=1), 300.0, 300.0)]
    day_1, day_2, _, _ = _two_days(audit)
    assert _rounded(day_2[_uuid(0)]) == _rounded(day_1[_uuid(0)])
    assert _rounded(day_2[_uuid(1)]) == _rounded(day_1[_uuid(1)])
    assert ("this day's readings show 300 W at most, but the agent's audit shows that before its first setting "
            "it held a 500 W limit") in day_2[_uuid(0)]["reason"]


def _earlier(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    con.execute("CREATE TABLE fct_recommendation (day DATE, gpu_uuid VARCHAR, gpu_model VARCHAR, default_limit_w DOUBLE)")
    con.executemany("INSERT INTO fct_recommendation VALUES (?, ?, ?, ?)", rows)


def test_each_gpu_takes_its_own_source_in_order_audit_then_its_own_earlier_default_then_none():
    con = duckdb.connect()
    # GPU-A: recorded at 400 W on a capped day by the code before this fix; its audit knows 500 W.
    # GPU-B: a 500 W board with no audit. GPU-C: a 400 W board. GPU-D: new today.
    _earlier(con, [(DAY_1, "GPU-A", A100, 400.0), (DAY_1, "GPU-B", A100, 500.0), (DAY_1, "GPU-C", A100, 400.0),
                   (DAY_2, "GPU-B", A100, 700.0)])  # a row of the day itself (a re-run) is no earlier day
    first = dt.datetime.combine(DAY_1, dt.time(1), dt.timezone.utc)
    _audit(con, [("GPU-A", "apply", first + dt.timedelta(hours=2), 300.0, 250.0),
                 ("GPU-A", "apply", first, HGX_BOARD_W, 300.0),
                 ("GPU-C", "refuse", first, 400.0, 400.0),
                 ("GPU-D", "apply", first + dt.timedelta(days=2), 450.0, 300.0)])  # after the day
    earlier = earlier_default_limits_w(con, DAY_2)
    assert earlier == EarlierDefaults(audited_w={"GPU-A": 500.0}, gpu_w={"GPU-A": 400.0, "GPU-B": 500.0, "GPU-C": 400.0},
                                      model_w={A100: 500.0})
    assert limit_seen_w("GPU-A", A100, 300.0, earlier)[0] == 500.0
    assert limit_seen_w("GPU-B", A100, 300.0, earlier)[0] == 500.0
    assert limit_seen_w("GPU-C", A100, 250.0, earlier)[0] == 400.0  # not the model's 500 W
    assert limit_seen_w("GPU-D", A100, 300.0, earlier) == (300.0, "its readings show")  # the catalogue's then
    assert limit_seen_w("GPU-B", A100, 520.0, earlier) == (520.0, "its readings show")  # a higher reading stands


def test_a_first_apply_whose_limit_before_was_not_read_leaves_the_gpus_earlier_default():
    """An apply audited without the limit before (NVML could not read it) says nothing of the
    device's default; the later applies' limits before are the agent's own caps."""
    con = duckdb.connect()
    _earlier(con, [(DAY_1, "GPU-A", A100, HGX_BOARD_W)])
    first = dt.datetime.combine(DAY_1, dt.time(1), dt.timezone.utc)
    _audit(con, [("GPU-A", "apply", first, None, 300.0), ("GPU-A", "apply", first + dt.timedelta(hours=1), 300.0, 250.0)])
    earlier = earlier_default_limits_w(con, DAY_2)
    assert earlier.audited_w == {}
    assert limit_seen_w("GPU-A", A100, 250.0, earlier)[0] == HGX_BOARD_W


def test_an_unknown_model_without_its_gpus_history_takes_the_models_earlier_default():
    earlier = EarlierDefaults(audited_w={}, gpu_w={"GPU-A": 350.0}, model_w={"NVIDIA A800-SXM4-80GB": 400.0})
    assert limit_seen_w("GPU-A", "NVIDIA A800-SXM4-80GB", 250.0, earlier)[0] == 350.0
    assert limit_seen_w("GPU-new", "NVIDIA A800-SXM4-80GB", 250.0, earlier)[0] == 400.0
    assert limit_seen_w("GPU-new", A100, 250.0, EarlierDefaults({}, {}, {A100: 500.0}))[0] == 250.0
