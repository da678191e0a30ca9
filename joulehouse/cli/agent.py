"""`joulehouse agent apply|verify|run|rollback`: the node agent (and, registered with it, `joulehouse keys`).

Exit codes: 0 every GPU as asked; 1 some GPU refused or failed to verify (the table says which; a
dry run: would refuse), or (verify) a good file outside its validity window; 2 the config itself
was refused (tampered, expired, unsigned, other host, older than the one applied, over 16 MiB...)
or unreadable, or nothing was applied for want of a writable audit; 3 NVML is not usable on this
machine; 4 (apply, rollback) the GPUs were set as the table shows but their audit could not be written.
Its input checks live in cli.agent_preflight, its audit rules in cli.agent_audit, its table in cli.agent_output.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.agent_audit import fail_apply_write, refuse_unaudited_apply
from joulehouse.cli.agent_output import print_result
from joulehouse.cli.agent_preflight import (
    fetch_export, nvml_for_dry_run, nvml_usable_or_exit, parse_at, parse_poll_interval_s, public_key_or_exit,
    refuse_unsupported_scheme,
)
from joulehouse.cli.options import (METRICS_ADDRESS_HELP, METRICS_TEXTFILE_HELP, expose_metrics, fail, node_lake,
                                    refuse_empty)

# Where the systemd units keep the node's data (the collector's unit owns it): the agent service
# audits into <NODE_DATA>/lake and keeps its replay state in its own root-only folder beside it,
# <NODE_DATA>-agent (StateDirectory=joulehouse-agent): the collector's user must not be able to
# remove the record. A one-off apply, dry run or rollback on the node resolves to the same files,
# so it checks what the service would.
NODE_DATA = Path("/var/lib/joulehouse")


def agent_state_dir() -> Path:
    return NODE_DATA.with_name(NODE_DATA.name + "-agent")
AGENT_METRICS_PORT_HELP = "Serve Prometheus /metrics on this port (0: off), e.g. 9403 (the collector's is 9402)."

agent_app = typer.Typer(no_args_is_help=True, help="Apply signed recommended configs to this node's GPUs.")


def _node_lake(lake: Path | None) -> Path | None:
    """--lake, else the agent service's (<NODE_DATA>/lake) on a node; None elsewhere."""
    if lake is not None:
        return lake
    return NODE_DATA / "lake" if NODE_DATA.is_dir() else None


def _writable(folder: Path) -> bool:
    """Whether this user can create files in `folder`, or in its nearest existing parent."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | os.X_OK)
    return False


def _audit_lake(lake: Path | None, node_lake: Path | None) -> tuple[Path | None, str | None]:
    """(the lake to audit into, or None; the line saying why not). An explicit --lake is used as
    given; the service's lake only where this user can write its audit (a dry run as a plain user
    on a node still checks the service's replay state, it just is not audited)."""
    if lake is not None:
        return lake, None
    if node_lake is None:
        return None, f"not audited: no --lake, and no {NODE_DATA} on this machine"
    if not _writable(node_lake / "agent_audit"):
        return None, f"not audited: {node_lake / 'agent_audit'} is not writable by this user (the agent runs as root)"
    return node_lake, None


def _state_note(guard) -> str | None:
    """A line naming the replay state file when its path is relative (it depends on the folder)."""
    if guard.path.is_absolute():
        return None
    return (f"replay state: {guard.path.absolute()} (relative to this folder; the agent service keeps "
            f"{agent_state_dir() / guard.path.name}: pass --state or set JOULEHOUSE_AGENT__STATE_PATH)")


def _echo_notes(*notes: str | None) -> None:
    for note in notes:
        if note:
            typer.echo(note, err=True)


