"""Replay protection for the node agent: an older signed config is refused after a newer one.

A signature says who made a config, not that it is the latest: yesterday's export, still inside its
validity window, would otherwise undo today's. So the agent keeps, per site, the `generated_at` and
body hash of the newest config it accepted, in one small JSON file (`[agent] state_path`), and
refuses any config of that site generated before it, or generated at the same second with another
body. The same config again is accepted (the apply is then 'unchanged').

A node given its site (`[agent] site`) also refuses a config made for another site
(WrongSite): one key signing several sites' configs, or a node pointed at the wrong location,
would otherwise set this node's GPUs from another site's recommendations and return every GPU
that config does not list to its default.

The record is written before the config is applied (a temporary file, fsynced, renamed over the
old one, the folder fsynced): a crash between the two cannot leave a newer config applied and an
older one still acceptable. A state file that cannot be read is a refusal, not a reset: removing it
by hand is what re-opens the door to older configs.

Two agents of one node (the service's poll and an operator's `agent apply`) share the record: each
holds `held()` (an flock on `<state>.lock`) from its check to its audit, and a record never moves
back to an older config. Checked apart, both passed, and the older one, applied second, stayed in
force with the record moved back to it.

A config withdrawn from its location (the agent rolled it back) is marked so in the record, and
the same config is refused from then on (WithdrawnConfig): a stale mirror or cache serving the
withdrawn bytes again had put its settings back. A newer config replaces the mark.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from joulehouse.collectors import lakefs
from joulehouse.collectors.config_contract import ConfigError, RecommendedConfig, format_utc
from joulehouse.collectors.input_file import open_regular


class ReplayedConfig(ConfigError):
    """The config is older than the newest one this agent accepted for its site; `newest_sha256`
    and `newest_valid_until` (None in a record from before it was kept) say which one that is, so
    an agent that restarted knows the config in force and when it ends."""

    def __init__(self, message: str, newest_sha256: str | None = None,
                 newest_valid_until: dt.datetime | None = None) -> None:
        super().__init__(message)
        self.newest_sha256 = newest_sha256
        self.newest_valid_until = newest_valid_until


class WrongSite(ConfigError):
    """The config was made for another site than the one this node belongs to."""


class WithdrawnConfig(ConfigError):
    """The config is the one this agent rolled back when its location stopped serving it."""


class ReplayStateError(ConfigError):
    """The agent's replay state file cannot be read or is not what the agent wrote."""


# The agent's state files hold a few lines per site or GPU; anything larger is not the agent's.
MAX_STATE_BYTES = 1 << 20


def read_state_text(path: Path, *, owned: bool = False) -> str:
    """A state file's text: opened without blocking (a FIFO there held every apply, the agent's
    locks with it), at most MAX_STATE_BYTES read; `owned`: refused unless root or this user owns
    it and no one else can write it. FileNotFoundError where there is none; ReplayStateError for
    what is no regular file, too large or not owned."""
    with open(open_regular(path, "agent state", ReplayStateError, missing_raises=True), "rb") as fh:
        st = os.fstat(fh.fileno())
        if owned and (st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022):
            raise ReplayStateError(f"it can be written by another user (owner uid {st.st_uid}, "
                                   f"mode {st.st_mode & 0o777:o})")
        data = fh.read(MAX_STATE_BYTES + 1)
    if len(data) > MAX_STATE_BYTES:
        raise ReplayStateError(f"it is larger than {MAX_STATE_BYTES} bytes")
    return data.decode("utf-8")


