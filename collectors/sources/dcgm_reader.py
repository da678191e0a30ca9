"""How the DCGM source asks Prometheus (collectors/sources/dcgm.py writes what it reads to the lake).

The client (prometheus-api-client, its own retries off), the bounded retries with doubling backoff,
the choice among candidate selectors of the one that finds series, the raw samples of a range (an
instant query of `{fields}[window]` at the range's end), or an expression's values at the steps
(`query_range`), and Prometheus' own clock (`time()`).

prometheus-api-client's custom_query / custom_query_range return the answer's `data.result` alone;
the session it is given keeps the rest (`data.resultType`, `warnings`) for the range reads to judge.
A range answered as an instant vector, a scalar or a string (a selector setting that is no range,
e.g. with a `#` that comments out the `[window]`), or with warnings (a remote read or store that
failed: perhaps part of the range), is a SourceError that keeps the range pending: read as a matrix
or as whole, it moved the watermark past readings never read again.

How long Prometheus keeps samples (`retention_s`: the time part of /api/v1/status/runtimeinfo's
`storageRetention`, asked with the same session) lets DcgmSource say which readings a catch-up can
no longer find. A Prometheus that cannot say (no such endpoint before 2.15, refused, a retention by
size alone) is None: nothing is said, the sync goes on as it would.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm_pods import pod_holdings
from joulehouse.collectors.sources.dcgm_series import (
    FIELD_ALIASES, FIELDS, SOURCE_TAG, fields_query, pivot_range_result, series_key)
from joulehouse.collectors.sources.dcgm_state import iso_utc as _iso

log = logging.getLogger(__name__)

# Prometheus' duration text (model.Duration: "15d", "1d12h", "2w", "1m30s"), each unit in seconds.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_DURATION_UNITS_S = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)


def storage_retention_s(storage_retention: str) -> float | None:
    """The time part of runtimeinfo's `storageRetention` ("15d", "1d12h or 1GiB"), seconds; None for a
    retention by size alone ("1GiB": how far back that reaches depends on the data) or no duration."""
    for part in storage_retention.split(" or "):
        match = _DURATION.fullmatch(part.strip())
        if match and any(match.groups()):
            return sum(int(count) * unit_s for count, unit_s in zip(match.groups(), _DURATION_UNITS_S) if count)
    return None


class DcgmClientMissing(SourceError):
    """The Prometheus client library is not installed: said once per read, never retried."""


class DcgmAnswerNotARange(SourceError):
    """Prometheus answered a range read with an instant vector, a scalar or a string, not a matrix:
    the query is not a range (a setting it was built from), which no retry mends."""


class PartialAnswer(Exception):
    """Prometheus answered with warnings: what it returned may be part of the range only."""


class PrometheusAnswer(NamedTuple):
    """What prometheus-api-client drops of an answer: `data.resultType` and `warnings`."""

    result_type: str
    warnings: tuple[str, ...]


class DcgmReader:
    """The rows of a range of dcgm-exporter series from Prometheus at `url` (source tag 'dcgm'):
    `read_range(start, end)`; DcgmSource adds the watermark and the lake."""

    source_tag = SOURCE_TAG
    # matrix -> (rows of `dataset`, series set aside with their reasons)
    pivot = staticmethod(pivot_range_result)
    # Pod labels become jobs from this source's series only: a subclass reading other series of the
    # same pods (NVLink) would write the same jobs again.
    pods_as_jobs = True

    def __init__(
        self,
        *,
        url: str,
        step_s: float,
        selector: str,
        selector_candidates: Sequence[str],
        timeout_s: float,
        retries: int,
        backoff_s: float,
        initial_lookback_s: float,
        client: Any,
        sleep: Callable[[float], None],
    ):
        if step_s < 1 or step_s != int(step_s):
            raise ValueError(f"step_s={step_s!r}: expected a whole number of seconds >= 1 "
                             "(prometheus-api-client sends whole-second range bounds)")
        if retries < 0:
            raise ValueError(f"retries={retries!r}: expected 0 or more")
        self.url = url
        self.step_s = int(step_s)
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
        self.initial_lookback_s = initial_lookback_s
        self._sleep = sleep
        self._client = client
        self._session: Any = None  # the client's, when this reader built it: asks what the client has no call for
        self._answer: PrometheusAnswer | None = None  # of the last request, kept by _keep_answer
        self.rejected_series: list[str] = []
        self.pod_holdings: list = []

    def _prometheus(self) -> Any:
        if self._client is None:
            try:
                import requests
                from prometheus_api_client import PrometheusConnect
                from urllib3.util.retry import Retry
            except ImportError as exc:  # not a Prometheus that is down: retrying cannot help
                raise DcgmClientMissing(
                    f"{self.source_tag}: prometheus-api-client is not installed ({exc}); "
                    "install the node role: pip install 'joulehouse[node]'") from None

            session = self._session = requests.Session()
            session.hooks["response"].append(self._keep_answer)
            # The client's own retries are switched off so that the bound and the log are ours.
            self._client = PrometheusConnect(url=self.url, retry=Retry(total=0, raise_on_status=False),
                                             timeout=self.timeout_s, session=session)
        return self._client

    def _keep_answer(self, response: Any, *args: Any, **kwargs: Any) -> None:
        """requests' response hook: the answer's result type and warnings into `_answer`, None when
        the body is not Prometheus' JSON (the client then raises on its own)."""
        try:
            body = response.json()
        except ValueError:
            body = None
        else:
            # the client parses the answer again: hand it this parse (an hour's raw samples of 136
            # series at 1 s are 12 MB, 0.33 s a parse, decoded twice on every window of a catch-up)
            response.json = lambda **_: body
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            self._answer = None
            return
        self._answer = PrometheusAnswer(str(data.get("resultType")), tuple(str(w) for w in body.get("warnings") or ()))

    def _matrix(self, what: str, query: str, ask: Callable[[], Any]) -> list[dict[str, Any]]:
        """`ask()`'s matrix, retried as _with_retries. An answer with warnings counts as a failed one
        (retried, then SourceError with their text), so the range stays pending and is read again; a
        result that is not a matrix raises DcgmAnswerNotARange at once. A client given to the
        constructor keeps no answer: its result is taken as it comes."""
        def asked() -> Any:
            self._answer = None
            result = ask()
            if self._answer is not None and self._answer.result_type != "matrix":
                raise DcgmAnswerNotARange(
                    f"{self.source_tag}: Prometheus at {self.url} answered {what} with a {self._answer.result_type}, "
                    f"not the matrix a range read needs: the query is not a range ({query}); check the selector "
                    "setting it was built from (dcgm_selector). Nothing was written; the range stays pending")
            if self._answer is not None and self._answer.warnings:
                raise PartialAnswer("Prometheus answered with warnings, so perhaps with part of the range only "
                                    "(nothing written; the range stays pending): " + "; ".join(self._answer.warnings))
            return result
        return self._with_retries(what, asked)

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
        query = f"{self.query}[{int(math.ceil(end_s - low_s))}s]"
        result = self._matrix(
            f"the samples query for {_iso(low_s)}..{_iso(end_s)}", query,
            lambda: self._prometheus().custom_query(query, params={"time": end_s}, timeout=self.timeout_s))
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
            result = self._matrix(
                f"query_range for {start.isoformat()}..{end.isoformat()}", self.query,
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
            except (DcgmClientMissing, DcgmAnswerNotARange):
                raise
            except Exception as exc:  # requests' and the client's errors: all mean "not now"
                if attempt == attempts:
                    raise SourceError(
                        f"{self.source_tag}: Prometheus at {self.url} did not answer {what} after {attempts} attempts: "
                        f"{type(exc).__name__}: {exc}") from exc
                delay = self.backoff_s * 2 ** (attempt - 1)
                log.warning("%s: Prometheus at %s failed (attempt %d/%d: %s: %s); retrying in %.1f s", self.source_tag,
                            self.url, attempt, attempts, type(exc).__name__, exc, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    def retention_s(self) -> float | None:
        """How long Prometheus keeps samples, s (runtimeinfo's storageRetention), or None where it cannot
        say. One request, without retries or a warning: an old Prometheus, a proxy refusing the status
        endpoints or a client given to the constructor (no session of ours) reads as today."""
        self._prometheus()
        if self._session is None:
            return None
        try:
            response = self._session.get(f"{self.url}/api/v1/status/runtimeinfo", timeout=self.timeout_s)
            response.raise_for_status()
            text = response.json()["data"]["storageRetention"]
        except (OSError, ValueError, KeyError, TypeError) as exc:  # requests' errors are OSErrors
            log.debug("%s: Prometheus at %s does not say its retention: %s: %s", self.source_tag, self.url,
                      type(exc).__name__, exc)
            return None
        return storage_retention_s(text) if isinstance(text, str) else None

    def _server_now_s(self) -> float:
        """Prometheus' own clock (the instant query `time()`), epoch seconds. Asked with the same
        retries as the data, and a sync without it fails: a node clock running ahead would
        otherwise move the watermark past instants Prometheus has not scraped yet."""
        result = self._with_retries("time()", lambda: self._prometheus().custom_query("time()", timeout=self.timeout_s))
        try:
            return float(result[1])
        except (TypeError, ValueError, IndexError) as exc:
            raise SourceError(f"{self.source_tag}: Prometheus at {self.url} answered time() with {result!r}") from exc
