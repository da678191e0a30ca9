"""`joulehouse agent run`: poll the config location, apply when it changes, roll back on expiry.

The location is a file path or an http(s)/file URL. Rules, per poll:
- a new document (its bytes changed) is verified and applied; a refused one (tampered,
  expired, unsigned...) is audited and the settings in force stay until their own window ends;
- a location that no longer serves a config (file gone, HTTP 404) revokes the one in force:
  the GPUs go back to their defaults;
- a config in force whose valid_until has passed is rolled back once.
The clock and sleep are injected so tests drive the loop without waiting.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from collectors.agent import ApplyResult, apply_config, rollback
from collectors.config_contract import ConfigError


class ConfigFetchError(OSError):
    """The config location could not be read (network error, permission...); not a revocation."""


def fetch_config(location: str, timeout_s: float = 10.0) -> bytes | None:
    """The document's bytes, or None when the location says there is no config (revoked)."""
    if "://" not in location:
        try:
            return Path(location).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigFetchError(f"cannot read config file {location}: {exc}") from None
    try:
        with urllib.request.urlopen(location, timeout=timeout_s) as response:  # noqa: S310 - scheme is the operator's
            return response.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 410):
            return None
        raise ConfigFetchError(f"config URL {location} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConfigFetchError(f"cannot fetch config URL {location}: {exc}") from None


@dataclass
class AgentState:
    """What the loop remembers between polls."""

    seen_sha256: str | None = None  # bytes of the last document fetched
    in_force_sha256: str | None = None  # body hash of the config currently applied
    in_force_until: dt.datetime | None = None


def poll_once(
    state: AgentState, location: str, *, public_key: Any, host: str, nvml: Any, lake: str | Path | None,
    now: dt.datetime,
) -> str:
    """One poll; returns a one-line description of what it did (for the log)."""
    try:
        data = fetch_config(location)
    except ConfigFetchError as exc:
        return f"fetch failed, keeping current settings: {exc}"
    if data is None:
        state.seen_sha256 = None
        if state.in_force_sha256 is None:
            return "no config published; nothing in force"
        result = rollback(host=host, nvml=nvml, lake=lake, now=now, config_sha256=state.in_force_sha256,
                          reason=f"config revoked: {location} no longer serves one")
        state.in_force_sha256 = state.in_force_until = None
        return "revoked: " + result.summary()
    digest = hashlib.sha256(data).hexdigest()
    message = "config unchanged"
    if digest != state.seen_sha256:
        state.seen_sha256 = digest
        try:
            result: ApplyResult = apply_config(data, public_key=public_key, host=host, nvml=nvml, lake=lake, now=now)
        except ConfigError as exc:
            message = f"new config refused ({type(exc).__name__}: {exc}); keeping current settings"
        else:
            state.in_force_sha256, state.in_force_until = result.config_sha256, result.valid_until
            message = "applied: " + result.summary()
    if state.in_force_until is not None and now >= state.in_force_until:
        result = rollback(host=host, nvml=nvml, lake=lake, now=now, config_sha256=state.in_force_sha256,
                          reason=f"config expired at {state.in_force_until.isoformat()}")
        state.in_force_sha256 = state.in_force_until = None
        message = "expired: " + result.summary()
    return message


def run_agent(
    location: str, *, public_key: Any, host: str, nvml: Any = None, lake: str | Path | None = None,
    poll_interval_s: float = 300.0, iterations: int | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print,
) -> AgentState:
    """Poll `location` every `poll_interval_s` seconds (forever, or `iterations` times)."""
    state = AgentState()
    done = 0
    while iterations is None or done < iterations:
        log(f"{clock().isoformat(timespec='seconds')} {poll_once(state, location, public_key=public_key, host=host, nvml=nvml, lake=lake, now=clock())}")
        done += 1
        if iterations is None or done < iterations:
            sleep(poll_interval_s)
    return state