@contextlib.contextmanager
def held_state_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `<path>.lock` in the agent's private folder for the block (another
    agent of the node waits for it); ReplayStateError when the lock file cannot be opened."""
    lakefs.makedirs_durably(path.parent)
    check_private_folder(path.parent)
    try:
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ReplayStateError(f"agent state lock beside {path} cannot be opened ({exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class ReplayGuard:
    """The newest config accepted per site, kept in the JSON file `path`; `site`: the node's own
    site, whose configs alone it accepts ("": any site the key signs)."""

    def __init__(self, path: str | Path, site: str = "") -> None:
        self.path = Path(path)
        self.site = site

    def _sites(self) -> dict[str, dict]:
        try:
            text = read_state_text(self.path)
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ReplayStateError) as exc:
            raise ReplayStateError(f"agent state {self.path} cannot be read ({exc}); no config is applied "
                                   "until it can (remove it to accept older configs again)") from None
        try:
            sites = dict(json.loads(text)["sites"])
            for last in sites.values():
                parse_utc(last["generated_at"])
                for optional in ("valid_until", "withdrawn_at"):
                    if last.get(optional) is not None:
                        parse_utc(last[optional])
                if not isinstance(last["config_sha256"], str):
                    raise TypeError(f"config_sha256 {last['config_sha256']!r} is not text")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise ReplayStateError(f"agent state {self.path} is not the agent's ({type(exc).__name__}: {exc}); "
                                   "no config is applied until it is fixed or removed") from None
        return sites

    def last_accepted(self, site: str) -> tuple[dt.datetime, str] | None:
        """(generated_at, config_sha256) of the newest config accepted for `site`, or None."""
        last = self._sites().get(site)
        return None if last is None else (parse_utc(last["generated_at"]), last["config_sha256"])

    def newest_in_force(self) -> tuple[str, dt.datetime] | None:
        """(config_sha256, valid_until) of the newest config applied here and not withdrawn (of the
        node's site; of any site where none is set), or None: what a restarted agent must still
        expire when no poll tells it what is in force."""
        sites = self._sites()
        records = [sites[self.site]] if self.site in sites else ([] if self.site else list(sites.values()))
        live = [r for r in records if r.get("withdrawn_at") is None and r.get("valid_until") is not None]
        if not live:
            return None
        newest = max(live, key=lambda r: parse_utc(r["generated_at"]))
        return newest["config_sha256"], parse_utc(newest["valid_until"])

    def check(self, config: RecommendedConfig) -> None:
        """Raise WrongSite when `config` is for another site than the node's, ReplayedConfig when it
        is older than the newest accepted for its site."""
        if self.site and config.site != self.site:
            raise WrongSite(f"config is for site {config.site!r}; this node belongs to site {self.site!r} "
                            "([agent] site): refused")
        last = self._sites().get(config.site)
        if last is None:
            return
        generated_at, sha256 = parse_utc(last["generated_at"]), last["config_sha256"]
        if config.config_sha256 == sha256 and last.get("withdrawn_at") is not None:
            raise WithdrawnConfig(
                f"config for site {config.site!r} generated at {format_utc(config.generated_at)} (sha256 {sha256[:12]}) "
                f"was withdrawn at {last['withdrawn_at']}: its location stopped serving it and its settings were rolled "
                f"back, so it is not applied again (state: {self.path})")
        if config.generated_at < generated_at or (config.generated_at == generated_at
                                                  and config.config_sha256 != sha256):
            until = last.get("valid_until")
            raise ReplayedConfig(
                f"config for site {config.site!r} generated at {format_utc(config.generated_at)} is not newer than "
                f"the one this agent already accepted (generated at {format_utc(generated_at)}, sha256 {sha256[:12]}); "
                f"a replayed config is refused (state: {self.path})",
                newest_sha256=sha256, newest_valid_until=None if until is None else parse_utc(until))

    def record(self, config: RecommendedConfig, accepted_at: dt.datetime) -> None:
        """Make `config` the newest accepted for its site, durably (see the module docstring);
        ReplayedConfig, and the record unchanged, when a newer one is already recorded."""
        self.check(config)  # again: never back to an older config, whoever checked before
        sites = self._sites()
        sites[config.site] = {"generated_at": format_utc(config.generated_at), "config_sha256": config.config_sha256,
                              "valid_until": format_utc(config.valid_until), "accepted_at": format_utc(accepted_at)}
        self._write(sites)

    def withdraw(self, config_sha256: str, at: dt.datetime) -> bool:
        """Mark the recorded config with this body hash withdrawn at `at` (check() then refuses it),
        durably; False when no site's newest config has that hash."""
        sites = self._sites()
        marked = [last for last in sites.values() if last["config_sha256"] == config_sha256]
        for last in marked:
            last["withdrawn_at"] = format_utc(at)
        if marked:
            self._write(sites)
        return bool(marked)

    @property
    def clock_locks_path(self) -> Path:
        """Where the agent records the SM clock locks it left (collectors.agent_locks): beside this
        state file, in the same folder only the agent's user writes."""
        return self.path.with_name(self.path.stem + ".clock-locks.json")

    def held(self) -> contextlib.AbstractContextManager[None]:
        """This agent alone reads and changes the record, and applies, while the block runs (an
        exclusive flock on `<state>.lock`; another agent of the node waits for it)."""
        return held_state_lock(self.path)

    def _write(self, sites: dict[str, dict]) -> None:
        lakefs.makedirs_durably(self.path.parent)
        check_private_folder(self.path.parent)
        lakefs.write_file_atomically(self.path, json.dumps({"sites": sites}, indent=2, sort_keys=True).encode(), 0o600)

def check_private_folder(folder: Path) -> None:
    """Refuse a state folder another user can write: whoever can remove or replace the record
    re-opens the door to every older config, and hides the clock locks the agent left
    (collectors.agent_locks); the collector's user must not own the agent's state."""
    st = folder.stat()
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022:
        raise ReplayStateError(
            f"agent state folder {folder} can be written by another user (owner uid {st.st_uid}, mode "
            f"{st.st_mode & 0o777:o}): whoever can replace the agent's state can replay old configs; keep it in a "
            "folder only the agent's user writes (the agent service: --state /var/lib/joulehouse-agent/...)")

def parse_utc(text: str) -> dt.datetime:
    """An ISO 8601 instant of the agent's state, in UTC; ValueError without a time zone."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.utcoffset() is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.astimezone(dt.timezone.utc)
