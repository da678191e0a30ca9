"""What `joulehouse agent` checks before it touches a device: the export's location and bytes, the
public key, --at and --interval, and whether NVML answers. Each fails in one line with the agent's
exit code: 2 for the input that was wrong (naming it), 3 where NVML is not usable on this machine."""

from __future__ import annotations

from pathlib import Path

from joulehouse.cli.options import fail, parse_duration, quoted

# The schemes `fetch_config` reads and the export publishes to ([export] publish_url); urllib
# would also try ftp://, which nothing here publishes to.
EXPORT_SCHEMES = ("http", "https", "file", "s3", "gs", "gcs", "az", "abfs", "abfss")


def public_key_or_exit(path: Path):
    """The PEM ed25519 public key at `path`, or fail (exit 2) saying why it cannot be read."""
    from joulehouse.collectors.config_contract import load_public_key

    try:
        return load_public_key(path)
    except (OSError, ValueError) as exc:
        fail(str(exc), 2)


def refuse_unsupported_scheme(location: str, what: str = "EXPORT") -> None:
    """Fail (exit 2) before any network for a URL whose scheme no export is published on."""
    if "://" not in location:
        return
    scheme = location.split("://", 1)[0].lower()
    if scheme not in EXPORT_SCHEMES:
        fail(f"{what} {location}: {scheme}:// is not supported; give a path or an http(s), file, s3, gs or az URL", 2)


def fetch_export(config: str) -> bytes:
    """The config document's bytes from a path or URL, or fail (exit 2) saying why."""
    from joulehouse.collectors.agent_loop import ConfigFetchError, fetch_config

    refuse_unsupported_scheme(config)
    try:
        data = fetch_config(config)
    except ConfigFetchError as exc:
        fail(str(exc), 2)
    if data is None:
        fail(f"no config at {config}", 2)
    return data


def nvml_for_dry_run():
    """pynvml when NVML answers here (a dry run then checks each setting against its device), else
    None: the config is still verified, and each row says its device was not consulted."""
    import pynvml

    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return pynvml


def nvml_usable_or_exit(hint: str = ""):
    """pynvml, or fail (exit 3) saying NVML does not answer; `hint`: what the user can do instead."""
    import pynvml

    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        fail(f"NVML is not usable on this machine ({exc}){'; ' + hint if hint else ''}", 3)
    return pynvml


def parse_at(at: str | None):
    """--at as an aware datetime (None without it), or fail naming it."""
    import datetime as dt

    if at is None:
        return None
    try:
        when = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--at {quoted(at)} is not an ISO 8601 time (e.g. 2026-06-12T00:00:00Z)", 2)
    if when.tzinfo is None:
        fail(f"--at {quoted(at)} has no time zone; add Z for UTC", 2)
    return when


def parse_poll_interval_s(interval: str | None, interval_s: float | None) -> float | None:
    """--interval (a duration), else the hidden --interval-s (seconds), in seconds; None when neither
    is given. Outside [agent] poll_interval_s's range, fail naming the option and the range: 0.0001ms
    was a busy loop on NVML and the config endpoint, --interval-s 0 quietly meant the default and
    -1 crashed the loop's sleep after the first poll."""
    from joulehouse.collectors.settings import AGENT_POLL_MAX_S, AGENT_POLL_MIN_S

    if interval is not None:
        option, text, value = "--interval", interval, parse_duration(interval, "--interval")
    elif interval_s is not None:
        option, text, value = "--interval-s", f"{interval_s:g}", interval_s
    else:
        return None
    if not AGENT_POLL_MIN_S <= value <= AGENT_POLL_MAX_S:  # NaN fails this too
        fail(f"{option} {text}: expected {AGENT_POLL_MIN_S:g} s to {AGENT_POLL_MAX_S:,.0f} s (a day) between polls", 2)
    return value
