"""DCGM readings through Prometheus: dcgm-exporter series -> `gpu_samples` rows, exactly once.

dcgm-exporter publishes one series per (field, GPU) with the labels `gpu` (index), `UUID`,
`modelName` and `Hostname` (`hostname` in some deployments); Prometheus stores them. This
source asks Prometheus for the raw samples of a time range (one instant query of
`{fields}[window]` at the window's end), converts the string values, and pivots to one row per
(GPU, scrape timestamp). A field a GPU does not publish is NULL in its rows, never 0.

Raw samples, not `query_range`: a range query repeats a series' last sample at every step for
up to its 5-minute lookback, so after Prometheus was down it handed over old readings as new
ones, at instants no scrape took place. Raw samples keep the scrapes' gaps and own timestamps.
Asking Prometheus (the client, retries, the choice of selector, the raw-sample window, its clock)
is DcgmReader's (dcgm_reader); this module writes what it reads to the lake, exactly once.

Series with dcgm-exporter's Kubernetes labels (`pod`, `namespace`, `container`) also give the
lake's `jobs`: one row per pod and GPU it held, the namespace as team (dcgm_pods).

Units as dcgm-exporter gives them: power W, energy mJ (a counter since boot), clocks MHz,
temperatures C, GPU/memory-copy utilisation %, DCGM_FI_PROF_* activity ratios 0..1, PCIe
bytes per second, framebuffer used MiB.

Exactly once: Prometheus is this source's spool. A JSON state file holds the watermark (the last
timestamp written) and, while a range is being written, that range ("pending"). A range's rows land
in files named by the range, so a range redone after a crash replaces its own files; the watermark
advances only after they are written. A state file lost or older than the lake goes on from the
lake's newest range (dcgm_resume). Range bounds are multiples of the step and a range holds the
samples in (previous bound, its end], so every run asks for the same windows, a sample in one only.

Past retention: after a stop longer than Prometheus' retention (15 d by default), or a first start
whose initial lookback is longer, the oldest ranges are gone from Prometheus. The sync still reads
them (what a block not yet deleted keeps is written) and goes on, since they cannot be read again
and waiting would stall it for nothing; but it says so first: one warning naming the span (UTC,
hours) and its seconds in `lost_past_retention_s_total` (the collector's
joulehouse_collector_readings_lost_past_retention_seconds_total), so a hole in the lake has a reason.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from joulehouse.collectors.schema import DATASETS, GPU_SAMPLES, SORT_KEYS, conform
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm_pods import PodJobs
from joulehouse.collectors.sources.dcgm_reader import DcgmClientMissing, DcgmReader  # noqa: F401  (importable from here)
from joulehouse.collectors.sources.dcgm_resume import range_file_name, resumed_state
from joulehouse.collectors.sources.dcgm_state import STATE_VERSION, WatermarkState, epoch_s as _epoch, iso_utc as _iso
from joulehouse.collectors.sources.dcgm_series import (  # noqa: F401  (importable from here)
    COLUMNS, FIELD_ALIASES, FIELDS, SOURCE_TAG, WIDE_COLUMNS, SeriesKey, fields_query, pivot_range_result,
    series_key)
from joulehouse.collectors.writer import WrittenFile, partition_dir, write_parquet_atomic

log = logging.getLogger(__name__)
# A catch-up shorter than this cannot reach past what Prometheus keeps (it holds its head block, 2-3 h,
# however short its retention), so its retention is not asked: one more request every sync, before.
RETENTION_ASKED_PAST_S = 3600.0

# Prometheus refuses a range query with more than 11,000 points per series.
MAX_POINTS_PER_QUERY = 10_000
# The longest window of raw samples asked for at once: at a 1 s scrape, 3,600 samples a series,
# about 0.5 M for a node's 8 GPUs x 17 fields (Prometheus' default query.max-samples is 50 M).
MAX_RAW_WINDOW_S = 3600
# How far ahead of Prometheus' clock the node's may read before the sync trusts Prometheus'.
CLOCK_AHEAD_TOLERANCE_S = 30.0

def write_range(lake: str | Path, table: pa.Table, start_s: float, end_s: float, *,
                dataset: str = "gpu_samples", tag: str = SOURCE_TAG) -> list[WrittenFile]:
    """Write one range's rows of `dataset`, one file per (date, host) partition, under names fixed
    by the range and `tag`: writing the same range again replaces those files rather than adding rows."""
    if table.num_rows == 0:
        return []
    table = conform(dataset, table)
    dates = pc.strftime(table.column("sampled_at"), format="%Y-%m-%d", locale="C")
    keys = sorted(set(zip(dates.to_pylist(), table.column("host").to_pylist())))
    written = []
    for date, host in keys:
        mask = pc.and_(pc.equal(dates, date), pc.equal(table.column("host"), host))
        part = table.filter(mask).sort_by(SORT_KEYS[dataset])
        written.append(write_parquet_atomic(part, partition_dir(Path(lake), dataset, date, host)
                                            / range_file_name(start_s, tag, end_s)))
    return written


class DcgmSource(DcgmReader):
    """gpu_samples from dcgm-exporter series stored in Prometheus (source tag 'dcgm').

    `read_range(start, end)` returns the rows of a closed range; `sync()` writes every range
    from the watermark up to `now - settle_s` into the lake exactly once and returns the files.
    `read()` (the collect loop's Protocol) runs `sync()` and returns no rows, because this
    source writes its own ranges: Prometheus already holds the samples durably."""

    dataset = "gpu_samples"

    def __init__(
        self,
        lake: str | Path,
        *,
        url: str = "http://127.0.0.1:9090",
        step_s: float = 30.0,
        state_path: str | Path = "var/state/dcgm-watermark.json",
        selector: str = "",
        selector_candidates: Sequence[str] = (),
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        settle_s: float = 60.0,
        initial_lookback_s: float = 3600.0,
        client: Any = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(url=url, step_s=step_s, selector=selector, selector_candidates=selector_candidates,
                         timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
                         initial_lookback_s=initial_lookback_s, client=client, sleep=sleep)
        self.lake = Path(lake)
        self.state = WatermarkState(state_path)
        self.settle_s = settle_s
        self._clock = clock
        # Pods on GPUs (dcgm-exporter's Kubernetes labels) become jobs (collectors/sources/dcgm_pods.py).
        self.pods = PodJobs(self.lake, self.state.path.with_name(f"{self.state.path.stem}-pods.json"))
        # Rows this source wrote to the lake itself (read() hands the loop none): for the metrics.
        self.rows_written_total = 0
        self.files_written_total = 0  # with rows_written_total: what this source wrote itself, for the collector's totals
        self.lost_past_retention_s_total = 0.0
        # A sync that failed inside a lost span is retried from the same watermark: count its seconds once.
        self._lost_said_until_s = -math.inf

    @classmethod
    def from_settings(cls, lake: str | Path, settings: CollectorSettings, **overrides: Any) -> DcgmSource:
        kwargs: dict[str, Any] = dict(
            url=settings.prometheus_url, step_s=settings.prometheus_step_s,
            state_path=settings.dcgm_state_path, selector=settings.dcgm_selector,
            timeout_s=settings.prometheus_timeout_s, retries=settings.prometheus_retries,
            backoff_s=settings.prometheus_backoff_s, settle_s=settings.dcgm_settle_s,
            initial_lookback_s=settings.dcgm_initial_lookback_s,
        )
        kwargs.update(overrides)
        return cls(lake, **kwargs)

    def _next_range(self, state: dict[str, Any], now_s: float) -> tuple[float, float] | None:
        step = self.step_s
        end = math.floor((now_s - self.settle_s) / step) * step
        if state.get("watermark_at"):
            start = _epoch(state["watermark_at"]) + step
        else:
            start = math.floor((now_s - self.initial_lookback_s) / step) * step
        start = math.ceil(start / step) * step
        if end < start:
            return None
        # Keep each query under Prometheus' points-per-series limit, a raw one under an hour.
        end = min(end, start + (MAX_POINTS_PER_QUERY - 1) * step)
        if self.reads_raw_samples:
            end = min(end, start + max(0, MAX_RAW_WINDOW_S // step - 1) * step)
        return float(start), float(end)

    def sync(self, now_s: float | None = None) -> list[WrittenFile]:
        """Write every range not yet written, up to `now - settle_s`; returns the files.
        A crash at any point leaves either the old watermark and a pending range (redone first
        next time, replacing its own files) or the new watermark: nothing twice, nothing skipped."""
        now_s = self._clock() if now_s is None else now_s
        server_s = self._server_now_s()
        if now_s > server_s + CLOCK_AHEAD_TOLERANCE_S:
            # A node clock ahead (NTP not yet synced, an RTC glitch) would move the watermark past
            # instants Prometheus has not scraped yet, and they would never be read.
            log.warning("%s: this node's clock is %.0f s ahead of Prometheus at %s; syncing up to "
                        "Prometheus' own time", self.source_tag, now_s - server_s, self.url)
        # never past Prometheus' own time, said or not: a settle time under the tolerance (10 s) and
        # a node 25 s ahead skipped 10 s of readings for good
        now_s = min(now_s, server_s)
        self._resolve_selector()
        state = self.state.load()
        if state.get("watermark_at") and _epoch(state["watermark_at"]) > server_s + CLOCK_AHEAD_TOLERANCE_S:
            # Waiting for it wrote nothing, and said nothing, until Prometheus' time passed it; the
            # samples between now and it were then never read.
            raise SourceError(
                f"{self.source_tag} state file {self.state.path}: watermark_at {state['watermark_at']} is "
                f"{_epoch(state['watermark_at']) - server_s:.0f} s ahead of Prometheus' time at {self.url} "
                f"({_iso(server_s)}); nothing after it would be read until then. Set it to the last instant "
                "written to the lake, or remove the file (the sync then goes on from the lake's newest range)")
        if state != self.state.saved and (resumed := resumed_state(state, self.lake, self.dataset, self.source_tag, self.step_s)):
            self.state.save(state := resumed)  # lost or older than the lake: never a range written twice
        self._say_what_retention_lost(state, now_s, server_s)
        written: list[WrittenFile] = []
        while True:
            pending = state.get("pending")
            if pending:
                start, end = _epoch(pending["start_at"]), _epoch(pending["end_at"])
                log.info("%s: redoing range %s..%s left pending by an earlier run", self.source_tag,
                         pending["start_at"], pending["end_at"])
            else:
                span = self._next_range(state, now_s)
                if span is None:
                    return written
                start, end = span
                state = {**state, "pending": {"start_at": _iso(start), "end_at": _iso(end)}}
                self.state.save(state)
            self._read_from_s = _epoch(state["watermark_at"]) if state.get("watermark_at") else None
            table = self.read_range(start, end)
            if self._ended_early(table, end) and self._another_selector_has_series():
                table = _with_rows_of(table, self.read_range(start, end))
            # Rows at or before the watermark were written by the previous range.
            if state.get("watermark_at"):
                floor = datetime.fromisoformat(state["watermark_at"])
                table = table.filter(pc.greater(table.column("sampled_at"), pa.scalar(floor, GPU_SAMPLES.field("sampled_at").type)))
            before = len(written)
            written += write_range(self.lake, table, start, end, dataset=self.dataset, tag=self.source_tag)
            self.rows_written_total += table.num_rows
            written += self.pods.merge(self.pod_holdings, self.step_s, end)
            self.files_written_total += len(written) - before
            state = {"state_version": STATE_VERSION, "watermark_at": _iso(end), "pending": None}
            self.state.save(state)
            log.info("%s: wrote %d rows for %s..%s", self.source_tag, table.num_rows, _iso(start), _iso(end))

    def _say_what_retention_lost(self, state: dict[str, Any], now_s: float, server_s: float) -> None:
        """Warn once, and count in `lost_past_retention_s_total`, the readings this sync should read that
        are older than Prometheus keeps (its time `server_s` less its retention); silent where Prometheus
        does not say its retention."""
        if state.get("watermark_at"):
            first_s = _epoch(state["watermark_at"])
        elif state.get("pending"):
            first_s = _epoch(state["pending"]["start_at"])
        elif span := self._next_range(state, now_s):
            first_s = span[0]
        else:
            return
        first_s = max(first_s, self._lost_said_until_s)
        if server_s - first_s < RETENTION_ASKED_PAST_S:
            return  # Prometheus keeps its head block's 2-3 h whatever its retention: nothing to ask each minute
        if (retention_s := self.retention_s()) is None:
            return
        kept_from_s = server_s - retention_s
        if first_s >= kept_from_s:
            return
        self._lost_said_until_s = kept_from_s
        self.lost_past_retention_s_total += kept_from_s - first_s
        log.warning("%s: the readings of %s..%s (%.1f h) are older than Prometheus at %s keeps (its retention: "
                    "%.1f h): they are lost for good and the lake will miss them; reading on (stopped longer than "
                    "the retention, or an initial lookback longer than it)", self.source_tag, _iso(first_s),
                    _iso(kept_from_s), (kept_from_s - first_s) / 3600, self.url, retention_s / 3600)

    def read(self) -> pa.Table:
        """Protocol entry for the collect loop: sync to the lake, return no rows (see class doc)."""
        self.sync()
        return DATASETS[self.dataset].empty_table()

    def close(self) -> None:
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = self._session = None


def _with_rows_of(table: pa.Table, more: pa.Table) -> pa.Table:
    """`table` and the rows of `more` (another selector's read of the same range) at a (GPU, time)
    `table` does not hold: the old series up to a relabelling, the new one after it."""
    if more.num_rows == 0:
        return table
    held = set(zip(table.column("gpu_uuid").to_pylist(), table.column("sampled_at").to_pylist()))
    keep = [(u, t) not in held for u, t in zip(more.column("gpu_uuid").to_pylist(), more.column("sampled_at").to_pylist())]
    return pa.concat_tables([table, more.filter(pa.array(keep))], promote_options="default")


__all__ = ["DcgmSource", "FIELDS", "FIELD_ALIASES", "WatermarkState", "fields_query", "pivot_range_result", "write_range"]
