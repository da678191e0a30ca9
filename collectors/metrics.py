"""Prometheus metrics of the node side: the collector, ship and the agent watch themselves.

Each process builds its own registry (never the library's global one, so tests and two roles in
one process do not mix) and exposes it two ways, both optional:
- `--metrics-port N`: prometheus_client's HTTP server, `/metrics` on the address given
  (127.0.0.1 by default; 0.0.0.0 for a Prometheus on another host);
- `--metrics-textfile PATH`: the same text rewritten atomically (prometheus_client writes a
  temporary file and renames it) for node_exporter's textfile collector, whose
  `--collector.textfile.directory` reads every `*.prom` there. Ship, a one-shot run from a
  timer, writes it once at the end; the collector and the agent every TEXTFILE_INTERVAL_S and at
  stop.
The values are read from the process's own statistics at each scrape (custom collectors), so the
sampling loop does no metric work of its own. Names follow Prometheus' conventions: a unit
suffix, `_total` for counters, `_timestamp_seconds` for Unix times. `METRIC_NAMES` lists every
name this module can export (infra/grafana's test checks the dashboard against it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

TEXTFILE_INTERVAL_S = 15.0

COLLECTOR_METRICS = {
    "joulehouse_collector_readings_spooled_total": "Rows each source handed to the spool, by source and dataset (DCGM "
                                                   "and links, whose spool is Prometheus: rows they wrote into the "
                                                   "lake). Spooled rows reach the lake as segments roll.",
    "joulehouse_collector_spool_rows_recovered_total": "Rows this process, at its start, rolled into the lake from "
                                                       "spool segments a stopped or killed collector left.",
    "joulehouse_collector_source_errors_total": "Polls on which a source could not be read at all (it failed, or every "
                                                "row it gave carries an error), by source.",
    "joulehouse_collector_readings_lost_past_retention_seconds_total": "Seconds of readings a source catching up found "
                                                                       "older than its store keeps (DCGM: Prometheus' "
                                                                       "retention): lost to the lake, by source.",
    "joulehouse_collector_spool_backlog_rows": "Rows held in memory, not yet in a spool segment (a full disk keeps them here).",
    "joulehouse_collector_spool_backlog_segments": "Closed spool segments waiting to be rolled into the lake.",
    "joulehouse_collector_lake_files_written_total": "Parquet files rolled into the node's lake.",
    "joulehouse_collector_last_lake_write_timestamp_seconds": "When a Parquet file was last rolled into the lake (Unix time).",
    "joulehouse_collector_disk_full_events_total": "Flushes that found the disk full.",
    "joulehouse_collector_write_errors_total": "Spool writes that failed for another reason than a full disk.",
    "joulehouse_collector_polls_total": "Polls of the sampling loop.",
    "joulehouse_collector_late_polls_total": "Polls that overran the sampling interval.",
}
SHIP_METRICS = {
    "joulehouse_ship_last_success_timestamp_seconds": "When a ship run last ended having shipped every file it found (Unix time).",
    "joulehouse_ship_last_run_timestamp_seconds": "When a ship run last ended, shipped or not (Unix time).",
    "joulehouse_ship_files_shipped": "Files the last ship run copied.",
    "joulehouse_ship_bytes_shipped": "Bytes the last ship run copied.",
    "joulehouse_ship_pending_files": "Finished lake files not yet shipped after the last run.",
    "joulehouse_ship_failed": "1 when the last ship run stopped on a file it could not copy, else 0.",
}
AGENT_METRICS = {
    "joulehouse_agent_gpu_actions_total": "GPU outcomes of the agent's applies and rollbacks, by action "
                                          "(apply, unchanged, rollback, refuse, verify-failed).",
    "joulehouse_agent_config_refusals_total": "Configs the agent refused as a whole, by the check that failed.",
    "joulehouse_agent_polls_total": "Polls of the config location.",
    "joulehouse_agent_poll_failures_total": "Polls that failed (fetch, NVML or audit error).",
    "joulehouse_agent_last_poll_timestamp_seconds": "When the agent last polled (Unix time).",
    "joulehouse_agent_config_age_seconds": "Age of the config in force: now minus its valid_from, s (absent with none).",
    "joulehouse_agent_config_in_force": "1 while a config is in force on this host, else 0.",
    "joulehouse_agent_rollback_owed_gpus": "GPUs whose return to the defaults has not gone through yet (tried again each "
                                       "poll); one more while some GPU cannot be read. Above 0 for long: a cap "
                                       "outlives its config.",
}
METRIC_NAMES = frozenset(COLLECTOR_METRICS) | frozenset(SHIP_METRICS) | frozenset(AGENT_METRICS)


def _counter(name: str, labels: list[str] | None = None) -> CounterMetricFamily:
    # CounterMetricFamily adds `_total` itself when exposing: give it the name without it.
    return CounterMetricFamily(name.removesuffix("_total"), _HELP[name], labels=labels)


def _gauge(name: str, value: float | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _HELP[name], value=value)


_HELP = {**COLLECTOR_METRICS, **SHIP_METRICS, **AGENT_METRICS}


class CollectorStatsMetrics(Collector):
    """The collect loop's statistics (collectors.collect.Collector) at each scrape."""

    def __init__(self, collector: Any):
        self._collector = collector

    def collect(self) -> Iterator[Any]:
        stats = self._collector.stats
        readings = _counter("joulehouse_collector_readings_spooled_total", ["source", "dataset"])
        counts = dict(stats.rows_by_source)
        for entry in self._collector.scheduled:
            # A source that writes its own files (DCGM: Prometheus is its spool) counts them itself.
            direct = getattr(entry.source, "rows_written_total", None)
            if direct is not None:
                key = (entry.label, entry.source.dataset)
                counts[key] = counts.get(key, 0) + direct
        for (source, dataset), rows in sorted(counts.items()):
            readings.add_metric([source, dataset], rows)
        yield readings
        errors = _counter("joulehouse_collector_source_errors_total", ["source"])
        for source, count in sorted(dict(stats.errors_by_source).items()):
            errors.add_metric([source], count)
        yield errors
        lost = _counter("joulehouse_collector_readings_lost_past_retention_seconds_total", ["source"])
        for entry in self._collector.scheduled:
            # Only a source that catches up from a store of its own (DCGM: Prometheus) can find readings gone.
            seconds = getattr(entry.source, "lost_past_retention_s_total", None)
            if seconds is not None:
                lost.add_metric([entry.label], seconds)
        yield lost
        spools = list(self._collector.spools())
        yield _gauge("joulehouse_collector_spool_backlog_rows", sum(s.buffered_rows for s in spools))
        yield _gauge("joulehouse_collector_spool_backlog_segments", sum(len(s.pending) for s in spools))
        for name, value in (("joulehouse_collector_lake_files_written_total", stats.files_written),
                            ("joulehouse_collector_spool_rows_recovered_total", stats.rows_recovered),
                            ("joulehouse_collector_disk_full_events_total", stats.disk_full_events),
                            ("joulehouse_collector_write_errors_total", stats.write_errors),
                            ("joulehouse_collector_polls_total", stats.polls),
                            ("joulehouse_collector_late_polls_total", stats.late_polls)):
            family = _counter(name)
            family.add_metric([], value)
            yield family
        if stats.last_lake_write_at_s is not None:
            yield _gauge("joulehouse_collector_last_lake_write_timestamp_seconds", stats.last_lake_write_at_s)


