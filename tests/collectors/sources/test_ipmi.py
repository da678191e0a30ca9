"""IPMI source with a replayed command runner: parsing of ipmitool's text output (units,
"no reading", "disabled"), DCMI absent, retries, and the password kept off the command line."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from joulehouse.collectors.sources.ipmi import (DCMI_DEACTIVATED, CommandResult, IpmiSource, parse_dcmi_power, parse_sdr_elist,
                                               pick_readings)

# Output shapes as ipmitool 1.8.19 prints them (the first from ipmi_sim, the second in the
# shape of a vendor BMC with PSU sensors, unreadable and disabled sensors).
SDR_SIM = """\
Pwr Consumption  | 01h | ok  |  7.1 | 1200 Watts
Inlet Temp       | 02h | ok  | 55.1 | 24 degrees C
Exhaust Temp     | 03h | ok  |  7.1 | 38 degrees C
Fan1             | 04h | ok  | 29.1 | 8000 RPM
Fan2             | 05h | ok  | 29.1 | 8100 RPM
"""
SDR_VENDOR = """\
Fan1 RPM         | 30h | ok  |  7.1 | 5640 RPM
Fan2 RPM         | 31h | ns  |  7.1 | No Reading
Fan3 RPM         | 32h | ok  |  7.1 | 5760 RPM
Inlet Temp       | 04h | ok  |  7.1 | 21 degrees C
Exhaust Temp     | 01h | ns  |  7.1 | Disabled
Temp             | 0Eh | ok  |  3.1 | 45 degrees C
Current 1        | 6Ah | ok  | 10.1 | 1.20 Amps
Voltage 1        | 6Ch | ok  | 10.1 | 232 Volts
PS1 Status       | 63h | ok  | 10.1 | Presence detected
Pwr Consumption  | 77h | ok  |  7.1 | 252 Watts
"""
DCMI_OK = """
    Instantaneous power reading:                  1150 Watts
    Minimum during sampling period:               1150 Watts
    Maximum during sampling period:               1150 Watts
    Average power reading over sample period:     1150 Watts
    IPMI timestamp:                           11/29/26 11:25:47 UTC    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated

"""


def test_sdr_units_and_unreadable_sensors():
    sensors = {s.name: s for s in parse_sdr_elist(SDR_VENDOR)}
    assert (sensors["Fan1 RPM"].value, sensors["Fan1 RPM"].unit) == (5640.0, "rpm")
    assert sensors["Fan2 RPM"].value is None and sensors["Exhaust Temp"].value is None
    assert sensors["PS1 Status"].value is None
    readings = pick_readings(list(sensors.values()))
    assert readings == {"sdr_power_w": 252.0, "inlet_temp_c": 21.0, "exhaust_temp_c": None,
                        "fan_rpm_avg": 5700.0}  # unreadable Fan2 is left out of the mean, not 0


SDR_SUPPLIES = """\
System Fan 1     | 30h | ok  | 29.1 | 9403 RPM
PS1 Input Power  | 64h | ok  | 10.1 | 280 Watts
PS1 Curr Out %   | 65h | ok  | 10.1 | 34 percent
PS2 Input Power  | 66h | ok  | 10.2 | 275 Watts
Front Panel Temp | 21h | ok  | 12.1 | 23 degrees C
"""


def test_a_server_without_a_total_sensor_draws_the_sum_of_its_supplies_inputs():
    """An Intel board's SDR names each supply's input and no total: the first supply's alone was
    taken as the server's power (280 of 555 W), and with it the node energy the accounts charge."""
    assert pick_readings(parse_sdr_elist(SDR_SUPPLIES))["sdr_power_w"] == 555.0
    one_unread = SDR_SUPPLIES.replace("275 Watts", "No Reading")
    assert pick_readings(parse_sdr_elist(one_unread))["sdr_power_w"] is None, "unknown, not one supply's"
    with_total = SDR_SUPPLIES + "Pwr Consumption  | 77h | ok  |  7.1 | 560 Watts\n"
    assert pick_readings(parse_sdr_elist(with_total))["sdr_power_w"] == 560.0, "the BMC's own total first"


