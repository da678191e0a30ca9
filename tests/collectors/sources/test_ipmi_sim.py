"""The IPMI source against OpenIPMI's ipmi_sim BMC on 127.0.0.1, read with the real ipmitool.

The BMC is configured from infra/ipmi_sim/ (LAN config, emulator commands with full SDR
records) and extended with infra/ipmi_sim/dcmi_power.c, built here with gcc, so that
`ipmitool dcmi power reading` has something to read. Sensor values live in files the
emulator polls every second; the test rewrites them while the source polls. The DCMI file
also takes "silent" (no answer, as many older BMCs), "busy" (refused for now: 0xD5) and
"<W> deactivated"."""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import string
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from joulehouse.collectors.sources.ipmi import DCMI_DEACTIVATED, IpmiSource, run_command
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import ensure_views
from joulehouse.warehouse.db import connect

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[3]
TEMPLATES = REPO / "infra" / "ipmi_sim"
for tool in ("ipmi_sim", "ipmitool", "gcc"):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed (Debian: openipmi, ipmitool, gcc)", allow_module_level=True)
if not Path("/usr/include/OpenIPMI/mcserv.h").exists():
    pytest.skip("OpenIPMI headers missing (Debian: libopenipmi-dev)", allow_module_level=True)

USER, PASSWORD = "jh-admin", "s3cret-pw"
INITIAL = {"power_w": 1200, "inlet_c": 24, "exhaust_c": 38, "fan1_rpm": 8000, "fan2_rpm": 8100, "dcmi_w": 1150}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Bmc:
    port: int
    state: Path
    process: subprocess.Popen

    def set(self, **values: int | str) -> None:
        for name, value in values.items():
            tmp = self.state / f".{name}.tmp"
            tmp.write_text(f"{value}\n")
            tmp.replace(self.state / name)  # whole file or none: the emulator never reads half

    def source(self, **kw: object) -> IpmiSource:
        return IpmiSource("node-01", bmc_host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, **kw)


@pytest.fixture(scope="module")
def bmc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bmc]:
    folder = tmp_path_factory.mktemp("ipmi_sim")
    state = folder / "state"
    state.mkdir()
    module = folder / "dcmi_power.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(module),
                    str(TEMPLATES / "dcmi_power.c")], check=True, capture_output=True)
    port = free_udp_port()
    values = dict(port=port, user=USER, password=PASSWORD, dcmi_module=module,
                  dcmi_power_file=state / "dcmi_w", state_dir=state)
    for name in ("lan.conf", "sim.emu"):
        text = string.Template((TEMPLATES / f"{name}.template").read_text()).substitute(values)
        (folder / name).write_text(text)
    log = open(folder / "ipmi_sim.log", "wb")
    process = subprocess.Popen(["ipmi_sim", "-c", str(folder / "lan.conf"), "-f", str(folder / "sim.emu"),
                                "-s", str(state), "-n"], stdout=log, stderr=subprocess.STDOUT)
    server = Bmc(port=port, state=state, process=process)
    server.set(**INITIAL)
    try:
        deadline = time.monotonic() + 15
        probe = server.source(timeout_s=2, retries=0)
        while probe.read().column("inlet_temp_c")[0].as_py() != INITIAL["inlet_c"]:
            assert process.poll() is None, (folder / "ipmi_sim.log").read_text()
            assert time.monotonic() < deadline, "ipmi_sim did not answer within 15 s"
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_reads_dcmi_power_sdr_power_temperatures_and_fans(bmc):
    row = bmc.source().read().to_pylist()[0]
    assert row["host"] == "node-01" and row["source"] == "ipmi" and row["error"] is None
    assert row["power_w"] == 1150.0           # DCMI instantaneous reading, W
    assert row["sdr_power_w"] == 1200.0       # SDR 'Pwr Consumption', 8 W per raw step
    assert (row["inlet_temp_c"], row["exhaust_temp_c"]) == (24.0, 38.0)
    assert row["fan_rpm_avg"] == 8050.0       # mean of Fan1 8000 and Fan2 8100 RPM