def _replay_guard(state: Path | None, lake: Path | None, settings_file: Path | None = None, *,
                  settings_may_fail: bool = False):
    """The node's guard (collectors.agent_replay), for [agent] site where set. Where the agent keeps
    the newest config accepted per site: --state, else [agent] state_path
    when set (file or JOULEHOUSE_AGENT__STATE_PATH), else the service's for the node's own lake
    (/var/lib/joulehouse-agent/), else beside the lake given (<lake>/../state/), else the relative
    default of [agent] state_path (_state_note names it). A folder another user can write is refused
    when the record is written (collectors.agent_replay). `settings_may_fail`: settings that cannot
    be read are said and the [agent] defaults taken (a rollback must not be refused over a setting
    of another section it never uses)."""
    from joulehouse.collectors.agent_replay import ReplayGuard
    from joulehouse.collectors.settings import AgentSettings, SettingsError, load_node_settings

    try:
        agent = load_node_settings(settings_file).agent
    except SettingsError as exc:
        if not settings_may_fail:
            fail(str(exc), 2)
        typer.echo(f"warning: the settings cannot be read ({exc}); going on with the agent's default state", err=True)
        agent = AgentSettings()
    if state is None:
        default = AgentSettings().state_path
        name = Path(default).name
        state = (Path(agent.state_path) if lake is None or agent.state_path != default
                 else agent_state_dir() / name if lake == NODE_DATA / "lake"
                 else lake.parent / "state" / name)
    return ReplayGuard(state, site=agent.site)


EXPORT_HELP = "The signed export (recommended-config.json): a path or an http(s), file or s3/gs/az URL."
def _lake_option(value: str | None) -> Path | None:
    """--lake as a local folder; a URL refused in one line (the audit is written locally and shipped)."""
    return None if value is None else node_lake(value)


LAKE_HELP = f"Lake folder to audit into (agent_audit; default: {NODE_DATA}/lake, the agent service's, where it exists)"
STATE_HELP = ("Replay state: the newest config accepted per site (default: \\[agent] state_path when set, else "
              f"{NODE_DATA}-agent/ for the node's lake, <lake>/../state/ for another; a folder other users can "
              "write is refused)")


AT_HELP = "Check the validity window at this UTC time (ISO 8601) instead of now"


