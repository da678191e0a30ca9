"""Whole-server readings from the BMC with `ipmitool` -> `node_samples` rows (source 'ipmi').

Per poll, two ipmitool calls over RMCP+ (`-I lanplus -C 3`):
- `dcmi power reading`: the DCMI instantaneous power of the server, W (`power_w`);
- `sdr elist`: every SDR sensor; the total-power sensor (W, `sdr_power_w`), the inlet and
  exhaust temperatures (C) and the mean of the readable fans (RPM) are picked by name and unit.

Text output is parsed defensively: a sensor that says "no reading", "disabled", "na" or
carries no number is NULL, never 0. A call that times out or fails is retried a bounded
number of times with doubling backoff; if the BMC still does not answer, the row is returned
with NULL readings and the reason in the `error` column, so the GPU sources go on.

DCMI is the server's power; the SDR is everything else, so a DCMI that fails never costs the
SDR. Every row whose `power_w` is NULL says why in its own column `power_w_null_reason` (the
kind before the colon): `dcmi deactivated` (the BMC says its power measurement is off: a state,
not an error), `dcmi absent` (it answered "Invalid command": not asked again), `dcmi no answer`
(timed out, or ipmitool got no response), `dcmi session refused` (the BMC answered, at once, that
it opens no session for this user: most often a wrong ipmi_user or ipmi_password; not retried
within the poll, and not taken for a BMC that is away), `dcmi not asked` (backed off, below), `dcmi failed`
(any other refusal: said in the log when it starts or its words change), `dcmi unreadable` (an
answer without a reading). A BMC whose DCMI gives no answer (while its SDR answers, as many older
BMCs do) or refuses `dcmi_silent_polls` polls in a row is asked DCMI once every
`dcmi_retry_interval_s` from then on (ipmi_dcmi.py; `[collector] ipmi_dcmi_silent_polls`,
`ipmi_dcmi_retry_interval_s`), so each poll's time goes to the SDR and not to a request that will
time out, and the log holds no warning per poll. The column is IPMI's own, beside `error`: the
warehouse's raw views read the dataset's columns and leave it out, and a file without it (written
before it existed) reads as before.

The password reaches ipmitool through the IPMI_PASSWORD environment variable (`-E`), not the
command line, where every local user could read it in the process list.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa

from joulehouse.collectors.schema import NODE_SAMPLES
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import ERROR_COLUMN
from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.collectors.sources.ipmi_dcmi import DcmiBackoff
from joulehouse.collectors.sources.ipmi_sdr import SensorReading, parse_sdr_elist, pick_readings

log = logging.getLogger(__name__)

SOURCE_TAG = "ipmi"


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False


# (argv, timeout_s, extra environment) -> result. Injected so tests can replay real output.
CommandRunner = Callable[[Sequence[str], float, Mapping[str, str]], CommandResult]


def run_command(argv: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> CommandResult:
    """Run a program with a hard timeout; a timeout is a result, not an exception. Output is read
    as UTF-8 whatever the locale; a byte that is not UTF-8 (a BMC's OEM sensor name in Latin-1)
    is kept visibly as an escape (`\\xb0`): one odd name must not cost the poll its readings."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, encoding="utf-8",
                              errors="backslashreplace", timeout=timeout_s, env={**os.environ, **env}, check=False)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout.decode("utf-8", errors="backslashreplace") if isinstance(exc.stdout, bytes)
               else (exc.stdout or ""))
        return CommandResult(returncode=-1, stdout=out, stderr=f"no answer within {timeout_s} s", timed_out=True)
    except FileNotFoundError:
        return CommandResult(returncode=127, stdout="", stderr=f"{argv[0]} is not installed")
    except OSError as exc:  # not executable, a folder, too many open files: a failed poll, said in one line
        return CommandResult(returncode=126, stdout="", stderr=f"{argv[0]} cannot run: {exc.strerror or exc}")
    return CommandResult(done.returncode, done.stdout, done.stderr)


_DCMI_POWER = re.compile(r"Instantaneous power reading:\s*(-?\d+(?:\.\d+)?)\s*Watts", re.IGNORECASE)
_DCMI_STATE = re.compile(r"Power reading state is:\s*(\w+)", re.IGNORECASE)
# ipmitool's words when a DCMI request got no response inside a session it opened: the BMC is there
# and its DCMI is silent (a BMC that is not there is "Unable to establish IPMI v2 / RMCP+ session").
_DCMI_NO_RESPONSE = re.compile(r"unable to get dcmi information", re.IGNORECASE)
# The extra column (IPMI's own, like `error`): why `power_w` is NULL on this row, NULL where it has a reading.
POWER_NULL_REASON_COLUMN = "power_w_null_reason"
DCMI_DEACTIVATED = "dcmi deactivated: the BMC reports its power measurement deactivated"


