"""`joulehouse agent run`: poll the config location, apply when it changes, roll back on expiry.

The location is a file path or an http(s)/file/fsspec URL (collectors.agent_fetch). Rules, per poll:
- a new document (its bytes changed) is verified and applied; a refused one (tampered,
  expired, unsigned...) is audited and the settings in force stay until their own window ends;
- a location that no longer serves a config (file gone, HTTP 404) revokes the one in force:
  the GPUs go back to their defaults, and the replay guard refuses that config from then on;
- a config in force whose valid_until has passed is rolled back once;
- a rollback that did not go through (an NVML error on a reset, a GPU that could not be read) is
  owed: each later poll tries it again, audited each time, until the GPU is back at its default or
  a config in force sets it;
- a GPU the config in force set that the next config no longer lists (its model failed the
  gate, no limit was recommended) goes back to its default when the next one is applied;
- a config not yet valid (this node's clock behind the exporter's) is checked again at the next
  poll, and an apply NVML could not carry out (driver not loaded) is retried;
- a config older than the newest one accepted for its site (a replay) is refused and audited, and
  one larger than MAX_CONFIG_BYTES (16 MiB) is refused before it is read whole.
The clock and sleep are injected so tests drive the loop without waiting.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from joulehouse.collectors.agent import ApplyResult, apply_config, rollback
from joulehouse.collectors.agent_audit import OK_ACTIONS
from joulehouse.collectors.agent_locks import ClockLockRecord
from joulehouse.collectors.agent_fetch import (  # noqa: F401 - the CLI and tests import them from here
    ConfigFetchError, ConfigTooLarge, fetch_config,
)
from joulehouse.collectors.agent_replay import ReplayedConfig, ReplayGuard
from joulehouse.collectors.config_contract import ConfigError, ExpiredConfig, NotYetValid, format_utc


@dataclass(frozen=True)
class OwedRollback:
    """A GPU's rollback that did not go through, tried again at each poll until it does."""

    reason: str  # why the GPU goes back to its default (config expired, revoked, dropped...)
    config_sha256: str | None  # the config the rollback is audited under
    since: dt.datetime  # the poll whose rollback of it first did not go through


@dataclass
class AgentState:
    """What the loop remembers between polls."""

    seen_sha256: str | None = None  # bytes of the last document fetched
    in_force_sha256: str | None = None  # body hash of the config currently applied
    in_force_until: dt.datetime | None = None
    in_force_gpus: frozenset[str] = frozenset()  # the GPUs the config in force set (applied or unchanged)
    # The state lives in memory: after a restart the agent does not know what it left on the GPUs.
    # So the first poll that finds no valid config (none published, or expired) returns them all to
    # their defaults, and the first config applied returns those it does not list: a cap cannot
    # outlive its config by way of a restart.
    defaults_ensured: bool = False
    in_force_valid_from: dt.datetime | None = None
    # Rollbacks that did not go through, by GPU UUID; None: a GPU whose UUID could not be read
    # (a rollback of every GPU not in force is then owed). A cap must not outlive its config
    # because one reset met a transient NVML error.
    rollbacks_owed: dict[str | None, OwedRollback] = field(default_factory=dict)
    # For the metrics (collectors.metrics): GPU outcomes by action, whole-config refusals by the
    # check that failed, polls, failed polls, the last poll's time.
    gpu_actions: dict[str, int] = field(default_factory=dict)
    config_refusals: dict[str, int] = field(default_factory=dict)
    polls: int = 0
    poll_failures: int = 0
    last_poll_at: dt.datetime | None = None

    def counted(self, result: ApplyResult) -> ApplyResult:
        """`result`, its GPU outcomes added to gpu_actions."""
        for outcome in result.outcomes:
            self.gpu_actions[outcome.action] = self.gpu_actions.get(outcome.action, 0) + 1
        return result

    def refused(self, exc: Exception) -> None:
        name = type(exc).__name__
        self.config_refusals[name] = self.config_refusals.get(name, 0) + 1


@dataclass(frozen=True)
class _Poll:
    """What one poll acts on: the node (its host name and NVML), the lake its audits go to, the
    poll's time, and the replay guard of the agent's state (None: no replay protection, no record
    of the clock locks the agent left)."""

    host: str
    nvml: Any
    lake: str | Path | None
    now: dt.datetime
    replay_guard: ReplayGuard | None

    @property
    def clock_locks(self) -> ClockLockRecord | None:
        return None if self.replay_guard is None else ClockLockRecord(self.replay_guard.clock_locks_path)


