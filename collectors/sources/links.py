"""Network links through Prometheus: GPU NVLink (dcgm-exporter) and the node's InfiniBand / RoCE
ports (node_exporter's infiniband collector) -> `link_samples` rows, exactly once.

Series read, and their units:
- `DCGM_FI_PROF_NVLINK_TX_BYTES` / `DCGM_FI_PROF_NVLINK_RX_BYTES` (DCGM fields 1011/1012): the
  GPU's NVLink data rate summed over its links, bytes/s, one series per GPU with dcgm-exporter's
  labels (`gpu`, `UUID`, `modelName`, `Hostname`). Capacity is not published: NULL here, the
  warehouse takes it from the GPU model (NVLink generation x link count, models/gpu_catalogue.csv).
- `node_infiniband_port_data_transmitted_bytes_total` / `..._received_bytes_total`: counters per
  (`device`, `port`), in bytes (node_exporter already multiplies the hardware's 4-byte words),
  read as `rate(...[window])`, bytes/s. `node_infiniband_rate_bytes_per_second`: the port's
  link rate (e.g. 25e9 for HDR 200 Gb/s), the capacity per direction. RoCE ports are listed by the
  same collector (/sys/class/infiniband) and land the same way.

node_exporter's infiniband series carry no host label, and Prometheus usually scrapes it by IP
(`instance="10.0.0.5:9100"`) while dcgm-exporter names the node (`Hostname="node-01"`): keyed by
instance, a node's ports and its GPUs fell under two hosts the warehouse's per-host joins never
matched. So the query joins each port series to its node's `node_uname_info{nodename}` on
`instance` (whichever job scraped node_uname_info: the shipped config keeps it in job
node-exporter, not in job node), and the host is that `nodename` (a `Hostname`/`hostname` label
first, as for dcgm-exporter), by the rule every source names a server with (lowercase short name:
collectors.sources.host_names). A series whose instance has no node_uname_info (the uname collector
off, or dropped by a relabel rule) keeps the `instance` without its port as host, as before, and a
warning names the instance: dropping it would lose every port reading of a deployment that scrapes
by DNS name, where the instance already names the node. A link's quantity scraped under two targets
at once (two jobs over one exporter, or one node under its IP and its DNS name, now one host) is
read from one target, the other's samples set aside with their reason (dcgm_targets' rule, per
link and quantity). Everything else -- the watermark, pending ranges redone after a crash, files
named by their range, retries -- is DcgmSource's, with its own state file (`links-watermark.json`
beside the DCGM one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from joulehouse.collectors.schema import LINK_SAMPLES
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.dcgm import DcgmSource
from joulehouse.collectors.sources.dcgm_series import host_name_problem, series_key
from joulehouse.collectors.sources.dcgm_targets import one_target_per_gpu
from joulehouse.collectors.sources.dcgm_values import convert_value
from joulehouse.collectors.sources.host_names import canonical_host, host_name_regex, warn_of_merged_servers


SOURCE_TAG = "prometheus-links"
NVLINK_FIELDS = {"DCGM_FI_PROF_NVLINK_TX_BYTES": "tx_bytes_per_s", "DCGM_FI_PROF_NVLINK_RX_BYTES": "rx_bytes_per_s"}
IB_TX_TOTAL = "node_infiniband_port_data_transmitted_bytes_total"
IB_RX_TOTAL = "node_infiniband_port_data_received_bytes_total"
IB_RATE = "node_infiniband_rate_bytes_per_second"
# The label that says which quantity a series of the rate query is (rate() drops __name__).
QUANTITY_LABEL = "jh_quantity"
# Counters need two scrapes inside the window; 4x a 15-30 s scrape interval is Prometheus' advice.
DEFAULT_RATE_WINDOW_S = 120
STATE_FILE_NAME = "links-watermark.json"
NODE_NAME_SERIES = "node_uname_info"

log = logging.getLogger(__name__)


def _matchers(selector: str) -> str:
    extra = selector.strip().strip("{}").strip()
    return ", " + extra if extra else ""


def _labelled(expr: str, column: str) -> str:
    return f'label_replace({expr}, "{QUANTITY_LABEL}", "{column}", "", "")'


def _fresh(selector: str, step_s: int) -> str:
    """A gauge's value at each step only where it was scraped in the two steps before. Bare, a range
    query repeats a gauge's last sample for Prometheus' 5-minute lookback, so readings went on
    through an outage of the scrapes; last_over_time bounds that to two steps (a step can fall
    between two scrapes of a scrape interval as long as the step)."""
    return f"last_over_time({selector}[{2 * int(step_s)}s])"


def _named_by_node(expr: str, window_s: int, node_name: str = "", unnamed: str | None = None) -> str:
    """`expr` (node_exporter series, `instance` kept) with its node's `nodename` label; a series
    whose instance has no node_uname_info comes through without it. With `node_name`, only the
    series of the node so named, and of those without a name only `unnamed`'s (`expr` narrowed by
    the instance, as before the join)."""
    # Looked back as far as `expr` looks, so a port read at a step has its name there too (a bare
    # node_uname_info ends at the staleness marker of a failed scrape while a rate() goes on).
    # Over that window a reboot into a new kernel leaves two series (release differs) and a rename
    # two nodenames: one per instance, or group_left fails the whole range query.
    def names(matchers: str) -> str:
        return (f"topk by (instance) (1, max by (instance, nodename) "
                f"(last_over_time({NODE_NAME_SERIES}{matchers}[{int(window_s)}s])))")
    # a node's own collector picks its node by the name the join gives (by instance it matched
    # nothing where Prometheus scrapes node_exporter by IP), any spelling of it host_names maps to
    # its host: by nodename="node-01" it read no port where uname says node-01.cluster.example.com
    own = names("{nodename=~" + json.dumps(host_name_regex(node_name)) + "}") if node_name else names("")
    return (f"(({expr}) * on(instance) group_left(nodename) {own} "
            f"or ({unnamed or expr}) unless on(instance) {names('')})")


def links_queries(dcgm_selector: str = "", node_selector: str = "", rate_window_s: int = DEFAULT_RATE_WINDOW_S,
                  step_s: int = 30, node_name: str = "") -> str:
    """One PromQL expression for every link series: NVLink gauges, IB port rates and IB counter
    rates, the IB series with their node's `nodename` where node_uname_info gives it. `node_name`:
    only the IB series of the node so named (node_uname_info), and of nodes without a name those
    `node_selector` picks."""
    node = _matchers(node_selector).removeprefix(", ")
    picked = "" if node_name else node  # named, a node is picked by its name, the selector for the rest

    def ib(series: str) -> str:
        return series.replace("{SELECTOR}", "{" + picked + "}"), series.replace("{SELECTOR}", "{" + node + "}")

    parts = [_labelled(_fresh(field + "{" + _matchers(dcgm_selector).removeprefix(", ") + "}", step_s), column)
             for field, column in NVLINK_FIELDS.items()]
    named, unnamed = ib(_fresh(IB_RATE + "{SELECTOR}", step_s))
    parts.append(_labelled(_named_by_node(named, 2 * int(step_s), node_name, unnamed), "capacity_bytes_per_s"))
    for total, column in ((IB_TX_TOTAL, "tx_bytes_per_s"), (IB_RX_TOTAL, "rx_bytes_per_s")):
        named, unnamed = ib(f"rate({total}{{SELECTOR}}[{int(rate_window_s)}s])")
        parts.append(_labelled(_named_by_node(named, rate_window_s, node_name, unnamed), column))
    return " or ".join(parts)


def _named_host(labels: dict[str, str]) -> str | None:
    return labels.get("Hostname") or labels.get("hostname") or labels.get("nodename")


def _node_host(labels: dict[str, str]) -> str:
    """The server a node_exporter series names, as its labels spell it ('' when none)."""
    host = _named_host(labels)
    if not host:
        instance = labels.get("instance", "")
        host = instance.rsplit(":", 1)[0] if instance else ""
    return host


def _row_key(labels: dict[str, str]) -> tuple[tuple[str, str, str], dict[str, Any], str] | str:
    """((host, link_kind, device), identity columns, column) of a series, or why it cannot be keyed."""
    name = labels.get("__name__", "")
    column = labels.get(QUANTITY_LABEL)
    if name in NVLINK_FIELDS or (column in NVLINK_FIELDS.values() and (labels.get("UUID") or labels.get("uuid"))):
        # a GPU's NVLink series: by its name as dcgm-exporter gives it, or labelled by _fresh
        key = series_key(labels)
        if isinstance(key, str):
            return key
        return ((key.host, "nvlink", key.gpu_uuid), {"gpu_index": key.gpu_index, "gpu_model": key.gpu_model},
                NVLINK_FIELDS.get(name, column))
    if column is None:
        return "not a link series this source reads"
    host, device, port = canonical_host(_node_host(labels)), labels.get("device"), labels.get("port")
    if not host or not device or not port:
        return "needs device and port labels and a host (Hostname/hostname/nodename or instance)"
    if (bad_host := host_name_problem(host)) is not None:
        return bad_host
    return (host, "infiniband", f"{device}/{port}"), {"gpu_index": None, "gpu_model": None}, column


def _link_quantity(labels: dict[str, str]) -> str | None:
    """The link and quantity a series reads, None if it cannot be keyed (set aside by the pivot)."""
    keyed = _row_key(labels)
    if isinstance(keyed, str):
        return None
    (host, link_kind, device), _, column = keyed
    return f"{link_kind} {device} on {host} ({column})"


def pivot_link_result(result: Iterable[dict[str, Any]]) -> tuple[pa.Table, list[str]]:
    """A `query_range` matrix -> link_samples rows, one per (link, instant); NULL where a link has
    no value for a quantity. Returns the table and the series set aside, each with its reason."""
    rows: dict[tuple[tuple[str, str, str], float], dict[str, Any]] = {}
    identity: dict[tuple[str, str, str], dict[str, Any]] = {}
    # Two targets' values of a quantity fall on the same step-aligned instant, so rows do not double
    # as raw samples do; but the one Prometheus lists last overwrote the other's, unreported.
    result, rejected = one_target_per_gpu(list(result), _link_quantity, what="link")
    warn_of_merged_servers((_node_host(series.get("metric", {})) for series in result), SOURCE_TAG)
    hosted_by_instance: set[str] = set()
    for series in result:
        labels = series.get("metric", {})
        keyed = _row_key(labels)
        if isinstance(keyed, str):
            rejected.append(f"{labels}: {keyed}")
            continue
        key, ident, column = keyed
        identity[key] = ident
        if key[1] == "infiniband" and not _named_host(labels):
            hosted_by_instance.add(labels.get("instance", ""))
        for ts, raw in series.get("values", []):
            try:
                value = convert_value(raw, float, wide=True)
            except ValueError as exc:
                rejected.append(f"{labels} at {ts}: {exc}")
                continue
            if value is not None and value < 0:
                rejected.append(f"{labels} at {ts}: negative rate {value}")
                continue
            rows.setdefault((key, float(ts)), {})[column] = value
    if hosted_by_instance:
        log.warning("%s: no %s{nodename} for instance %s: its ports are kept under the instance without its "
                    "port, which meets its GPUs' rows (keyed by node name) only where the instance is the node's "
                    "name; keep node_exporter's uname series for that instance", SOURCE_TAG, NODE_NAME_SERIES,
                    ", ".join(sorted(hosted_by_instance)))
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    data: dict[str, list[Any]] = {
        "sampled_at": [datetime.fromtimestamp(ts, tz=timezone.utc) for (_, ts), _ in ordered],
        "host": [k[0] for (k, _), _ in ordered],
        "link_kind": [k[1] for (k, _), _ in ordered],
        "device": [k[2] for (k, _), _ in ordered],
        "gpu_index": [identity[k]["gpu_index"] for (k, _), _ in ordered],
        "gpu_model": [identity[k]["gpu_model"] for (k, _), _ in ordered],
    }
    for column in ("tx_bytes_per_s", "rx_bytes_per_s", "capacity_bytes_per_s"):
        data[column] = [values.get(column) for _, values in ordered]
    data["source"] = [SOURCE_TAG] * len(ordered)
    return pa.Table.from_pydict(data, schema=LINK_SAMPLES), rejected


class PrometheusLinkSource(DcgmSource):
    """link_samples from dcgm-exporter's NVLink fields and node_exporter's infiniband collector,
    both in one Prometheus (source tag 'prometheus-links'); `sync()` and `read()` as DcgmSource."""

    dataset = "link_samples"
    source_tag = SOURCE_TAG
    pivot = staticmethod(pivot_link_result)
    pods_as_jobs = False  # the DCGM source already turns these pods into jobs

    def __init__(self, lake: str | Path, *, node_selector: str = "", node_name: str = "",
                 rate_window_s: int = DEFAULT_RATE_WINDOW_S, **kwargs: Any):
        self._node_selector, self._node_name, self._rate_window_s = node_selector, node_name, rate_window_s
        super().__init__(lake, **kwargs)
        if rate_window_s < 2 * self.step_s:
            raise ValueError(f"rate_window_s={rate_window_s!r}: expected at least two steps ({2 * self.step_s} s)")

    def _use_selector(self, selector: str) -> None:
        super()._use_selector(selector)
        self.query = links_queries(selector, self._node_selector, self._rate_window_s, self.step_s, self._node_name)

    @classmethod
    def from_settings(cls, lake: str | Path, settings: CollectorSettings, **overrides: Any) -> PrometheusLinkSource:
        overrides.setdefault("state_path", Path(settings.dcgm_state_path).with_name(STATE_FILE_NAME))
        return super().from_settings(lake, settings, **overrides)  # type: ignore[return-value]


__all__ = ["PrometheusLinkSource", "links_queries", "pivot_link_result"]
