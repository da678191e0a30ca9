"""The IPMI source's DCMI back-off (ipmi_dcmi.py): a refusal other than "Invalid command" is said once
in the log and backed off like a silent DCMI, with each row still saying why power_w is NULL; and the
back-off's two numbers are [collector] settings an operator with a slow BMC can set."""

from __future__ import annotations

import logging

import pytest
from test_ipmi import DCMI_OK, SDR_SIM, FakeTime, Replay, _dcmi_calls

from joulehouse.collectors.settings import SettingsError, load_node_settings
from joulehouse.collectors.sources.ipmi import CommandResult, IpmiSource

INVALID_DATA = "DCMI request failed because: Invalid data field in request (cc=cc)"
PRESENT_STATE = "DCMI request failed because: Command not supported in present state (d5)"
POLL_INTERVAL_S = 5.0  # the collector's default ipmi_interval_s


def _refusing(text: str) -> Replay:
    return Replay({"dcmi power reading": [CommandResult(1, "", f"\n    {text}\n")],
                   "sdr elist": [CommandResult(0, SDR_SIM, "")]})


def _poll(source: IpmiSource, fake: FakeTime, polls: int) -> list[dict]:
    rows = []
    for _ in range(polls):
        started = fake.elapsed_s
        rows.append(source.read().to_pylist()[0])
        fake.advance(max(0.0, POLL_INTERVAL_S - (fake.elapsed_s - started)))
    return rows


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("joulehouse.collectors.sources.ipmi")]


@pytest.mark.parametrize("text", [INVALID_DATA, PRESENT_STATE], ids=["cc", "d5"])
def test_a_dcmi_refusal_is_said_once_and_backed_off_while_every_row_says_why(caplog, text):
    """A BMC refusing DCMI with a completion code other than "Invalid command" was warned about at
    every poll, for ever (100 polls: 100 warnings, DCMI asked 100 times). Now: one line, DCMI asked
    3 times and then every 300 s, and each row's power_w_null_reason still names the refusal."""
    caplog.set_level(logging.INFO)
    replay = _refusing(text)
    fake = FakeTime(replay)
    source = fake.source(dcmi_silent_polls=3, dcmi_retry_interval_s=300)
    rows = _poll(source, fake, 100)  # 500 s
    assert len(_lines(caplog)) == 1 and text in _lines(caplog)[0]
    assert all(r["power_w"] is None and r["sdr_power_w"] == 1200.0 and r["error"] is None for r in rows)
    assert all(text in r["power_w_null_reason"] for r in rows), "every row says which refusal"
    kinds = [r["power_w_null_reason"].split(":")[0] for r in rows]
    assert kinds[:3] == ["dcmi failed"] * 3 and kinds[3] == "dcmi not asked"
    assert kinds.count("dcmi failed") == 4 and _dcmi_calls(replay) == 4, "three in a row, then one at 300 s"
    assert source.dcmi_supported is not False, "a refusal for now is no BMC without DCMI: still asked"


def test_a_refusal_that_changes_is_said_again_and_dcmi_answering_again_is_said_once(caplog):
    caplog.set_level(logging.INFO)
    replay = _refusing(PRESENT_STATE)
    fake = FakeTime(replay)
    source = fake.source(dcmi_silent_polls=2, dcmi_retry_interval_s=60)
    _poll(source, fake, 20)
    replay.answers["dcmi power reading"] = [CommandResult(1, "", INVALID_DATA + "\n")]
    changed = _poll(source, fake, 20)
    assert [INVALID_DATA in line for line in _lines(caplog)] == [False, True]
    assert changed[-1]["power_w_null_reason"].startswith("dcmi not asked") and INVALID_DATA in changed[-1]["power_w_null_reason"]
    replay.answers["dcmi power reading"] = [CommandResult(0, DCMI_OK, "")]
    back = _poll(source, fake, 20)  # 100 s: past the next retry
    assert back[-1]["power_w"] == 1150.0 and back[-1]["power_w_null_reason"] is None
    assert all((r["power_w"] is None) == (r["power_w_null_reason"] is not None) for r in back), "each NULL says why"
    lines = _lines(caplog)
    assert len(lines) == 3 and "answers DCMI power reading again" in lines[-1]


def test_a_refusal_in_a_row_of_silent_polls_does_not_restart_the_count():
    """Silent, refused, silent: three polls without a reading, backed off at three as either alone."""
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout, CommandResult(1, "", PRESENT_STATE), timeout],
                     "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    fake = FakeTime(replay)
    kinds = [r["power_w_null_reason"].split(":")[0]
             for r in _poll(fake.source(retries=0, dcmi_silent_polls=3), fake, 4)]
    assert kinds == ["dcmi no answer", "dcmi failed", "dcmi no answer", "dcmi not asked"]


@pytest.mark.parametrize("given_in", ["toml", "env"])
def test_the_back_off_settings_reach_the_source(tmp_path, given_in):
    """dcmi_silent_polls and dcmi_retry_interval_s were constructor arguments only: a slow BMC's
    operator could not set them. Set to 1 poll and 60 s, DCMI backs off after the first silent poll."""
    values = {"ipmi_dcmi_silent_polls": "1", "ipmi_dcmi_retry_interval_s": "60"}
    path = tmp_path / "site.toml"
    path.write_text(("[collector]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())) if given_in == "toml" else "")
    env = {f"JOULEHOUSE_COLLECTOR__{k.upper()}": v for k, v in values.items()} if given_in == "env" else {}
    settings = load_node_settings(path, env=env).collector
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout], "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    fake = FakeTime(replay)
    source = IpmiSource.from_settings("node-02", settings, runner=fake.runner, clock=lambda: fake.now,
                                      sleep=fake.advance, monotonic=lambda: fake.elapsed_s)
    reasons = [r["power_w_null_reason"] for r in _poll(source, fake, 15)]  # the first poll's retries, then 70 s
    assert [r.split(":")[0] for r in reasons[:3]] == ["dcmi no answer", "dcmi not asked", "dcmi not asked"]
    assert "asked again every 60 s" in reasons[1]
    assert [r.split(":")[0] for r in reasons].count("dcmi no answer") == 2, "the first poll, and one 60 s later"


@pytest.mark.parametrize(("setting", "value"), [("ipmi_dcmi_silent_polls", "0"), ("ipmi_dcmi_silent_polls", "1.5"),
                                                ("ipmi_dcmi_retry_interval_s", "0"), ("ipmi_dcmi_retry_interval_s", "-5"),
                                                ("ipmi_dcmi_retry_interval_s", "inf"), ("ipmi_dcmi_silent_polls", "true")])
def test_a_bad_back_off_setting_is_refused_in_one_line_naming_it(tmp_path, setting, value):
    key = f"JOULEHOUSE_COLLECTOR__{setting.upper()}"
    with pytest.raises(SettingsError) as from_env:
        load_node_settings(env={key: value})
    assert str(from_env.value).startswith(f"[collector].{setting} = {value!r} (from {key}): ")
    path = tmp_path / "site.toml"
    path.write_text(f"[collector]\n{setting} = {value}\n")
    with pytest.raises(SettingsError) as from_file:
        load_node_settings(path, env={})
    assert str(from_file.value).startswith(f"[collector].{setting} = ") and f"(in {path})" in str(from_file.value)
    assert "\n" not in str(from_env.value) + str(from_file.value)
