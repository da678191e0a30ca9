"""DCGM readings through Prometheus: dcgm-exporter series -> `gpu_samples` rows, exactly once.

dcgm-exporter publishes one series per (field, GPU) with the labels `gpu` (index), `UUID`,
`modelName` and `Hostname` (`hostname` in some deployments); Prometheus stores them. This
source asks Prometheus for the raw samples of a time range (one instant query of
`{fields}[window]` at the window's end), converts the string values, and pivots to one row per
(GPU, scrape timestamp). A field a GPU does not publish is NULL in its rows, never 0.

Raw samples, not `query_range`: a range query repeats a series' last sample at every step for
up to its 5-minute lookback, so after Prometheus was down it handed over old readings as new
ones, at instants no scrape took place. Raw samples keep the scrapes' gaps and own timestamps.

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
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from joulehouse.collectors.schema import DATASETS, GPU_SAMPLES, SORT_KEYS, conform
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm_pods import PodJobs, pod_holdings
from joulehouse.collectors.sources.dcgm_resume import range_file_name, resumed_state
from joulehouse.collectors.sources.dcgm_state import STATE_VERSION, WatermarkState, epoch_s as _epoch, iso_utc as _iso
from joulehouse.collectors.sources.dcgm_series import (  # noqa: F401  (importable from here)
    COLUMNS, FIELD_ALIASES, FIELDS, SOURCE_TAG, WIDE_COLUMNS, SeriesKey, fields_query, pivot_range_result,
    series_key)
from joulehouse.collectors.writer import WrittenFile, partition_dir, write_parquet_atomic

log = logging.getLogger(__name__)

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


class DcgmClientMissing(SourceError):
    """The Prometheus client library is not installed: said once per read, never retried."""


class DcgmSource:
    """gpu_samples from dcgm-exporter series stored in Prometheus (source tag 'dcgm').

    `read_range(start, end)` returns the rows of a closed range; `sync()` writes every range
    from the watermark up to `now - settle_s` into the lake exactly once and returns the files.
    `read()` (the collect loop's Protocol) runs `sync()` and returns no rows, because this
    source writes its own ranges: Prometheus already holds the samples durably."""

    dataset = "gpu_samples"
    source_tag = SOURCE_TAG
    # matrix -> (rows of `dataset`, series set aside with their reasons)
    pivot = staticmethod(pivot_range_result)
    # Pod labels become jobs from this source's series only: a subclass reading other series of the
    # same pods (NVLink) would write the same jobs again.
    pods_as_jobs = True

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
        if step_s < 1 or step_s != int(step_s):
            raise ValueError(f"step_s={step_s!r}: expected a whole number of seconds >= 1 "
                             "(prometheus-api-client sends whole-second range bounds)")
        if retries < 0:
            raise ValueError(f"retries={retries!r}: expected 0 or more")
        self.lake = Path(lake)
        self.url = url
        self.step_s = int(step_s)
        self.state = WatermarkState(state_path)
        # Raw samples exist for a plain selector only: a subclass that sets `query` to an expression
        # (links.py: rate(), label_replace) has none and is evaluated at the steps with query_range.
        # `selector_candidates`: matchers tried in turn until one finds series (the node default:
        # dcgm-exporter names the host `Hostname`, `hostname` or only `instance`, by deployment);
        # `selector` stands until then
        self._selector_candidates = tuple(selector_candidates)
        self._every_candidate = self._selector_candidates
        self._read_from_s: float | None = None  # the watermark of the range being read (raw samples)
        self._chosen: str | None = None
        self._use_selector(selector or next(iter(self._selector_candidates), ""))
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.settle_s = settle_s
        self.initial_lookback_s = initial_lookback_s
        self._clock = clock
        self._sleep = sleep
        self._client = client
        self.rejected_series: list[str] = []
        # Pods on GPUs (dcgm-exporter's Kubernetes labels) become jobs (collectors/sources/dcgm_pods.py).
        self.pods = PodJobs(self.lake, self.state.path.with_name(f"{self.state.path.stem}-pods.json"))
        self.pod_holdings: list = []
        # Rows this source wrote to the lake itself (read() hands the loop none): for the metrics.
        self.rows_written_total = 0
        self.files_written_total = 0  # with rows_written_total: what this source wrote itself, for the collector's totals

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

    def _prometheus(self) -> Any:
        if self._client is None:
            try:
                from prometheus_api_client import PrometheusConnect
                from urllib3.util.retry import Retry
            except ImportError as exc:  # not a Prometheus that is down: retrying cannot help
                raise DcgmClientMissing(
                    f"{self.source_tag}: prometheus-api-client is not installed ({exc}); "
                    "install the node role: pip install 'joulehouse[node]'") from None

            # The client's own retries are switched off so that the bound and the log are ours.
            self._client = PrometheusConnect(url=self.url, retry=Retry(total=0, raise_on_status=False),
                                             timeout=self.timeout_s)
        return self._client

    def _use_selector(self, selector: str) -> None:
        """Read the series `selector` matches (a subclass whose query is an expression rebuilds it)."""
        self.selector_query = fields_query(selector)
        self.query = self.selector_query

    def _resolve_selector(self, quiet: bool = False) -> None:
        """Take the first candidate selector that finds series in the lookback (once found, for
        good). Selecting `Hostname` alone, a deployment labelling `hostname` read nothing, while
        the watermark moved past its samples."""
        for candidate in self._selector_candidates:
            # one count per field (a range function over several names drops __name__, and their
            # series then clash), the first found
            matchers = candidate.strip().strip("{}")
            probe = " or ".join(f"count(count_over_time({field}{{{matchers}}}[{int(self.initial_lookback_s)}s]))"
                                for field in (*FIELDS, *FIELD_ALIASES))
            if self._with_retries(f"the series of {candidate}",
                                  lambda: self._prometheus().custom_query(probe, timeout=self.timeout_s)):
                self._use_selector(candidate)
                self._chosen = candidate
                self._selector_candidates = ()
                log.info("%s: reading the series labelled %s", self.source_tag, candidate)
                return
        if self._selector_candidates and not quiet:
            log.warning("%s: no series at %s labelled %s: nothing to read for this host yet", self.source_tag,
                        self.url, " or ".join(self._selector_candidates))

    def _another_selector_has_series(self) -> bool:
        """After a range the chosen selector found empty: whether another candidate finds series
        now (then it is used). An exporter redeployed with `Hostname` where it said `hostname` was
        read as empty for good, the watermark moving past every sample (review, helper-92)."""
        if self._chosen is None or len(self._every_candidate) < 2:
            return False
        chosen = self._chosen
        self._selector_candidates = tuple(c for c in self._every_candidate if c != chosen)
        self._resolve_selector(quiet=True)  # an exporter down says so at every sync otherwise
        if self._chosen == chosen:  # none found: keep reading what was chosen
            self._selector_candidates = ()
            return False
        log.warning("%s: the series labelled %s came empty; now reading %s", self.source_tag, chosen, self._chosen)
        return True

    def _ended_early(self, table: pa.Table, end_s: float) -> bool:
        """Whether the range's rows stop more than two steps before its end (or there are none):
        the series read may have stopped under a relabelled exporter."""
        if table.num_rows == 0:
            return True
        last = pc.max(table.column("sampled_at")).as_py()
        return last is not None and last.timestamp() < end_s - 2 * self.step_s

    @property
    def reads_raw_samples(self) -> bool:
        return self.query == self.selector_query

    def _raw_samples(self, start_s: float, end_s: float) -> list[dict[str, Any]]:
        """The samples scraped in (start_s - step, end_s], at their own timestamps: a matrix like
        query_range's. The window opens one step before `start_s`, where the range before ended."""
        low_s = start_s - self.step_s
        if self._read_from_s is not None:
            # from the watermark itself: after a change of step_s (30 -> 60 s, watermark at 570 s),
            # start - step was 600 s and the samples of (570, 600] were never read
            low_s = min(low_s, self._read_from_s)
        window_s = int(math.ceil(end_s - low_s))
        result = self._with_retries(
            f"the samples query for {_iso(low_s)}..{_iso(end_s)}",
            lambda: self._prometheus().custom_query(f"{self.query}[{window_s}s]", params={"time": end_s},
                                                    timeout=self.timeout_s))
        # Prometheus 2.x range selectors include their left end (3.x do not): a sample at low_s was
        # the range before's last.
        return [{**series, "values": [v for v in series.get("values", []) if float(v[0]) > low_s]}
                for series in result]

    def read_range(self, start_s: float, end_s: float) -> pa.Table:
        """Rows for [start_s, end_s] (epoch seconds, UTC): the samples scraped after the step
        before start_s up to end_s, at their scrape timestamps (an expression `query`: its values at
        the step-aligned instants). Retries a failing Prometheus `retries` times with doubling
        backoff, then raises SourceError naming the URL, the range and the last error."""
        start = datetime.fromtimestamp(start_s, tz=timezone.utc)
        end = datetime.fromtimestamp(end_s, tz=timezone.utc)
        if self.reads_raw_samples:
            result = self._raw_samples(start_s, end_s)
        else:
            result = self._with_retries(
                f"query_range for {start.isoformat()}..{end.isoformat()}",
                lambda: self._prometheus().custom_query_range(
                    self.query, start_time=start, end_time=end, step=str(self.step_s), timeout=self.timeout_s))
        table, rejected = self.pivot(result)
        keyed = ((series_key(s.get("metric", {})), s.get("metric", {}), [float(t) for t, _ in s.get("values", [])])
                 for s in result)
        self.pod_holdings = pod_holdings(((k, labels, ts) for k, labels, ts in keyed if not isinstance(k, str)),
                                         self.step_s) if self.pods_as_jobs else []
        if rejected:
            log.warning("%s: %d series set aside for %s..%s, first: %s",
                        self.source_tag, len(rejected), start.isoformat(), end.isoformat(), rejected[0])
        self.rejected_series = rejected
        return table

    def _with_retries(self, what: str, query: Callable[[], Any]) -> Any:
        """`query()`, retried `retries` times with doubling backoff; then SourceError naming the
        URL, `what` was asked and the last error."""
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return query()
            except DcgmClientMissing:
                raise
            except Exception as exc:  # requests' and the client's errors: all mean "not now"
                if attempt == attempts:
                    raise SourceError(
                        f"dcgm: Prometheus at {self.url} did not answer {what} after {attempts} attempts: "
                        f"{type(exc).__name__}: {exc}") from exc
                delay = self.backoff_s * 2 ** (attempt - 1)
                log.warning("dcgm: Prometheus at %s failed (attempt %d/%d: %s: %s); retrying in %.1f s",
                            self.url, attempt, attempts, type(exc).__name__, exc, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    def _server_now_s(self) -> float:
        """Prometheus' own clock (the instant query `time()`), epoch seconds. Asked with the same
        retries as the data, and a sync without it fails: a node clock running ahead would
        otherwise move the watermark past instants Prometheus has not scraped yet."""
        result = self._with_retries("time()", lambda: self._prometheus().custom_query("time()", timeout=self.timeout_s))
        try:
            return float(result[1])
        except (TypeError, ValueError, IndexError) as exc:
            raise SourceError(f"dcgm: Prometheus at {self.url} answered time() with {result!r}") from exc

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
            log.warning("dcgm: this node's clock is %.0f s ahead of Prometheus at %s; syncing up to "
                        "Prometheus' own time", now_s - server_s, self.url)
        # never past Prometheus' own time, said or not: a settle time under the tolerance (10 s) and
        # a node 25 s ahead skipped 10 s of readings for good
        now_s = min(now_s, server_s)
        self._resolve_selector()
        state = self.state.load()
        if state.get("watermark_at") and _epoch(state["watermark_at"]) > server_s + CLOCK_AHEAD_TOLERANCE_S:
            # Waiting for it wrote nothing, and said nothing, until Prometheus' time passed it; the
            # samples between now and it were then never read.
            raise SourceError(
                f"dcgm state file {self.state.path}: watermark_at {state['watermark_at']} is "
                f"{_epoch(state['watermark_at']) - server_s:.0f} s ahead of Prometheus' time at {self.url} "
                f"({_iso(server_s)}); nothing after it would be read until then. Set it to the last instant "
                "written to the lake, or remove the file (the sync then goes on from the lake's newest range)")
        if state != self.state.saved and (resumed := resumed_state(state, self.lake, self.dataset, self.source_tag, self.step_s)):
            self.state.save(state := resumed)  # lost or older than the lake: never a range written twice
        written: list[WrittenFile] = []
        while True:
            pending = state.get("pending")
            if pending:
                start, end = _epoch(pending["start_at"]), _epoch(pending["end_at"])
                log.info("dcgm: redoing range %s..%s left pending by an earlier run",
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
            log.info("dcgm: wrote %d rows for %s..%s", table.num_rows, _iso(start), _iso(end))

    def read(self) -> pa.Table:
        """Protocol entry for the collect loop: sync to the lake, return no rows (see class doc)."""
        self.sync()
        return DATASETS[self.dataset].empty_table()

    def close(self) -> None:
        if self._client is not None and hasattr(self._client, "close"):
            self._client.close()
        self._client = None


def _with_rows_of(table: pa.Table, more: pa.Table) -> pa.Table:
    """`table` and the rows of `more` (another selector's read of the same range) at a (GPU, time)
    `table` does not hold: the old series up to a relabelling, the new one after it."""
    if more.num_rows == 0:
        return table
    held = set(zip(table.column("gpu_uuid").to_pylist(), table.column("sampled_at").to_pylist()))
    keep = [(u, t) not in held for u, t in zip(more.column("gpu_uuid").to_pylist(), more.column("sampled_at").to_pylist())]
    return pa.concat_tables([table, more.filter(pa.array(keep))], promote_options="default")


__all__ = ["DcgmSource", "FIELDS", "FIELD_ALIASES", "WatermarkState", "fields_query", "pivot_range_result", "write_range"]