def test_a_total_sensor_not_read_this_poll_leaves_the_server_unknown_not_a_component():
    """With the total unreadable, the one other Watts sensor (a CPU's 180 W) was taken as the
    server's 1,240 W, and the warehouse used it wherever DCMI is absent."""
    sdr = SDR_VENDOR.replace("252 Watts", "1240 Watts") + "CPU Power        | 78h | ok  |  7.1 | 180 Watts\n"
    assert pick_readings(parse_sdr_elist(sdr))["sdr_power_w"] == 1240.0
    unread = sdr.replace("| ok  |  7.1 | 1240 Watts", "| ns  |  7.1 | No Reading")
    assert pick_readings(parse_sdr_elist(unread))["sdr_power_w"] is None


def test_dcmi_reading_and_deactivated_measurement():
    assert parse_dcmi_power(DCMI_OK) == 1150.0
    assert parse_dcmi_power(DCMI_OK.replace("activated", "deactivated")) is None
    assert parse_dcmi_power("") is None


class Replay:
    """A command runner that answers from a table and records every call."""

    def __init__(self, answers: dict[str, list[CommandResult]]):
        self.answers = answers
        self.calls: list[tuple[list[str], Mapping[str, str]]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> CommandResult:
        self.calls.append((list(argv), env))
        key = " ".join(argv[argv.index("1") + 1:])  # the words after "-R 1"
        queue = self.answers[key]
        return queue.pop(0) if len(queue) > 1 else queue[0]


def test_a_bmc_without_dcmi_is_not_asked_again_and_power_stays_null():
    runner = Replay({
        "dcmi power reading": [CommandResult(1, "", "DCMI request failed because: Invalid command (c1)\n")],
        "sdr elist": [CommandResult(0, SDR_SIM, "")],
    })
    source = IpmiSource("node-02", password="pw", runner=runner)
    first, second = source.read().to_pylist()[0], source.read().to_pylist()[0]
    assert first["power_w"] is None and first["sdr_power_w"] == 1200.0 and first["error"] is None
    assert source.dcmi_supported is False
    assert [" ".join(c[0][-3:]) for c in runner.calls].count("dcmi power reading") == 1
    assert second["fan_rpm_avg"] == 8050.0


def test_a_dcmi_refusal_for_the_present_state_is_asked_again_next_poll():
    """Completion code D5 (not in the present state: the supplies' PMBus readings coming up after a
    BMC reset) had turned DCMI off until the collector restarted: power_w NULL for good."""
    runner = Replay({
        "dcmi power reading": [CommandResult(1, "", "DCMI request failed because: Command not supported in present "
                                                    "state (d5)\n"), CommandResult(0, DCMI_OK, "")],
        "sdr elist": [CommandResult(0, SDR_SIM, "")],
    })
    source = IpmiSource("node-02", runner=runner)
    assert [source.read().to_pylist()[0]["power_w"] for _ in range(3)] == [None, 1150.0, 1150.0]
    assert source.dcmi_supported is True


def test_timeouts_are_retried_within_the_bound_then_marked_and_the_password_stays_off_argv():
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    runner = Replay({"dcmi power reading": [timeout, CommandResult(0, DCMI_OK, "")],
                     "sdr elist": [timeout]})
    sleeps: list[float] = []
    source = IpmiSource("node-02", password="hunter2", retries=2, backoff_s=0.5, runner=runner, sleep=sleeps.append)
    row = source.read().to_pylist()[0]
    assert "after 3 attempts" in row["error"] and row["sdr_power_w"] is None
    assert row["power_w"] == 1150.0  # read before the BMC went silent: kept
    assert sleeps == [0.5, 0.5, 1.0]  # one retry for DCMI (then it answered), two for the SDR
    assert all("hunter2" not in argv for argv, _ in runner.calls)
    assert all(env["IPMI_PASSWORD"] == "hunter2" and "-E" in argv for argv, env in runner.calls)
    assert all(argv[argv.index("-C") + 1] == "3" for argv, _ in runner.calls)


def test_a_reading_is_stamped_when_the_bmc_answered_not_when_the_poll_began():
    """A busy BMC times out twice (5 s each, then 0.5 s and 1 s of backoff) before it answers:
    the power it gave is stamped 11.5 s after the poll began, where the energy integral needs it."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    now = [start]

    def advance(seconds: float) -> None:
        now[0] += dt.timedelta(seconds=seconds)

    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout, timeout, CommandResult(0, DCMI_OK, "")],
                     "sdr elist": [CommandResult(0, SDR_SIM, "")]})

    def runner(argv, timeout_s, env):
        result = replay(argv, timeout_s, env)
        advance(timeout_s if result.timed_out else 0.25)
        return result

    source = IpmiSource("node-02", retries=2, backoff_s=0.5, timeout_s=5.0, runner=runner,
                        clock=lambda: now[0], sleep=advance)
    row = source.read().to_pylist()[0]
    assert row["power_w"] == 1150.0 and row["error"] is None
    assert row["sampled_at"] == start + dt.timedelta(seconds=5 + 0.5 + 5 + 1.0 + 0.25)



def test_a_byte_that_is_not_utf8_in_ipmitools_output_costs_no_reading(tmp_path):
    """A BMC's OEM sensor name in Latin-1 (the real ipmitool runner, a stand-in ipmitool): the DCMI
    power and the good sensors still land, and the odd byte is kept visibly in the name and error."""
    from joulehouse.collectors.sources.ipmi import run_command

    fake = tmp_path / "ipmitool"
    fake.write_bytes(b"""#!/bin/sh
case "$*" in
  *dcmi*) printf '    Instantaneous power reading:   285 Watts\\n    Power reading state is:   activated\\n' ;;
  *sdr*)  printf 'Pwr Consumption \\260 | 77h | ok  |  7.1 | 252 Watts\\nInlet Temp       | 04h | ok  |  7.1 | 23 degrees C\\n'
          printf 'OEM \\260Sensor      | 70h | ok  |  7.1 | 0x00\\n'
          printf 'sensor \\260 slow\\n' >&2; exit "${SDR_RC:-0}" ;;