def poll_once(
    state: AgentState, location: str, *, public_key: Any, host: str, nvml: Any, lake: str | Path | None,
    now: dt.datetime, replay_guard: ReplayGuard | None = None,
) -> str:
    """One poll; returns a one-line description of what it did (for the log). `replay_guard`
    refuses a config older than the newest one accepted (collectors.agent_replay). Rollbacks owed
    by earlier polls that this one did not settle are tried again after its own work."""
    owed_before = dict(state.rollbacks_owed)
    poll = _Poll(host, nvml, lake, now, replay_guard)
    return _act_on_location(state, location, public_key, poll) + _retry_owed(state, owed_before, poll)


def _act_on_location(state: AgentState, location: str, public_key: Any, poll: _Poll) -> str:
    try:
        data = fetch_config(location)
    except ConfigFetchError as exc:
        state.poll_failures += 1
        # the config in force still expires: a config server down past valid_until kept its caps on
        message = f"fetch failed, keeping current settings: {exc}" + _recorded_in_force(
            state, poll, f"the config location cannot be read: {exc}")
        return _expire_if_due(state, poll, message)
    if data is None:
        state.seen_sha256 = None
        if state.in_force_sha256 is None:
            return "no config published; nothing in force" + _ensure_defaults(
                state, poll, f"no config published at {location}")
        # Marked withdrawn before the rollback: the same bytes served again (a stale mirror or
        # cache) are refused, not applied again. Marked after it, an agent killed between the two
        # applied them again at its restart. A mark that cannot be written does not hold the
        # rollback back; the poll then fails, and the next one tries both again.
        not_marked = None
        if poll.replay_guard is not None:
            try:
                with poll.replay_guard.held():
                    poll.replay_guard.withdraw(state.in_force_sha256, poll.now)
            except (OSError, ConfigError) as exc:
                not_marked = exc
        result = _roll_back(state, poll, f"config revoked: {location} no longer serves one",
                            config_sha256=state.in_force_sha256)
        if not_marked is not None:
            raise not_marked
        _nothing_in_force(state)
        return "revoked: " + result.summary() + _owed_note(state)
    digest = hashlib.sha256(data).hexdigest()
    # after an expiry (or a refusal) the same bytes stay served: "config unchanged" alone read as
    # if its caps were still on
    message = "config unchanged" if state.in_force_sha256 is not None else \
        "config unchanged, not in force (it expired or was refused): the GPUs stay at their defaults"
    if digest != state.seen_sha256:
        state.seen_sha256 = digest
        try:
            result: ApplyResult = state.counted(apply_config(
                data, public_key=public_key, host=poll.host, nvml=poll.nvml, lake=poll.lake, now=poll.now,
                replay_guard=poll.replay_guard, host_may_be_absent=True, trust_recorded_locks=state.defaults_ensured))
        except NotYetValid as exc:
            state.refused(exc)
            state.seen_sha256 = None  # check the same bytes again next poll: it becomes valid
            message = f"new config not valid yet ({exc}); keeping current settings, checking again next poll" + \
                _recorded_in_force(state, poll, f"the config published is not valid yet: {exc}")
        except ReplayedConfig as exc:
            state.refused(exc)
            message = f"new config refused ({type(exc).__name__}: {exc}); keeping current settings"
            if state.in_force_sha256 is None and exc.newest_valid_until is not None:
                # a restart: the guard's record names the newest config applied here and when it
                # ends. Without it nothing was in force, so its caps outlived its window for good.
                state.in_force_sha256, state.in_force_until = exc.newest_sha256, exc.newest_valid_until
                message += f"; the newest config applied here ({exc.newest_sha256[:12]}) is in force until " \
                           f"{format_utc(exc.newest_valid_until)}"
        except ConfigError as exc:
            state.refused(exc)
            message = f"new config refused ({type(exc).__name__}: {exc}); keeping current settings"
            if state.in_force_sha256 is None:
                # nothing known in force (as after a restart): what the GPUs hold has no valid config
                # behind it, whether the one published expired or was tampered with or unreadable.
                # Not for a replay: the guard's record says a newer config was applied here.
                why = ("the config published is expired" if isinstance(exc, ExpiredConfig)
                       else f"the config published was refused ({type(exc).__name__})")
                message = (f"config refused ({type(exc).__name__}: {exc})"
                           + _ensure_defaults(state, poll, f"{why}: {exc}"))
        except OSError as exc:  # the audit could not be written (disk full): try the whole apply again
            state.poll_failures += 1
            state.seen_sha256 = None
            message = f"apply failed ({type(exc).__name__}: {exc}); retrying next poll"
        except Exception:
            state.seen_sha256 = None  # not seen through: the next poll tries the same document again
            # a document that fails in a way no check foresaw must not keep an expired cap on
            _expire_if_due(state, poll, "")
            raise
        else:
            if result.nvml_unavailable:
                state.poll_failures += 1
                state.seen_sha256 = None  # nothing was set: the same document is tried again
                message = f"apply failed, NVML unavailable ({result.nvml_unavailable}); retrying next poll"
            else:
                state.in_force_sha256, state.in_force_until = result.config_sha256, result.valid_until
                state.in_force_valid_from = result.valid_from
                try:
                    note = _release_dropped(state, result, poll)
                except Exception:
                    # A rollback that failed (audit not written): the same document is applied
                    # again next poll ('unchanged' where it holds) and the release retried.
                    state.seen_sha256 = None
                    raise
                message = "applied: " + result.summary() + note
                state.defaults_ensured = True  # a valid config now says what every listed GPU holds
    return _expire_if_due(state, poll, message)