def test_a_value_changed_while_polling_lands_in_the_lake(bmc, lake):
    source = bmc.source()
    rows = [source.read()]
    bmc.set(power_w=1400, dcmi_w=1310, inlet_c=27)
    deadline = time.monotonic() + 10
    while rows[-1].column("sdr_power_w")[0].as_py() != 1400.0:
        assert time.monotonic() < deadline, "the new sensor value never appeared"
        time.sleep(0.25)
        rows.append(source.read())
    bmc.set(**INITIAL)
    write_dataset(lake, "node_samples", pa.concat_tables(rows))
    stored = ds.dataset(lake / "node_samples", format="parquet", partitioning="hive").to_table()
    stored = stored.sort_by("sampled_at").to_pylist()
    assert len(stored) == len(rows)
    assert (stored[0]["sdr_power_w"], stored[0]["power_w"]) == (1200.0, 1150.0)
    assert (stored[-1]["sdr_power_w"], stored[-1]["power_w"], stored[-1]["inlet_temp_c"]) == (1400.0, 1310.0, 27.0)


def test_missing_dcmi_reading_is_null_not_zero_and_the_sdr_still_reads(bmc):
    (bmc.state / "dcmi_w").unlink()
    try:
        source = bmc.source()
        row = source.read().to_pylist()[0]
    finally:
        bmc.set(dcmi_w=INITIAL["dcmi_w"])
    assert row["power_w"] is None and row["error"] is None
    # The SDR still reads (the previous test's 1400 W may still be in the emulator's poll).
    assert row["sdr_power_w"] in (1200.0, 1400.0) and row["inlet_temp_c"] is not None
    assert source.dcmi_supported is not False, "a BMC that answered 'no data' still speaks DCMI"


def test_a_bmc_that_does_not_answer_is_marked_after_bounded_retries(tmp_path):
    silent_port = free_udp_port()  # nothing listens there: every call times out
    sleeps: list[float] = []
    source = IpmiSource("node-09", bmc_host="127.0.0.1", port=silent_port, user=USER, password=PASSWORD,
                        timeout_s=2, retries=1, backoff_s=0.25, sleep=sleeps.append)
    started = time.monotonic()
    row = source.read().to_pylist()[0]
    elapsed = time.monotonic() - started
    assert row["host"] == "node-09" and "gave no answer" in row["error"] and "after 2 attempts" in row["error"]
    assert all(row[c] is None for c in ("power_w", "sdr_power_w", "inlet_temp_c", "exhaust_temp_c", "fan_rpm_avg"))
    assert sleeps == [0.25]
    # two DCMI attempts, then one of the SDR: a DCMI that gives no answer is not yet a BMC that gives none
    assert "nor to 'ipmitool sdr elist'" in row["error"]
    assert elapsed < 3 * 2 + 1, f"bounded retries took {elapsed:.1f} s"


@pytest.mark.parametrize("user, password", [(USER, "not-the-password"), ("nobody", PASSWORD)])
def test_wrong_credentials_are_said_as_a_refused_session_not_as_a_bmc_away(bmc, user, password):
    """A wrong password read as "BMC gave no answer ... after 3 attempts" and "dcmi no answer": the
    operator looked at the network. The BMC answers at once that it opens no session; ipmitool's
    own words are the same as for a BMC away, so only the time it took tells them apart."""
    calls: list[list[str]] = []

    def counted(argv, timeout_s, env):
        calls.append(list(argv))
        return run_command(argv, timeout_s, env)

    source = IpmiSource("node-01", bmc_host="127.0.0.1", port=bmc.port, user=user, password=password,
                        timeout_s=4, retries=2, backoff_s=0.5, runner=counted, sleep=pytest.fail)
    row = source.read().to_pylist()[0]
    assert row["power_w_null_reason"].startswith("dcmi session refused: BMC 127.0.0.1:")
    assert "refused the session for 'ipmitool dcmi power reading'" in row["error"]
    assert "ipmi_user or ipmi_password" in row["error"] and "and for 'ipmitool sdr elist'" in row["error"]
    assert "gave no answer" not in row["error"]
    assert [argv[-1] for argv in calls] == ["reading", "elist"], "one try each: a refusal is not retried"
    assert row["sdr_power_w"] is None and row["inlet_temp_c"] is None


