"""An IpmiSource built in code (tests, the simulator, a script) reaches its BMC and backs DCMI off as
the [collector] defaults say: the numbers were written twice, in the settings and in the
constructor, and one edited alone would make a source built in code behave unlike `collect` with no
settings file."""

from __future__ import annotations

from test_ipmi import SDR_SIM, FakeTime, Replay, _dcmi_calls
from test_ipmi_dcmi import _poll

from joulehouse.collectors.settings import CollectorSettings, load_node_settings
from joulehouse.collectors.sources.ipmi import CommandResult, IpmiSource

TIMEOUT = CommandResult(-1, "", "no answer within 5 s", timed_out=True)


def _silent_dcmi() -> tuple[FakeTime, Replay]:
    replay = Replay({"dcmi power reading": [TIMEOUT], "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    return FakeTime(replay), replay


def _backing_off(source_of) -> tuple[list[str], int]:
    """Each poll's power_w_null_reason over 700 s of a DCMI that never answers, and how often DCMI was asked."""
    fake, replay = _silent_dcmi()
    reasons = [row["power_w_null_reason"] for row in _poll(source_of(fake), fake, 140)]
    return reasons, _dcmi_calls(replay)


def test_a_source_built_in_code_backs_off_as_the_default_settings_do():
    def in_code(fake: FakeTime) -> IpmiSource:
        return fake.source()  # no back-off arguments: the constructor's defaults

    def from_defaults(fake: FakeTime) -> IpmiSource:
        return IpmiSource.from_settings("node-02", load_node_settings(env={}).collector, runner=fake.runner,
                                        clock=lambda: fake.now, sleep=fake.advance, monotonic=lambda: fake.elapsed_s)

    assert _backing_off(in_code) == _backing_off(from_defaults)
    defaults = CollectorSettings()
    reasons, _ = _backing_off(in_code)
    kinds = [r.split(":")[0] for r in reasons]
    silent = defaults.ipmi_dcmi_silent_polls
    assert kinds[:silent] == ["dcmi no answer"] * silent and kinds[silent] == "dcmi not asked"
    assert f"backed off after {silent} polls" in reasons[silent]
    assert f"asked again every {defaults.ipmi_dcmi_retry_interval_s:g} s" in reasons[silent]


def test_a_source_built_in_code_calls_ipmitool_as_the_default_settings_do():
    """Same BMC, port, user, timeouts and retries: the argv and the retry schedule of one call."""
    calls: dict[str, list] = {"in_code": [], "from_defaults": []}
    sleeps: dict[str, list] = {"in_code": [], "from_defaults": []}

    def runner_for(name: str):
        def runner(argv, timeout_s, env):
            calls[name].append((list(argv), timeout_s, dict(env)))
            return TIMEOUT
        return runner

    IpmiSource("node-02", runner=runner_for("in_code"), sleep=sleeps["in_code"].append).read()
    IpmiSource.from_settings("node-02", load_node_settings(env={}).collector, runner=runner_for("from_defaults"),
                             sleep=sleeps["from_defaults"].append).read()
    assert calls["in_code"] and calls["in_code"] == calls["from_defaults"]
    assert sleeps["in_code"] and sleeps["in_code"] == sleeps["from_defaults"]