def _expire_if_due(state: AgentState, poll: _Poll, message: str) -> str:
    """Roll back the config in force once its valid_until has passed; `message` otherwise."""
    if state.in_force_until is not None and poll.now >= state.in_force_until:
        result = _roll_back(state, poll, f"config expired at {state.in_force_until.isoformat()}",
                            config_sha256=state.in_force_sha256)
        _nothing_in_force(state)
        return "expired: " + result.summary() + _owed_note(state)
    return message


def _recorded_in_force(state: AgentState, poll: _Poll, reason: str) -> str:
    """With nothing known in force (after a restart) and no config to apply this poll: the replay
    guard's record names the newest config applied here, which is in force until its valid_until
    (and then expires); without one, every GPU goes back to its default. A restart must not let a
    cap outlive its config while the location is unreadable or serves one not yet valid. Read at
    each such poll, not once at the start: `agent apply` shares the record, and a config an operator
    applies while the loop runs is learnt here, and expires."""
    if state.in_force_sha256 is not None:
        return ""
    try:
        newest = None if poll.replay_guard is None else poll.replay_guard.newest_in_force()
    except ConfigError as exc:  # the record is unreadable: nothing known in force
        newest, reason = None, f"{reason}; {exc}"
    if newest is None or newest[1] <= poll.now:  # ended: defaults once per process, not a rollback a poll
        return _ensure_defaults(state, poll, reason)
    state.in_force_sha256, state.in_force_until = newest
    return f"; the newest config applied here ({newest[0][:12]}) is in force until {format_utc(newest[1])}"


def _ensure_defaults(state: AgentState, poll: _Poll, reason: str) -> str:
    """Once per process, with no valid config in force: every GPU back to its default (audited;
    'unchanged' where it already is). Returns a note for the log ('' after the first time)."""
    if state.defaults_ensured:
        return ""
    result = _roll_back(state, poll, reason, config_sha256=None)
    state.defaults_ensured = True  # what did not go back is owed, and retried
    return ("; GPUs set to their defaults (nothing known in force since the agent started): " + result.summary()
            + _owed_note(state))


def _nothing_in_force(state: AgentState) -> None:
    state.in_force_sha256 = state.in_force_until = state.in_force_valid_from = None
    state.in_force_gpus = frozenset()


def _release_dropped(state: AgentState, result: ApplyResult, poll: _Poll) -> str:
    """Roll back the GPUs the config in force set that `result`'s config does not set (not listed,
    or its setting refused: the older config is no longer in force), and make `result`'s applied
    GPUs the ones in force; returns a note for the log ('' when none)."""
    set_now = frozenset(o.gpu_uuid for o in result.outcomes if o.gpu_uuid and o.action in ("apply", "unchanged"))
    for uuid in set_now:  # the new config's setting replaces a rollback owed
        state.rollbacks_owed.pop(uuid, None)
    # An apply that failed and could not be undone left the GPU as nobody knows: it counts as in
    # force, so the config that no longer sets it (or its expiry) returns it to the default.
    in_force = set_now | {o.gpu_uuid for o in result.outcomes if o.gpu_uuid and o.action == "verify-failed"}
    if not state.defaults_ensured:
        # The first config since the agent started: what it left before a restart is unknown, so
        # every GPU this config does not set goes back to its default ('unchanged' where it is).
        back = _roll_back(state, poll, "not set by the first config since the agent started: back to the default",
                          config_sha256=result.config_sha256, keep=in_force)
        state.in_force_gpus = in_force
        return ("; GPUs the config does not set returned to their defaults: " + back.summary() + _owed_note(state)
                if back.outcomes else "")
    dropped = sorted(state.in_force_gpus - in_force)
    if dropped:
        back = _roll_back(state, poll, "not set by the new config: back to the default",
                          config_sha256=result.config_sha256, gpu_uuids=dropped)
    # Only once the rollback returned: one that raised (its audit not written) is done again with
    # the same document; one a GPU refused is owed.
    state.in_force_gpus = in_force
    return (f"; {len(dropped)} GPUs the new config no longer sets: " + back.summary() + _owed_note(state)
            if dropped else "")