esac
""")
    fake.chmod(0o755)
    row = IpmiSource("node-01", ipmitool=str(fake)).read().to_pylist()[0]
    assert (row["power_w"], row["sdr_power_w"], row["inlet_temp_c"], row["error"]) == (285.0, 252.0, 23.0, None)
    names = [s.name for s in parse_sdr_elist(run_command([str(fake), "sdr", "elist"], 5.0, {}).stdout)]
    assert "OEM \\xb0Sensor" in names
    failed = IpmiSource("node-01", ipmitool=str(fake), runner=lambda argv, t, env: run_command(argv, t, {"SDR_RC": "1"}))
    row = failed.read().to_pylist()[0]
    assert row["power_w"] == 285.0 and row["error"] == "sdr elist failed: sensor \\xb0 slow"


def test_an_ipmitool_that_cannot_run_is_a_failed_poll_with_a_reason_not_an_exception(tmp_path):
    """A stand-in ipmitool without its execute bit (a package half installed, a noexec mount): the
    poll keeps its row with the reason and no power, instead of a traceback every poll."""
    fake = tmp_path / "ipmitool"
    fake.write_text("#!/bin/sh\necho never\n")
    fake.chmod(0o644)
    row = IpmiSource("node-01", ipmitool=str(fake)).read().to_pylist()[0]
    assert row["power_w"] is None and "cannot run" in row["error"] and str(fake) in row["error"]


def test_a_bmc_answering_nothing_readable_is_a_failed_read_not_a_row_of_silent_nulls():
    """Exit status 0 and garbage: an all-NULL row with no error, which the collector counted as a
    good read (review, helper-92)."""
    from joulehouse.collectors.sources.base import read_failure

    runner = Replay({"dcmi power reading": [CommandResult(0, "\x00\x13garbage\n", "")],
                     "sdr elist": [CommandResult(0, "garbage | that | is | no | sensor\n", "")]})
    table = IpmiSource("node-02", runner=runner).read()
    assert "no power, temperature or fan reading could be read" in read_failure(table)


SDR_PARTS_FIRST = """\
GPU Total Power  | 70h | ok  | 10.1 | 2400 Watts
Total Power      | 71h | ok  | 10.1 | 4100 Watts
PSU1 Inlet Temp  | 20h | ok  | 10.1 | 41 degrees C
Inlet Temp       | 21h | ok  | 12.1 | 24 degrees C
CPU1 VR Outlet Temp | 22h | ok | 3.1 | 71 degrees C
Exhaust Temp     | 23h | ok  | 7.1 | 38 degrees C
"""


def test_a_parts_sensor_named_like_the_servers_is_not_taken_for_it():
    """The first name match won: a GPU board's 2,400 W stood for the server's 4,100 W, a supply's
    41 C for the inlet air, a CPU regulator's 71 C for the exhaust (review, helper-92)."""
    readings = pick_readings(parse_sdr_elist(SDR_PARTS_FIRST))
    assert (readings["sdr_power_w"], readings["inlet_temp_c"], readings["exhaust_temp_c"]) == (4100.0, 24.0, 38.0)
    two_servers = parse_sdr_elist("Total Power | 71h | ok | 10.1 | 4100 Watts\n"
                                  "Sys Power   | 72h | ok | 10.1 | 3000 Watts\n")
    assert pick_readings(two_servers)["sdr_power_w"] is None  # which is the server's is unknown: not a guess


