"""ipmitool says "Unable to establish IPMI v2 / RMCP+ session" both when the BMC is away and when it
refuses the session (a wrong user or password). Only the time tells them apart: an away BMC is given
up after ipmitool's session timeout (-N, half of ipmi_timeout_s), a refusal comes back at once. The
real ipmi_sim case is in test_ipmi_sim.py; these replay ipmitool's words at chosen speeds."""

from __future__ import annotations

import pytest
from test_ipmi import SDR_SIM, FakeTime, Replay, _dcmi_calls

from joulehouse.collectors.sources.ipmi import CommandResult

NO_SESSION = CommandResult(1, "", "Error: Unable to establish IPMI v2 / RMCP+ session\n")


class Taking(FakeTime):
    """Each call answers after `answer_s` (a refusal: at once; an away BMC: ipmitool's -N and -R)."""

    def __init__(self, replay: Replay, answer_s: float):
        super().__init__(replay)
        self.answer_s = answer_s

    def runner(self, argv, timeout_s, env):
        self.advance(self.answer_s)
        return self.replay(argv, timeout_s, env)


def test_a_session_refused_at_once_is_not_retried_and_names_the_credentials():
    replay = Replay({"dcmi power reading": [NO_SESSION], "sdr elist": [NO_SESSION]})
    fake = Taking(replay, answer_s=0.05)
    source = fake.source(timeout_s=5.0, retries=2, backoff_s=0.5, dcmi_silent_polls=2)
    rows = [source.read().to_pylist()[0] for _ in range(3)]
    assert len(replay.calls) == 3 * 2, "one DCMI and one SDR call a poll, no retries, no back-off sleeps"
    assert fake.elapsed_s == pytest.approx(3 * 2 * 0.05)
    assert all(r["power_w_null_reason"].startswith("dcmi session refused: BMC 127.0.0.1:623 refused the session")
               for r in rows)
    assert all("ipmi_user or ipmi_password" in r["error"] for r in rows)
    # DCMI is not taken for a silent one (backed off): the whole BMC refused, and DCMI is asked each poll
    assert _dcmi_calls(replay) == 3


def test_no_session_after_ipmitools_whole_session_timeout_is_still_a_bmc_away():
    replay = Replay({"dcmi power reading": [NO_SESSION], "sdr elist": [NO_SESSION]})
    sleeps: list[float] = []
    fake = Taking(replay, answer_s=4.0)  # -N 2 -R 1: given up after its session timeout, twice
    source = fake.source(timeout_s=5.0, retries=2, backoff_s=0.5)
    source._sleep = sleeps.append
    row = source.read().to_pylist()[0]
    assert "gave no answer to 'ipmitool dcmi power reading' after 3 attempts" in row["error"]
    assert row["power_w_null_reason"].startswith("dcmi no answer")
    assert sleeps == [0.5, 1.0] and len(replay.calls) == 3 + 1


def test_a_refusal_answered_with_a_reading_in_between_keeps_the_reading():
    """The SDR still answers when only DCMI's session was refused (a BMC out of sessions for a moment)."""
    replay = Replay({"dcmi power reading": [NO_SESSION], "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    row = Taking(replay, answer_s=0.05).source().read().to_pylist()[0]
    assert row["sdr_power_w"] == 1200.0 and row["error"] is None
    assert row["power_w_null_reason"].startswith("dcmi session refused")