def test_a_bmc_whose_dcmi_never_answers_still_has_its_sdr_read_and_dcmi_is_backed_off(bmc):
    """A BMC that drops every DCMI power reading: with a 1 s timeout, each poll spent 1 s on DCMI,
    then failed as a whole (4.5 s with the default retries): no inlet, exhaust, fans or SDR power.
    ipmitool's own give-up ("Unable to get DCMI information", timeout 2 s) counts the same."""
    bmc.set(dcmi_w="silent")
    try:
        own_words = bmc.source(timeout_s=2, retries=0).read().to_pylist()[0]
        source = bmc.source(timeout_s=1, retries=0, dcmi_silent_polls=2, dcmi_retry_interval_s=300)
        rows, took_s = [], []
        for _ in range(3):
            started = time.monotonic()
            rows.append(source.read().to_pylist()[0])
            took_s.append(time.monotonic() - started)
    finally:
        bmc.set(dcmi_w=INITIAL["dcmi_w"])
    for row in [own_words, *rows]:
        assert row["error"] is None and row["power_w"] is None
        assert row["sdr_power_w"] is not None and row["inlet_temp_c"] is not None and row["fan_rpm_avg"] is not None
    assert own_words["power_w_null_reason"].startswith("dcmi no answer: ipmitool: Unable to get DCMI information")
    assert [r["power_w_null_reason"].split(":")[0] for r in rows] == ["dcmi no answer", "dcmi no answer", "dcmi not asked"]
    assert took_s[2] < 1.0, f"a backed-off DCMI still cost the poll {took_s[2]:.1f} s"


def test_a_deactivated_power_measurement_is_said_in_its_row_and_lands_in_the_lake(bmc, tmp_path, lake):
    """DCMI answering "Power reading state is: deactivated" left power_w NULL like a read that
    failed: the row now says which. A file written before the column existed still reads."""
    bmc.set(dcmi_w="1150 deactivated")
    try:
        table = bmc.source().read()
    finally:
        bmc.set(dcmi_w=INITIAL["dcmi_w"])
    row = table.to_pylist()[0]
    assert (row["power_w"], row["power_w_null_reason"], row["error"]) == (None, DCMI_DEACTIVATED, None)
    assert row["sdr_power_w"] is not None and row["inlet_temp_c"] is not None
    # a file as the IPMI source wrote them before the column existed: the dataset's columns and `error`
    older = pa.Table.from_pylist([{"sampled_at": row["sampled_at"] - dt.timedelta(seconds=5), "host": "node-01",
                                   "power_w": None, "sdr_power_w": 1200.0, "inlet_temp_c": 24.0,
                                   "exhaust_temp_c": 38.0, "fan_rpm_avg": 8050.0, "source": "ipmi", "error": None}])
    write_dataset(lake, "node_samples", table)
    write_dataset(lake, "node_samples", older)
    stored = pa.concat_tables([ds.dataset(p, format="parquet").to_table()
                               for p in sorted((lake / "node_samples").rglob("*.parquet"))], promote_options="default")
    reasons = stored.column("power_w_null_reason")
    assert reasons.null_count == 1 and DCMI_DEACTIVATED in reasons.to_pylist()
    con = connect(tmp_path / "w.duckdb", lake)
    ensure_views(con)
    assert con.execute("SELECT count(*), count(power_w), count(sdr_power_w) FROM raw_node_samples").fetchone() == (2, 0, 2)
    # the warehouse shows why: the reason where a row has one, NULL for the older file without it
    assert con.execute("SELECT power_w_null_reason FROM raw_node_samples ORDER BY sampled_at").fetchall() == [
        (None,), (DCMI_DEACTIVATED,)]