def test_a_server_with_two_inlet_and_two_exhaust_sensors_keeps_its_temperatures():
    """Two of the server's own, disagreeing by a degree, read as unknown: every row of an 8-GPU
    server NULL (review, helper-94). The coolest air in and the hottest out."""
    sensors = parse_sdr_elist("Inlet Temp 1 | 20h | ok | 10.1 | 24 degrees C\nInlet Temp 2 | 21h | ok | 10.1 | 25 degrees C\n"
                              "Exhaust Temp 1 | 22h | ok | 7.1 | 38 degrees C\nExhaust Temp 2 | 23h | ok | 7.1 | 41 degrees C\n")
    readings = pick_readings(sensors)
    assert (readings["inlet_temp_c"], readings["exhaust_temp_c"]) == (24.0, 41.0)


class FakeTime:
    """A UTC clock that moves only when a call times out (its timeout), answers (0.25 s) or sleeps."""

    def __init__(self, replay: Replay):
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        self.elapsed_s = 0.0  # the monotonic clock: steps of the wall clock do not move it
        self.replay = replay

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
        self.elapsed_s += seconds

    def runner(self, argv, timeout_s, env):
        result = self.replay(argv, timeout_s, env)
        self.advance(timeout_s if result.timed_out else 0.25)
        return result

    def source(self, **kw) -> IpmiSource:
        return IpmiSource("node-02", runner=self.runner, clock=lambda: self.now, sleep=self.advance,
                          monotonic=lambda: self.elapsed_s, **kw)


def _dcmi_calls(replay: Replay) -> int:
    return [" ".join(argv[-3:]) for argv, _ in replay.calls].count("dcmi power reading")


def test_a_bmc_whose_dcmi_never_answers_keeps_its_sdr_readings_and_is_asked_dcmi_only_every_so_often(caplog):
    """Every DCMI power reading timed out: the poll spent its retries on it, then failed as a whole,
    so inlet, exhaust, fans and the SDR power were lost with it, poll after poll (review)."""
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout], "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    fake = FakeTime(replay)
    source = fake.source(retries=1, dcmi_silent_polls=3, dcmi_retry_interval_s=300)
    rows = [source.read().to_pylist()[0] for _ in range(5)]
    for row in rows:
        assert row["error"] is None and row["power_w"] is None
        assert (row["sdr_power_w"], row["inlet_temp_c"], row["exhaust_temp_c"], row["fan_rpm_avg"]) == (
            1200.0, 24.0, 38.0, 8050.0)
    assert [r["power_w_null_reason"].split(":")[0] for r in rows] == ["dcmi no answer"] * 3 + ["dcmi not asked"] * 2
    assert _dcmi_calls(replay) == 3 * 2, "two attempts on each of the first three polls, none after"
    said = [r for r in caplog.records if "asked again every 300 s" in r.getMessage()]
    assert len(said) == 1, "the back-off is said once in the log"

    fake.advance(300)
    assert source.read().to_pylist()[0]["power_w_null_reason"].startswith("dcmi no answer")
    assert _dcmi_calls(replay) == 7, "backed off, DCMI is tried once"
    assert source.read().to_pylist()[0]["power_w_null_reason"].startswith("dcmi not asked")

    replay.answers["dcmi power reading"] = [CommandResult(0, DCMI_OK, "")]
    fake.advance(300)
    back = [source.read().to_pylist()[0] for _ in range(2)]
    assert [(r["power_w"], r["power_w_null_reason"]) for r in back] == [(1150.0, None), (1150.0, None)]


