"""`joulehouse collect --source nvml|dcgm|links|ipmi|sim [--source ...] --lake DIR --interval 1s`: the node collector.

NVML (gpu_samples, and link_samples for GPUs with NVLink) and sim are read every --interval in
the loop; IPMI (node_samples, every collector.ipmi_interval_s), DCGM and links (ranges from
Prometheus, every collector.dcgm_sync_interval_s: links are dcgm-exporter's NVLink fields and
node_exporter's InfiniBand/RoCE ports, into link_samples) each run in their own thread, so a slow
BMC or Prometheus never delays a GPU sample. Settings
come from --config (TOML, [collector]) and JOULEHOUSE_COLLECTOR__* variables (BMC credentials:
JOULEHOUSE_COLLECTOR__IPMI_USER / __IPMI_PASSWORD); the options here override them.

Runs until SIGTERM/SIGINT, then flushes and exits 0. Exit 1: it stopped with rows it could not
keep (the disk was full to the end; the line says how many); 2: bad option or settings, another
collector holds the spool folder, or the spool or the lake cannot be written (read-only, no
permission: the segments already spooled stay for the next start); 3: NVML cannot start, or no
source could be read at all.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import List, Optional

import typer

from joulehouse.cli.options import (METRICS_ADDRESS_HELP, METRICS_PORT_HELP, METRICS_TEXTFILE_HELP, expose_metrics, fail,
                                    node_lake, quoted)

SOURCES = ("nvml", "dcgm", "links", "ipmi", "sim")


def collect_command(
    source: List[str] = typer.Option(..., "--source", help="nvml, dcgm, links, ipmi or sim (repeatable)."),
    lake_option: str = typer.Option(..., "--lake", help="The node's local lake folder (joulehouse ship sends it on)."),
    interval: Optional[str] = typer.Option(None, "--interval", help="GPU sampling interval, e.g. 1s, 100ms (default: settings, 1s)."),
    host: Optional[str] = typer.Option(None, "--host", help="Host name in the lake (default: this machine's)."),
    settings_file: Optional[Path] = typer.Option(None, "--config", help="joulehouse TOML settings (\\[collector] section)."),
    spool_dir: Optional[Path] = typer.Option(None, "--spool-dir", help="Spool folder (default: \\[collector] spool_dir, else <lake>/../spool)."),
    flush_interval: Optional[str] = typer.Option(None, "--flush-interval", help="Spool fsync interval (default 2s)."),
    roll_interval: Optional[str] = typer.Option(None, "--roll-interval", help="Parquet roll interval (default 300s)."),
    ipmi_interval: Optional[str] = typer.Option(None, "--ipmi-interval", help="BMC read interval (default 5s)."),
    dcgm_interval: Optional[str] = typer.Option(None, "--dcgm-interval", help="DCGM sync interval (default 60s)."),
    sim_gpus: int = typer.Option(8, "--sim-gpus", min=1, help="GPUs of the sim source."),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", min=1, help="Stop after N polls (tests)."),
    metrics_port: int = typer.Option(0, "--metrics-port", help=METRICS_PORT_HELP),
    metrics_address: str = typer.Option("127.0.0.1", "--metrics-address", help=METRICS_ADDRESS_HELP),
    metrics_textfile: Optional[Path] = typer.Option(None, "--metrics-textfile", help=METRICS_TEXTFILE_HELP),
) -> None:
    """Sample GPUs (and the BMC) into the lake through a crash-safe spool."""
    import logging
    import signal
    import threading

    from joulehouse.collectors.collect import Collector, SourceStartError, StorageError, parse_duration_s
    from joulehouse.collectors.lake_locks import SourceInUseError
    from joulehouse.collectors.settings import CollectorSettings, SettingsError, load_node_settings, replace_fields
    from joulehouse.collectors.spool import SpoolInUseError
    from joulehouse.collectors.writer import check_host_name

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lake = node_lake(lake_option)
    unknown = [name for name in source if name not in SOURCES]
    if unknown:
        fail(f"--source {quoted(unknown[0])}: expected one of {', '.join(SOURCES)}", 2)
    try:
        settings = load_node_settings(settings_file).collector
    except (SettingsError, ValueError) as exc:
        fail(str(exc), 2)
    for name, option, text in (
            ("interval_s", "--interval", interval), ("spool_flush_interval_s", "--flush-interval", flush_interval),
            ("roll_interval_s", "--roll-interval", roll_interval), ("ipmi_interval_s", "--ipmi-interval", ipmi_interval),
            ("dcgm_sync_interval_s", "--dcgm-interval", dcgm_interval)):
        if text is None:
            continue
        try:
            settings = replace_fields(settings, **{name: parse_duration_s(text, option)})
        except SettingsError as exc:  # named by the option given, not the settings class behind it
            fail(f"{option} {quoted(text)}: {str(exc).split(': ', 1)[-1]} (s)", 2)
        except ValueError as exc:
            fail(str(exc), 2)
    given_host, host = host is not None, host if host is not None else socket.gethostname()
    try:
        check_host_name(host)  # before any reading is spooled: a bad name would never reach the lake
    except ValueError as exc:
        fail(f"--host: {exc}" if given_host else f"this machine's name: {exc}; give --host", 2)
    sources = _build_sources(list(dict.fromkeys(source)), host, lake, settings, sim_gpus, CollectorSettings())
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:  # the spool: --spool-dir, else [collector] spool_dir, else <lake>/../spool (Collector decides)
        collector = Collector(sources, lake=lake, settings=settings, spool_dir=spool_dir)
    except ValueError as exc:  # an interval that is not a finite time above zero
        fail(str(exc), 2)
    from joulehouse.collectors.metrics import CollectorStatsMetrics

    exposure = expose_metrics(CollectorStatsMetrics(collector), metrics_port, metrics_address, metrics_textfile)
    _log_start(collector, host)
    try:
        stats = collector.run(stop, max_polls=max_polls)
    except (SpoolInUseError, SourceInUseError, StorageError) as exc:
        fail(str(exc), 2)
    except SourceStartError as exc:
        fail(str(exc), 3)
    finally:
        if exposure is not None:
            exposure.stop()
    if stats.polls and stats.reads_ok == 0 and stats.source_errors:
        fail("no source could be read (see the log above)", 3)
    rows, files = collector.written_totals()
    # the rows a stopped collector left are said apart, so that both add up to what the lake gained
    recovered = (f"; also recovered {stats.rows_recovered} rows in {stats.files_recovered} "
                 f"file{'' if stats.files_recovered == 1 else 's'} a stopped collector left in the spool"
                 if stats.files_recovered else "")
    typer.echo(f"stopped: {stats.polls} polls, {rows} rows, {files - stats.files_recovered} files, "
               f"{stats.source_errors} source errors, {stats.disk_full_events} disk-full events{recovered}")
    if stats.rows_not_kept:
        why = "its disk was full" if stats.disk_full_events else "it took no writes"
        fail(f"{stats.rows_not_kept} of {stats.rows} rows could not be kept and are lost: the spool {collector.spool_dir} could "
             f"not be written up to the stop ({why}); {stats.segments_left} spool segments stay for the next start", 1)
    if stats.segments_left:
        typer.echo(f"{stats.segments_left} spool segments could not be rolled into the lake yet; the next start "
                   "rolls them")


def _log_start(collector, host: str) -> None:
    """One line in the journal as the collector starts: what it reads, how often, for which host
    (as the lake names it) and where it writes; until then `journalctl -f` showed nothing."""
    import logging

    from joulehouse.collectors.sources.host_names import canonical_host

    paces = ", ".join(f"{entry.label} every {entry.interval_s or collector.settings.interval_s:g} s"
                      for entry in collector.scheduled)
    logging.getLogger("joulehouse.collect").info(
        "collecting %s for host %r into %s (spool %s; a file rolled every %g s)", paces, canonical_host(host),
        collector.lake, collector.spool_dir, collector.settings.roll_interval_s)


def _build_sources(names, host, lake, settings, sim_gpus, defaults):
    """The scheduled sources for `names`: NVML required and in the loop, IPMI and DCGM in threads."""
    import logging

    from joulehouse.collectors.collect import Scheduled

    log = logging.getLogger("joulehouse.collect")
    sources = []
    for name in names:
        if name == "nvml":
            from joulehouse.collectors.sources.nvml import NvmlSource
            from joulehouse.collectors.sources.nvml_links import NvmlLinkSource

            from joulehouse.collectors.sources.gpu_processes import GpuProcessSource

            nvml = NvmlSource(host)
            sources.append(Scheduled(nvml, required=True))
            # After NVML in the list: the loop reads it first, so each map is of that poll's processes.
            sources.append(Scheduled(GpuProcessSource(host, nvml, proc_root=settings.proc_root),
                                     interval_s=settings.process_map_interval_s))
            sources.append(Scheduled(NvmlLinkSource(host)))
        elif name == "sim":
            from joulehouse.collectors.sources.sim import SimSource

            sources.append(Scheduled(SimSource(host, gpus=sim_gpus)))
        elif name == "ipmi":
            from joulehouse.collectors.sources.ipmi import IpmiSource

            sources.append(Scheduled(IpmiSource.from_settings(host, settings),
                                     interval_s=settings.ipmi_interval_s, background=True))
        elif name == "dcgm":
            from joulehouse.collectors.sources.dcgm import DcgmSource

            # Node defaults: the watermark beside the lake, and only this host's series (a central
            # collector reading every host sets dcgm_selector, e.g. '{job="dcgm-exporter"}').
            overrides = {}
            if settings.dcgm_state_path == defaults.dcgm_state_path:
                overrides["state_path"] = lake.parent / "state" / "dcgm-watermark.json"
            if not settings.dcgm_selector:
                overrides["selector_candidates"] = _host_selectors(host)
            dcgm = DcgmSource.from_settings(lake, settings, **overrides)
            log.info("dcgm: reading %s at %s every %.0f s", dcgm.query, dcgm.url, settings.dcgm_sync_interval_s)
            sources.append(Scheduled(dcgm, interval_s=settings.dcgm_sync_interval_s, background=True))
        elif name == "links":
            from joulehouse.collectors.sources.links import STATE_FILE_NAME, PrometheusLinkSource

            overrides = {}
            if settings.dcgm_state_path == defaults.dcgm_state_path:
                overrides["state_path"] = lake.parent / "state" / STATE_FILE_NAME
            if not settings.dcgm_selector:
                # this host's series only: dcgm-exporter labels them, node_exporter's by the node's name
                # (node_uname_info), or where it has none by the instance naming it
                overrides["selector_candidates"] = _host_selectors(host)
                overrides["node_selector"] = _host_selectors(host)[-1]
                overrides["node_name"] = host
            links = PrometheusLinkSource.from_settings(lake, settings, **overrides)
            log.info("links: reading %s at %s every %.0f s", links.query, links.url, settings.dcgm_sync_interval_s)
            sources.append(Scheduled(links, interval_s=settings.dcgm_sync_interval_s, background=True))
    return sources


def _host_selectors(host: str) -> tuple[str, ...]:
    """This host's dcgm-exporter series, by the label its deployment names the host with (the
    source takes the first that finds series: collectors.sources.dcgm)."""
    from joulehouse.collectors.sources.host_names import host_name_regex

    # any spelling the lake names this host by (collectors.sources.host_names): by Hostname="NODE-01"
    # a node read none of the series a lowercasing kubelet's dcgm-exporter labelled node-01
    name = json.dumps(host_name_regex(host))  # a PromQL string: Go's escapes, which JSON's are
    return (f"Hostname=~{name}", f"hostname=~{name}", f"instance=~{name[:-1]}(:[0-9]+)?\"")


def register(app: typer.Typer) -> None:
    """Add `collect` to the joulehouse app."""
    app.command("collect", epilog="Example: joulehouse collect --source nvml --source ipmi --lake /var/lib/joulehouse/lake "
                "--interval 1s")(collect_command)