def parse_dcmi_reading(text: str) -> tuple[float | None, str | None]:
    """(instantaneous power W, None) from `ipmitool dcmi power reading`, or (None, why not): the
    BMC says its power measurement is deactivated (the number is then not a reading), or the
    text holds no reading."""
    match = _DCMI_POWER.search(text)
    if match is None:
        return None, "dcmi unreadable: ipmitool's answer held no instantaneous power reading"
    state = _DCMI_STATE.search(text)
    if state and state.group(1).lower() == "deactivated":
        return None, DCMI_DEACTIVATED
    return float(match.group(1)), None


def parse_dcmi_power(text: str) -> float | None:
    """The instantaneous power (W) from `ipmitool dcmi power reading`; None when absent or deactivated."""
    return parse_dcmi_reading(text)[0]


# A DCMI refusal that holds only for now ("Command not supported in present state (d5)"): asked again
# (ipmi_dcmi.py says how often). "Invalid command (c1)" and its kin mean the BMC has no DCMI.
_DCMI_FOR_NOW = re.compile(r"present state|\(d5\)", re.I)
class BmcUnreachable(RuntimeError):
    """ipmitool got no answer from the BMC within the bounded retries."""


class BmcRefusedSession(BmcUnreachable):
    """The BMC answered, before any of ipmitool's timeouts, that it opens no session: wrong
    credentials most often. A BmcUnreachable for the row (no reading), but never retried."""


# What ipmitool says for both a BMC that is away and one that refuses the session; only the time
# it took tells them apart: an away BMC is given up after ipmitool's whole session timeout (-N).
_NO_SESSION = re.compile(r"unable to establish", re.I)


@dataclass(frozen=True)
class DcmiOutcome:
    """One poll's DCMI power: a reading (W), or None and why (`power_w_null_reason`). `unanswered`:
    no answer came; `no_session`: not even a session (why, in words): whether the BMC is there is unknown."""

    power_w: float | None
    null_reason: str | None
    unanswered: bool = False
    no_session: str | None = None


# A source built in code (tests, the simulator, a script) talks to the BMC as `collect` with no
# settings file does: the [collector] settings are the one place these defaults are written.
_DEFAULTS = CollectorSettings()