def test_a_wall_clock_stepped_back_does_not_hold_dcmi_unasked(caplog):
    """The back-off ran on the wall clock: stepped back 8 h (chrony fixing an RTC kept in local
    time), DCMI stayed unasked for 8 h, 5,760 rows of NULL power (review, helper-100)."""
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout], "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    fake = FakeTime(replay)
    source = fake.source(retries=0, dcmi_silent_polls=2, dcmi_retry_interval_s=300)
    assert [source.read().to_pylist()[0]["power_w_null_reason"].split(":")[0] for _ in range(3)] == [
        "dcmi no answer", "dcmi no answer", "dcmi not asked"]
    fake.now -= dt.timedelta(hours=8)
    replay.answers["dcmi power reading"] = [CommandResult(0, DCMI_OK, "")]
    fake.advance(300)
    assert source.read().to_pylist()[0]["power_w"] == 1150.0


def test_polls_with_the_whole_bmc_down_end_a_row_of_silent_dcmi_polls():
    """One silent DCMI, a BMC reset (every call unanswered), then two silent polls: the count ran
    on over the reset and backed DCMI off one poll early (review, helper-100)."""
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    sdr = CommandResult(0, SDR_SIM, "")
    replay = Replay({"dcmi power reading": [timeout], "sdr elist": [sdr]})
    source = FakeTime(replay).source(retries=0, dcmi_silent_polls=3)
    source.read()
    replay.answers["sdr elist"] = [timeout]
    for _ in range(5):
        source.read()
    replay.answers["sdr elist"] = [sdr]
    reasons = [source.read().to_pylist()[0]["power_w_null_reason"].split(":")[0] for _ in range(3)]
    assert reasons == ["dcmi no answer", "dcmi no answer", "dcmi no answer"]


def test_ipmitools_own_no_response_to_dcmi_counts_as_no_answer():
    """ipmitool gives up on a silent DCMI itself ("Unable to get DCMI information", exit 1) when its
    session timeout is inside ours: a warning every poll and the ~2 s wait, for ever, before."""
    replay = Replay({"dcmi power reading": [CommandResult(1, "", "\n    Unable to get DCMI information\n")],
                     "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    source = FakeTime(replay).source(dcmi_silent_polls=2)
    rows = [source.read().to_pylist()[0] for _ in range(3)]
    assert [r["power_w_null_reason"].split(":")[0] for r in rows] == ["dcmi no answer", "dcmi no answer", "dcmi not asked"]
    assert _dcmi_calls(replay) == 2 and all(r["sdr_power_w"] == 1200.0 for r in rows)


def test_a_bmc_that_is_down_is_not_taken_for_a_silent_dcmi():
    """Neither DCMI nor the SDR answers: the row fails with both named, and DCMI is not backed off
    (the BMC, not its DCMI, was away)."""
    timeout = CommandResult(-1, "", "no answer within 5 s", timed_out=True)
    replay = Replay({"dcmi power reading": [timeout], "sdr elist": [timeout]})
    source = FakeTime(replay).source(retries=1, dcmi_silent_polls=2)
    rows = [source.read().to_pylist()[0] for _ in range(3)]
    assert all("'ipmitool dcmi power reading' after 2 attempts" in r["error"] and "sdr elist" in r["error"] for r in rows)
    assert all(r["power_w_null_reason"].startswith("dcmi no answer") for r in rows)
    assert _dcmi_calls(replay) == 3 * 2 and len(replay.calls) == 3 * 3, "one SDR try after DCMI's two"


def test_a_deactivated_power_measurement_is_said_in_each_row_and_once_in_the_log(caplog):
    """'Power reading state is: deactivated' is a state of the BMC, not a failed read: power_w
    stayed NULL with no word of why, like a reading that was never taken (review)."""
    replay = Replay({"dcmi power reading": [CommandResult(0, DCMI_OK.replace("activated", "deactivated"), "")],
                     "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    source = FakeTime(replay).source()
    rows = [source.read().to_pylist()[0] for _ in range(3)]
    assert all((r["power_w"], r["power_w_null_reason"], r["error"], r["sdr_power_w"])
               == (None, DCMI_DEACTIVATED, None, 1200.0) for r in rows)
    assert len([r for r in caplog.records if "deactivated" in r.getMessage()]) == 1
    absent = Replay({"dcmi power reading": [CommandResult(1, "", "DCMI request failed because: Invalid command (c1)\n")],
                     "sdr elist": [CommandResult(0, SDR_SIM, "")]})
    source = FakeTime(absent).source()
    reasons = [source.read().to_pylist()[0]["power_w_null_reason"] for _ in range(2)]
    assert all(r.startswith("dcmi absent: the BMC answered 'DCMI request failed because: Invalid command (c1)'")
               for r in reasons), "a BMC without DCMI is told from one whose measurement is off"