@agent_app.command("apply")
def apply_command(
    export: str = typer.Argument(..., metavar="EXPORT", help=EXPORT_HELP),
    public_key: Path = typer.Option(..., "--public-key", help="PEM ed25519 public key the config must be signed with"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Verify and print what would be set; touch no device"),
    host: Optional[str] = typer.Option(None, "--host", help="Host name to take entries for (default: this machine)",
                                        callback=refuse_empty),
    lake: Optional[str] = typer.Option(None, "--lake", help=LAKE_HELP, callback=_lake_option),
    state: Optional[Path] = typer.Option(None, "--state", help=STATE_HELP),
    settings_file: Optional[Path] = typer.Option(None, "--config", help="joulehouse TOML settings (\\[agent] section)"),
    at: Optional[str] = typer.Option(None, "--at", help=AT_HELP + "; with --dry-run only (an apply is always now)"),
) -> None:
    """Verify a signed config and apply this host's power limits (and locked clocks).

    --dry-run checks what an apply checks, against the devices where NVML
    answers (without NVML: only that no GPU could take a value, e.g. 1e9 W), and
    sets nothing: it exits as the apply would (1 a GPU refused, 2 the config
    refused). On a node (/var/lib/joulehouse) it checks and audits into the
    agent service's files, from whatever folder it is run. A real apply is
    always audited: where there is no lake to audit into (no --lake off a node),
    it is refused before any GPU is touched.

    Example: joulehouse agent apply var/demo/export/recommended-config.json --public-key var/demo/keys/joulehouse-ed25519.pub.pem --dry-run
    """
    import datetime as dt

    from joulehouse.collectors.agent import apply_config
    from joulehouse.collectors.config_contract import ConfigError, ExpiredConfig, NotYetValid

    when = parse_at(at)
    if when is not None and not dry_run:
        fail("--at is for a --dry-run: a config is applied now or not at all", 2)
    key = public_key_or_exit(public_key)
    node_lake = _node_lake(lake)
    guard = _replay_guard(state, node_lake, settings_file)
    audit_lake, audit_note = _audit_lake(lake, node_lake)
    data = fetch_export(export)
    if not dry_run:
        refuse_unaudited_apply(audit_lake, audit_note, NODE_DATA / "lake")
    nvml = nvml_for_dry_run() if dry_run else nvml_usable_or_exit("use --dry-run to check a config without a GPU")
    try:
        # judged at --at, audited at the time it ran (an audit trail carries the real time)
        result = apply_config(data, public_key=key, host=host or socket.gethostname(), nvml=nvml,
                              dry_run=dry_run, lake=audit_lake, replay_guard=guard, now=when,
                              audited_at=None if when is None else dt.datetime.now(dt.timezone.utc))
    except (ExpiredConfig, NotYetValid) as exc:
        # outside its window now: an old export (the demo's, days later) is still checked with --at
        fail(f"{exc}; to check it at another time, give --at (a UTC time inside its validity window) with --dry-run",
             2, label="refused")
    except ConfigError as exc:
        fail(f"{type(exc).__name__}: {exc}", 2, label="refused")
    except OSError as exc:
        if dry_run:  # a dry run records no state: only its audit writes
            fail(f"cannot write the dry run's audit into {audit_lake} ({exc})", 2)
        fail_apply_write(exc, audit_lake, guard.path)
    print_result(result)
    _echo_notes(audit_note, _state_note(guard))
    if not result.ok:
        raise typer.Exit(1)


@agent_app.command("verify")
def verify_command(
    export: str = typer.Argument(..., metavar="EXPORT", help=EXPORT_HELP),
    public_key: Path = typer.Option(..., "--public-key", help="PEM ed25519 public key the config must be signed with"),
    at: Optional[str] = typer.Option(None, "--at", help=AT_HELP),
) -> None:
    """Check a config's signature and form, what it holds, and whether an agent would take it.

    It is judged now, or at --at. Exit 0: an agent would take it; 1: signed by
    the key and well formed, but outside its validity window; 2: refused
    (tampered, unsigned, another key, malformed). Touches no device.

    Example: joulehouse agent verify var/demo/export/recommended-config.json --public-key var/demo/keys/joulehouse-ed25519.pub.pem
    """
    import datetime as dt

    from joulehouse.collectors.config_contract import ConfigError, format_utc, load_config_document, verify_signature

    key = public_key_or_exit(public_key)
    when = parse_at(at) or dt.datetime.now(dt.timezone.utc)
    data = fetch_export(export)
    try:
        checked = verify_signature(load_config_document(data), key)
    except ConfigError as exc:
        fail(f"{type(exc).__name__}: {exc}", 2, label="refused")
    hosts = sorted({s.host for s in checked.settings})
    typer.echo(f"signature: valid (key {checked.key_id}); schema {checked.schema_version}; "
               f"body sha256 {checked.config_sha256} (of the signed body, not of the file)")
    typer.echo(f"site {checked.site}, day {checked.day}: {len(checked.settings)} GPU settings on {len(hosts)} hosts "
               f"({', '.join(hosts)}); {len(checked.excluded_gpu_models)} GPU models excluded")
    window = f"valid {format_utc(checked.valid_from)} .. {format_utc(checked.valid_until)}"
    if when < checked.valid_from:
        state = (f"not yet valid at {format_utc(when)} (from {format_utc(checked.valid_from)}): an agent would "
                 "refuse it until then")
    elif when >= checked.valid_until:
        state = f"expired at {format_utc(checked.valid_until)}, before {format_utc(when)}: an agent would refuse it"
    else:
        state = f"valid at {format_utc(when)}: an agent would take it"
    typer.echo(f"{window}; {state}")
    if not checked.valid_from <= when < checked.valid_until:
        raise typer.Exit(1)


@agent_app.command("rollback")
def rollback_command(
    host: Optional[str] = typer.Option(None, "--host", help="Host name for the audit (default: this machine)",
                                        callback=refuse_empty),
    lake: Optional[str] = typer.Option(None, "--lake", help=LAKE_HELP, callback=_lake_option),
    state: Optional[Path] = typer.Option(None, "--state", help=STATE_HELP),
    settings_file: Optional[Path] = typer.Option(None, "--config", help="joulehouse TOML settings (\\[agent] section)"),
) -> None:
    """Return every GPU of this node to its default power limit and unlock its clocks.

    Audited into the agent service's lake (/var/lib/joulehouse/lake) on a node, or into --lake;
    the clocks it unlocks are recorded in the agent's state, beside the replay state (the
    service's, on a node), where the agent judges the clock locks it left from.

    Example: sudo joulehouse agent rollback
    """
    from joulehouse.collectors.agent import rollback
    from joulehouse.collectors.agent_audit import AuditNotWritten
    from joulehouse.collectors.agent_locks import ClockLockRecord

    node_lake = _node_lake(lake)
    audit_lake, audit_note = _audit_lake(lake, node_lake)
    clock_locks = ClockLockRecord(_replay_guard(state, node_lake, settings_file, settings_may_fail=True).clock_locks_path)
    nvml = nvml_usable_or_exit("a rollback needs the GPUs' driver: run it on the node, as root")
    try:
        result = rollback(host=host or socket.gethostname(), nvml=nvml, lake=audit_lake,
                          reason="rolled back by the operator", clock_locks=clock_locks)
    except AuditNotWritten as exc:  # what was done to the GPUs stands; only its audit is missing
        print_result(exc.result)
        fail(f"{exc.result.summary()}, but the audit could not be written into {audit_lake} ({exc}): "
             "the lake does not record this rollback", 4)
    print_result(result)
    _echo_notes(audit_note)
    if not result.ok:
        raise typer.Exit(1)


@agent_app.command("run")
def run_command(
    settings_file: Optional[Path] = typer.Option(None, "--config", help="joulehouse TOML settings (\\[agent] section)"),
    export_url: Optional[str] = typer.Option(None, "--export-url", callback=refuse_empty,
                                             help="Where the signed export is published: a path or URL "
                                                  "(default: \\[agent] config_url)"),
    public_key: Optional[Path] = typer.Option(None, "--public-key", help="PEM ed25519 public key"),
    host: Optional[str] = typer.Option(None, "--host", help="Host name (default: this machine)",
                                        callback=refuse_empty),
    lake: Optional[str] = typer.Option(None, "--lake", help=LAKE_HELP, callback=_lake_option),
    interval: Optional[str] = typer.Option(None, "--interval", metavar="DURATION",
                                           help="Time between polls: 30s, 5m; 1s to 24h (default: \\[agent] poll_interval_s, 300 s)"),
    interval_s: Optional[float] = typer.Option(None, "--interval-s", hidden=True),
    config_url: Optional[str] = typer.Option(None, "--config-url", hidden=True),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1, help="Stop after N polls (default: forever)"),
    state: Optional[Path] = typer.Option(None, "--state", help=STATE_HELP),
    metrics_port: int = typer.Option(0, "--metrics-port", help=AGENT_METRICS_PORT_HELP),
    metrics_address: str = typer.Option("127.0.0.1", "--metrics-address", help=METRICS_ADDRESS_HELP),
    metrics_textfile: Optional[Path] = typer.Option(None, "--metrics-textfile", help=METRICS_TEXTFILE_HELP),
) -> None:
    """Poll the signed export; apply a new one, roll back on its expiry or revocation.

    Example: sudo joulehouse agent run --config /etc/joulehouse/joulehouse.toml --interval 5m
    """
    from joulehouse.collectors.agent_loop import run_agent
    from joulehouse.collectors.settings import SettingsError, load_node_settings

    interval_s = parse_poll_interval_s(interval, interval_s)
    try:
        agent = load_node_settings(settings_file).agent
    except SettingsError as exc:
        fail(str(exc), 2)
    location = export_url or config_url or agent.config_url
    if not location:
        fail("no export location: pass --export-url or set [agent] config_url", 2)
    refuse_unsupported_scheme(location, "export location")
    from joulehouse.collectors.agent_loop import AgentState

    key = public_key_or_exit(public_key or Path(agent.public_key_path))
    node_lake = _node_lake(lake)
    audit_lake, audit_note = _audit_lake(lake, node_lake)
    refuse_unaudited_apply(audit_lake, audit_note, NODE_DATA / "lake")  # the loop applies and rolls back
    nvml, guard, loop_state = nvml_usable_or_exit(), _replay_guard(state, node_lake, settings_file), AgentState()
    _echo_notes(audit_note, _state_note(guard))
    from joulehouse.collectors.metrics import AgentStateMetrics

    exposure = expose_metrics(AgentStateMetrics(loop_state), metrics_port, metrics_address, metrics_textfile)
    try:
        run_agent(location, public_key=key, host=host or socket.gethostname(), nvml=nvml, lake=audit_lake,
                  poll_interval_s=agent.poll_interval_s if interval_s is None else interval_s, iterations=iterations,
                  log=typer.echo,
                  replay_guard=guard, state=loop_state)
    finally:
        if exposure is not None:
            exposure.stop()


def register(app: typer.Typer) -> None:
    """Add the `agent` and `keys` command groups to the joulehouse app."""
    from joulehouse.cli.keys import keys_app

    app.add_typer(agent_app, name="agent")
    app.add_typer(keys_app, name="keys")