def test_a_dcmi_refusal_is_said_once_and_backed_off_with_the_settings_given(bmc, caplog):
    """The real BMC refusing DCMI (no meter file: completion code 0xCB, "Requested sensor, data, or
    record not found (cb)"): before, a warning and a DCMI request at every poll, for ever. Now, with
    the back-off given as [collector] settings: one line, DCMI asked twice, then every 300 s."""
    from joulehouse.collectors.settings import load_node_settings
    from joulehouse.collectors.sources.ipmi import run_command

    env = {"JOULEHOUSE_COLLECTOR__IPMI_PORT": str(bmc.port), "JOULEHOUSE_COLLECTOR__IPMI_USER": USER,
           "JOULEHOUSE_COLLECTOR__IPMI_PASSWORD": PASSWORD, "JOULEHOUSE_COLLECTOR__IPMI_DCMI_SILENT_POLLS": "2",
           "JOULEHOUSE_COLLECTOR__IPMI_DCMI_RETRY_INTERVAL_S": "300"}
    elapsed_s, dcmi_calls = [0.0], []

    def runner(argv, timeout_s, extra_env):
        dcmi_calls.extend(["dcmi"] if "dcmi" in argv else [])
        return run_command(argv, timeout_s, extra_env)

    source = IpmiSource.from_settings("node-01", load_node_settings(env=env).collector, runner=runner,
                                      monotonic=lambda: elapsed_s[0])
    caplog.set_level("INFO", logger="joulehouse.collectors.sources")
    (bmc.state / "dcmi_w").unlink()
    try:
        refused = [source.read().to_pylist()[0] for _ in range(6)]
    finally:
        bmc.set(dcmi_w=INITIAL["dcmi_w"])
    assert all(r["power_w"] is None and "(cb)" in r["power_w_null_reason"] and r["error"] is None for r in refused)
    assert [r["power_w_null_reason"].split(":")[0] for r in refused] == ["dcmi failed"] * 2 + ["dcmi not asked"] * 4
    assert len(dcmi_calls) == 2 and len(caplog.records) == 1 and "(cb)" in caplog.records[0].getMessage()
    elapsed_s[0] += 300
    assert source.read().to_pylist()[0]["power_w"] == 1150.0
    assert len(caplog.records) == 2 and "answers DCMI power reading again" in caplog.records[1].getMessage()


def test_a_dcmi_refused_in_its_present_state_is_asked_again_not_taken_for_no_dcmi(bmc):
    """The real ipmitool's words for completion code 0xD5 hold "not supported", which alone marks a
    BMC without DCMI (never asked again). Only the fake runner had said them; here the BMC does."""
    elapsed_s = [0.0]
    source = bmc.source(dcmi_silent_polls=2, dcmi_retry_interval_s=60, monotonic=lambda: elapsed_s[0])
    bmc.set(dcmi_w="busy")
    try:
        refused = [source.read().to_pylist()[0] for _ in range(3)]
    finally:
        bmc.set(dcmi_w=INITIAL["dcmi_w"])
    assert "not supported in present state (d5)" in refused[0]["power_w_null_reason"].lower()
    assert [r["power_w_null_reason"].split(":")[0] for r in refused] == ["dcmi failed", "dcmi failed", "dcmi not asked"]
    assert source.dcmi_supported is not False and all(r["sdr_power_w"] == INITIAL["power_w"] for r in refused)
    elapsed_s[0] += 60
    assert source.read().to_pylist()[0]["power_w"] == INITIAL["dcmi_w"]