class AgentStateMetrics(Collector):
    """The agent loop's state (collectors.agent_loop.AgentState) at each scrape; `clock` gives
    Unix seconds (the config's age is measured at the scrape, not at the last poll)."""

    def __init__(self, state: Any, clock: Callable[[], float] = time.time):
        self._state, self._clock = state, clock

    def collect(self) -> Iterator[Any]:
        state = self._state
        actions = _counter("joulehouse_agent_gpu_actions_total", ["action"])
        for action, count in sorted(dict(state.gpu_actions).items()):
            actions.add_metric([action], count)
        yield actions
        refusals = _counter("joulehouse_agent_config_refusals_total", ["reason"])
        for reason, count in sorted(dict(state.config_refusals).items()):
            refusals.add_metric([reason], count)
        yield refusals
        for name, value in (("joulehouse_agent_polls_total", state.polls),
                            ("joulehouse_agent_poll_failures_total", state.poll_failures)):
            family = _counter(name)
            family.add_metric([], value)
            yield family
        if state.last_poll_at is not None:
            yield _gauge("joulehouse_agent_last_poll_timestamp_seconds", state.last_poll_at.timestamp())
        yield _gauge("joulehouse_agent_config_in_force", 1.0 if state.in_force_sha256 else 0.0)
        yield _gauge("joulehouse_agent_rollback_owed_gpus", len(state.rollbacks_owed))
        if state.in_force_sha256 and state.in_force_valid_from is not None:
            yield _gauge("joulehouse_agent_config_age_seconds", self._clock() - state.in_force_valid_from.timestamp())


def ship_registry(report: Any, *, pending_files: int, failed: bool, ended_at_s: float,
                  last_success_at_s: float | None) -> CollectorRegistry:
    """The registry of one ship run: what it shipped, what is left, when it last succeeded."""
    registry = CollectorRegistry()
    values = {
        "joulehouse_ship_last_run_timestamp_seconds": ended_at_s,
        "joulehouse_ship_files_shipped": len(report.shipped) if report is not None else 0,
        "joulehouse_ship_bytes_shipped": report.bytes_shipped if report is not None else 0,
        "joulehouse_ship_pending_files": pending_files,
        "joulehouse_ship_failed": 1.0 if failed else 0.0,
    }
    if last_success_at_s is not None:
        values["joulehouse_ship_last_success_timestamp_seconds"] = last_success_at_s
    registry.register(_Fixed({name: _gauge(name, value) for name, value in values.items()}))
    return registry


class _Fixed(Collector):
    def __init__(self, families: dict[str, Any]):
        self._families = families

    def collect(self) -> Iterator[Any]:
        yield from self._families.values()


def last_success_from_textfile(path: str | Path) -> float | None:
    """The last-success time an earlier ship run wrote to `path` (a failed run keeps it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("joulehouse_ship_last_success_timestamp_seconds "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


class MetricsExposure:
    """Serve `registry` on `port` and/or rewrite it to `textfile` every `interval_s` until
    `stop()` (which writes it a last time). Port 0 / textfile None: that way is off."""

    def __init__(self, registry: CollectorRegistry, *, port: int = 0, address: str = "127.0.0.1",
                 textfile: str | Path | None = None, interval_s: float = TEXTFILE_INTERVAL_S):
        self.registry, self.textfile, self.interval_s = registry, textfile, interval_s
        self._stop = threading.Event()
        self._server = None
        self._thread: threading.Thread | None = None
        if port:
            self._server, self._server_thread = start_http_server(port, addr=address, registry=registry)
        if textfile:
            Path(textfile).parent.mkdir(parents=True, exist_ok=True)
            self.write_textfile()
            self._thread = threading.Thread(target=self._loop, name="metrics-textfile", daemon=True)
            self._thread.start()

    def write_textfile(self) -> None:
        if self.textfile:
            write_to_textfile(str(self.textfile), self.registry)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write_textfile()
            except OSError:
                pass  # a full disk must not stop the process it watches; the next write retries

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        try:
            self.write_textfile()
        except OSError:
            pass
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