def _roll_back(state: AgentState, poll: _Poll, reason: str, *, config_sha256: str | None,
               gpu_uuids: list[str] | None = None, keep: frozenset[str] = frozenset(),
               owed_since: dt.datetime | None = None) -> ApplyResult:
    """`rollback` (every GPU but `keep`, or `gpu_uuids`), counted, and what it did not do owed:
    a GPU whose outcome is not OK (or an unreadable one with no UUID) is tried again at the next
    poll; a GPU that went back is settled. A rollback of every GPU covers the GPUs known to hold a
    setting (the config in force's, those owed) even where the driver cannot read them.
    `owed_since`: this tries again a rollback owed since then (its audit row says so)."""
    expected = (state.in_force_gpus | {u for u in state.rollbacks_owed if u is not None}) - keep
    audit_reason = reason if owed_since is None else (
        f"{reason}; tried again: not done since {owed_since.isoformat(timespec='seconds')}")
    result = state.counted(rollback(host=poll.host, nvml=poll.nvml, lake=poll.lake, now=poll.now, reason=audit_reason,
                                    gpu_uuids=gpu_uuids, config_sha256=config_sha256, keep=keep, expected=expected,
                                    clock_locks=poll.clock_locks))
    if gpu_uuids is None:
        state.rollbacks_owed.pop(None, None)  # every GPU was tried: an unreadable one is owed again below
    for o in result.outcomes:
        if o.action in OK_ACTIONS:
            state.rollbacks_owed.pop(o.gpu_uuid, None)
        else:
            before = state.rollbacks_owed.get(o.gpu_uuid)
            state.rollbacks_owed[o.gpu_uuid] = OwedRollback(reason, config_sha256, before.since if before else poll.now)
    return result


def _retry_owed(state: AgentState, owed_before: dict[str | None, OwedRollback], poll: _Poll) -> str:
    """Try again the rollbacks earlier polls left owed that this poll neither tried nor made moot
    (a config in force now sets the GPU); a note for the log ('' when there were none)."""
    due = {key: owed for key, owed in owed_before.items()
           if state.rollbacks_owed.get(key) is owed and key not in state.in_force_gpus}
    if not due:
        return ""
    groups: dict[tuple[str, str | None], list[str | None]] = {}
    for key, owed in due.items():  # one rollback (and audit reason) per config and reason
        groups.setdefault((owed.reason, owed.config_sha256), []).append(key)
    notes, tried = [], set()
    try:
        # GPUs named first; a rollback of every GPU (an unreadable one had no UUID) last, keeping those
        for (reason, sha), keys in sorted(groups.items(), key=lambda group: None in group[1]):
            since = min(due[k].since for k in keys)
            if None in keys:
                result = _roll_back(state, poll, reason, config_sha256=sha, keep=state.in_force_gpus | tried,
                                    owed_since=since)
            else:
                uuids = sorted(k for k in keys if k is not None)
                result = _roll_back(state, poll, reason, config_sha256=sha, gpu_uuids=uuids, owed_since=since)
                tried.update(uuids)
            notes.append(result.summary())
    except Exception as exc:  # noqa: BLE001 - NVML gone, audit not written: still owed, tried next poll
        state.poll_failures += 1
        notes.append(f"failed ({type(exc).__name__}: {exc})")
    return "; rollbacks owed by earlier polls tried again: " + "; ".join(notes) + _owed_note(state)


def _owed_note(state: AgentState) -> str:
    if not state.rollbacks_owed:
        return ""
    n = len(state.rollbacks_owed)
    return f"; {n} GPU rollback{'s' if n > 1 else ''} not done, tried again next poll"


def run_agent(
    location: str, *, public_key: Any, host: str, nvml: Any = None, lake: str | Path | None = None,
    poll_interval_s: float = 300.0, iterations: int | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] = print,
    replay_guard: ReplayGuard | None = None, state: AgentState | None = None,
) -> AgentState:
    """Poll `location` every `poll_interval_s` seconds (forever, or `iterations` times). `state`:
    the loop's memory, handed in where the metrics read it (collectors.metrics.AgentStateMetrics)."""
    state = state if state is not None else AgentState()
    done = 0
    while iterations is None or done < iterations:
        state.polls += 1
        state.last_poll_at = clock()
        try:
            message = poll_once(state, location, public_key=public_key, host=host, nvml=nvml, lake=lake, now=clock(),
                                replay_guard=replay_guard)
        except Exception as exc:  # noqa: BLE001 - a daemon: one failed poll (NVML gone, disk full) is not the end
            state.poll_failures += 1
            message = f"poll failed ({type(exc).__name__}: {exc}); trying again next poll"
        log(f"{clock().isoformat(timespec='seconds')} {message}")
        done += 1
        if iterations is None or done < iterations:
            sleep(poll_interval_s)
    return state