class IpmiSource:
    """node_samples for one server, read from its BMC with ipmitool (source tag 'ipmi')."""

    dataset = "node_samples"

    def __init__(
        self,
        host: str,
        *,
        bmc_host: str = _DEFAULTS.ipmi_host,
        port: int = _DEFAULTS.ipmi_port,
        user: str = _DEFAULTS.ipmi_user,
        password: str = "",
        timeout_s: float = _DEFAULTS.ipmi_timeout_s,
        retries: int = _DEFAULTS.ipmi_retries,
        backoff_s: float = _DEFAULTS.ipmi_backoff_s,
        ipmitool: str = "ipmitool",
        runner: CommandRunner = run_command,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        dcmi_silent_polls: int = _DEFAULTS.ipmi_dcmi_silent_polls,
        dcmi_retry_interval_s: float = _DEFAULTS.ipmi_dcmi_retry_interval_s,
    ):
        if retries < 0 or timeout_s <= 0:
            raise ValueError(f"retries={retries!r}, timeout_s={timeout_s!r}: expected retries >= 0 and timeout_s > 0")
        self.host = canonical_host(host)  # as every source names this server (host_names)
        self.bmc_host = bmc_host
        self.port = port
        self.user = user
        self._env = {"IPMI_PASSWORD": password}
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.ipmitool = ipmitool
        self._run = runner
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic
        self.dcmi_supported: bool | None = None
        # monotonic: the wall clock stamps rows, and stepped back 8 h it held DCMI unasked for 8 h
        self._dcmi_backoff = DcmiBackoff(f"{bmc_host}:{port}", dcmi_silent_polls, dcmi_retry_interval_s, monotonic)
        self._dcmi_absent_reason: str | None = None
        self._dcmi_deactivated = False

    @classmethod
    def from_settings(cls, host: str, settings: CollectorSettings, **overrides: object) -> IpmiSource:
        kwargs: dict[str, object] = dict(
            bmc_host=settings.ipmi_host, port=settings.ipmi_port, user=settings.ipmi_user,
            password=settings.ipmi_password, timeout_s=settings.ipmi_timeout_s,
            retries=settings.ipmi_retries, backoff_s=settings.ipmi_backoff_s,
            dcmi_silent_polls=settings.ipmi_dcmi_silent_polls, dcmi_retry_interval_s=settings.ipmi_dcmi_retry_interval_s)
        kwargs.update(overrides)
        return cls(host, **kwargs)  # type: ignore[arg-type]

    @property
    def _session_timeout_s(self) -> int:
        # ipmitool's own session timeout (-N) and retries (-R) stay inside our timeout.
        return max(1, int(self.timeout_s / 2))

    def _argv(self, *command: str) -> list[str]:
        return [self.ipmitool, "-I", "lanplus", "-H", self.bmc_host, "-p", str(self.port),
                "-U", self.user, "-E", "-C", "3", "-N", str(self._session_timeout_s), "-R", "1", *command]

    def _call(self, *command: str, retries: int | None = None) -> CommandResult:
        """Run one ipmitool command; retry what looks like an unreachable BMC (timeout, no
        session), not what the BMC answered (an unsupported command is an answer)."""
        attempts = (self.retries if retries is None else retries) + 1
        for attempt in range(1, attempts + 1):
            started_s = self._monotonic()
            result = self._run(self._argv(*command), self.timeout_s, self._env)
            unreachable = result.timed_out or (
                result.returncode != 0 and re.search(r"unable to establish|no response|timeout|session",
                                                     result.stderr, re.I))
            if not unreachable:
                return result
            took_s = self._monotonic() - started_s
            if not result.timed_out and _NO_SESSION.search(result.stderr) and took_s < self._session_timeout_s:
                # a wrong password was taken for a BMC away: retried, and said as "gave no answer"
                raise BmcRefusedSession(
                    f"BMC {self.bmc_host}:{self.port} refused the session for 'ipmitool {' '.join(command)}' "
                    f"(it answered in {took_s:.2f} s): most often a wrong [collector] ipmi_user or ipmi_password, "
                    f"or a user not allowed in over lanplus with cipher suite 3; ipmitool: {result.stderr.strip()}")
            if attempt == attempts:
                raise BmcUnreachable(
                    f"BMC {self.bmc_host}:{self.port} gave no answer to 'ipmitool {' '.join(command)}' "
                    f"after {attempts} attempts: {result.stderr.strip() or 'no output'}")
            delay = self.backoff_s * 2 ** (attempt - 1)
            log.warning("ipmi: BMC %s:%d did not answer %r (attempt %d/%d: %s); retrying in %.1f s",
                        self.bmc_host, self.port, " ".join(command), attempt, attempts,
                        result.stderr.strip(), delay)
            self._sleep(delay)
        raise AssertionError("unreachable")

    def _dcmi(self) -> DcmiOutcome:
        if self.dcmi_supported is False:
            return DcmiOutcome(None, self._dcmi_absent_reason)
        if not self._dcmi_backoff.due():
            return DcmiOutcome(None, self._dcmi_backoff.not_asked_reason())
        try:
            # backed off, one try: the retries were spent on the polls that led here
            result = self._call("dcmi", "power", "reading", retries=0 if self._dcmi_backoff.backed_off else None)
        except BmcRefusedSession as exc:
            return DcmiOutcome(None, f"dcmi session refused: {exc}", no_session=str(exc))
        except BmcUnreachable as exc:
            return DcmiOutcome(None, f"dcmi no answer: {exc}", unanswered=True, no_session=str(exc))
        text = (result.stdout + result.stderr).strip()
        if result.returncode != 0 and _DCMI_NO_RESPONSE.search(text):
            return DcmiOutcome(None, f"dcmi no answer: ipmitool: {text}", unanswered=True)
        if result.returncode != 0:
            if not _DCMI_FOR_NOW.search(text) and re.search(r"invalid command|not supported|unrecognized", text, re.I):
                log.info("ipmi: BMC %s:%d does not answer DCMI power reading; power_w stays NULL",
                         self.bmc_host, self.port)
                self.dcmi_supported = False
                self._dcmi_absent_reason = f"dcmi absent: the BMC answered {text!r}; not asked again"
                return DcmiOutcome(None, self._dcmi_absent_reason)
            self._dcmi_backoff.refused(text)
            return DcmiOutcome(None, f"dcmi failed: {text}")
        self._dcmi_backoff.answered()
        self.dcmi_supported = True
        power_w, reason = parse_dcmi_reading(result.stdout)
        if (reason == DCMI_DEACTIVATED) != self._dcmi_deactivated:
            self._dcmi_deactivated = not self._dcmi_deactivated
            log.warning("ipmi: BMC %s:%d reports its DCMI power measurement %s", self.bmc_host, self.port,
                        "deactivated; power_w stays NULL while it is" if self._dcmi_deactivated else "active again")
        return DcmiOutcome(power_w, reason)

    def read(self) -> pa.Table:
        """One node_samples row sampled now. A BMC that does not answer yields a row with NULL
        readings and the reason in `error`; it never raises for that. A NULL `power_w` says why
        in `power_w_null_reason`; a DCMI that does not answer leaves the SDR readings as they are.

        The row is stamped when the BMC answered the power reading (or, without one, when the
        last call returned), not when the poll began: a busy BMC's timeouts, retries and backoff
        can take tens of seconds, and the energy integral puts the power at its stamp. The SDR
        sensors (temperatures, fans) are read just after it."""
        sampled_at = None
        row: dict[str, object] = {"power_w": None, "sdr_power_w": None, "inlet_temp_c": None,
                                  "exhaust_temp_c": None, "fan_rpm_avg": None}
        reasons: dict[str, str | None] = {ERROR_COLUMN: None, POWER_NULL_REASON_COLUMN: None}
        try:
            dcmi = self._dcmi()
            row["power_w"], reasons[POWER_NULL_REASON_COLUMN] = dcmi.power_w, dcmi.null_reason
            if row["power_w"] is not None:
                sampled_at = self._clock()
            # After a DCMI call that opened no session the BMC has had this poll's retries: one try
            # of the SDR tells a silent DCMI from a BMC that is down, at the cost of one timeout.
            sdr = self._call("sdr", "elist", retries=0 if dcmi.no_session is not None else None)
            if dcmi.unanswered:
                self._dcmi_backoff.unanswered_while_sdr_answered()
            if sdr.returncode == 0:
                row.update(pick_readings(parse_sdr_elist(sdr.stdout)))
            else:
                reasons[ERROR_COLUMN] = f"sdr elist failed: {sdr.stderr.strip() or sdr.stdout.strip()}"
        except BmcUnreachable as exc:
            self._dcmi_backoff.bmc_away()
            if isinstance(exc, BmcRefusedSession) and dcmi.no_session is not None:
                exc = BmcRefusedSession(f"{dcmi.no_session}; and for 'ipmitool sdr elist'")
            elif dcmi.no_session is not None:
                exc = BmcUnreachable(f"{dcmi.no_session}; nor to 'ipmitool sdr elist' (1 attempt)")
            log.error("ipmi: %s", exc)
            # Readings taken before the BMC went silent are still true readings: keep them.
            reasons[ERROR_COLUMN] = str(exc)
        if reasons[ERROR_COLUMN] is None and all(value is None for value in row.values()):
            # answered, exit 0, and nothing a reading could be made of (a BMC answering garbage, a
            # measurement deactivated and no sensor): a failed read, not a row of silent NULLs
            reasons[ERROR_COLUMN] = ("the BMC answered, but no power, temperature or fan reading could be read from "
                                     "ipmitool's output (DCMI power and SDR)")
        if sampled_at is None:
            sampled_at = self._clock()
        fields = [NODE_SAMPLES.field(n) for n in ("sampled_at", "host", "power_w", "sdr_power_w",
                                                   "inlet_temp_c", "exhaust_temp_c", "fan_rpm_avg")]
        schema = pa.schema(fields + [NODE_SAMPLES.field("source"), pa.field(ERROR_COLUMN, pa.string()),
                                     NODE_SAMPLES.field(POWER_NULL_REASON_COLUMN)])
        data = {"sampled_at": [sampled_at], "host": [self.host], "source": [SOURCE_TAG]}
        data.update({k: [v] for k, v in {**row, **reasons}.items()})
        return pa.Table.from_pydict({f.name: data[f.name] for f in schema}, schema=schema)

    def close(self) -> None:
        """Nothing is held between polls (each ipmitool call opens and closes its session)."""


__all__ = ["BmcRefusedSession", "BmcUnreachable", "CommandResult", "DcmiOutcome", "IpmiSource", "POWER_NULL_REASON_COLUMN",
           "SensorReading", "parse_dcmi_power", "parse_dcmi_reading", "parse_sdr_elist", "pick_readings", "run_command"]
