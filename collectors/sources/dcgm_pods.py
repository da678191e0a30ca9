"""Kubernetes pods as jobs, from dcgm-exporter's pod mapping (`--kubernetes`, the default in its
Helm chart): while a pod holds a GPU, that GPU's series carry `pod`, `namespace` and `container`
labels. Each (pod, GPU) becomes one row of the lake's `jobs`: job_id `<namespace>/<pod>`, team
the namespace, user NULL (Kubernetes has none to give), and the extra columns `pod`,
`namespace`, `container` and `gpu_assignment` = 'dcgm-kubernetes'.

Times: a pod holds a GPU from the first evaluation instant its labels appear to one step after
the last (it was gone by the next instant; the end is within one step of the truth). Instants
more than GAP_STEPS steps apart split the holding in two.

A pod outlives one sync range, so its row is extended range after range rather than written
again: each (start day, host) partition has one file of these rows, `part-dcgm-pods.parquet`,
rewritten atomically with the rows upserted by (job_id, gpu_uuid, started_at) and the latest
end kept. A holding that continues the row of an earlier range (its first instant within
GAP_STEPS steps of that row's end) extends it; the rows still open are remembered in a small
JSON state beside the DCGM watermark. Redoing a range after a crash upserts the same rows again,
so nothing is counted twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from joulehouse.collectors.schema import JOBS, conform
from joulehouse.collectors.writer import WrittenFile, partition_dir, write_parquet_atomic

FILE_NAME = "part-dcgm-pods.parquet"
GAP_STEPS = 2
ASSIGNMENT = "dcgm-kubernetes"
EXTRA_FIELDS = [pa.field("pod", pa.string()), pa.field("namespace", pa.string()), pa.field("container", pa.string()),
                pa.field("gpu_assignment", pa.string())]
ROW_SCHEMA = pa.schema(list(JOBS) + EXTRA_FIELDS)


@dataclass(frozen=True)
class PodHolding:
    """A pod's (container's) holding of one GPU over consecutive instants of one range."""

    host: str
    gpu_uuid: str
    namespace: str
    pod: str
    container: str | None
    first_s: float
    last_s: float

    @property
    def job_id(self) -> str:
        return f"{self.namespace}/{self.pod}"


def pod_holdings(keyed: Iterable[tuple[Any, dict[str, str], Iterable[float]]], step_s: float) -> list[PodHolding]:
    """Holdings from (series key, labels, instants) of the series of one range (keys from
    dcgm_series.series_key); series without a pod label hold nothing."""
    instants: dict[tuple, set[float]] = {}
    for key, labels, times in keyed:
        pod, namespace = labels.get("pod"), labels.get("namespace")
        if not pod or not namespace:
            continue
        ident = (key.host, key.gpu_uuid, namespace, pod, labels.get("container") or None)
        instants.setdefault(ident, set()).update(times)
    holdings = []
    for (host, uuid, namespace, pod, container), times in sorted(instants.items()):
        ordered = sorted(times)
        first = previous = ordered[0]
        for t in ordered[1:]:
            if t - previous > GAP_STEPS * step_s:
                holdings.append(PodHolding(host, uuid, namespace, pod, container, first, previous))
                first = t
            previous = t
        holdings.append(PodHolding(host, uuid, namespace, pod, container, first, previous))
    return holdings


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


class PodJobs:
    """The jobs rows of pods seen by the DCGM source, under `lake`; `state_path` remembers the
    rows still open (a JSON object: "<job_id>|<gpu_uuid>" -> {started_at, ended_at})."""

    def __init__(self, lake: str | Path, state_path: str | Path):
        self.lake = Path(lake)
        self.state_path = Path(state_path)

    def _open(self) -> dict[str, dict[str, str]]:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            return {}  # lost only the continuation: the next holding opens a row of its own

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, self.state_path)

    def merge(self, holdings: list[PodHolding], step_s: float, range_end_s: float) -> list[WrittenFile]:
        """Upsert `holdings` (of the range ending at `range_end_s`) into the pod files; returns
        the files rewritten. Open rows not seen again within GAP_STEPS steps are closed."""
        opened = self._open()
        rows: list[dict[str, Any]] = []
        for h in holdings:
            key = f"{h.job_id}|{h.gpu_uuid}"
            earlier = opened.get(key)
            started = _utc(h.first_s)
            if earlier and datetime.fromisoformat(earlier["ended_at"]) >= started - timedelta(seconds=GAP_STEPS * step_s):
                started = datetime.fromisoformat(earlier["started_at"])
            ended = _utc(h.last_s + step_s)
            rows.append({"job_id": h.job_id, "host": h.host, "gpu_uuid": h.gpu_uuid, "started_at": started,
                         "ended_at": ended, "user": None, "team": h.namespace, "pod": h.pod,
                         "namespace": h.namespace, "container": h.container, "gpu_assignment": ASSIGNMENT})
            opened[key] = {"started_at": started.isoformat(), "ended_at": ended.isoformat()}
        written = self._upsert(rows)
        horizon = _utc(range_end_s - GAP_STEPS * step_s)
        self._save({k: v for k, v in opened.items() if datetime.fromisoformat(v["ended_at"]) >= horizon})
        return written

    def _upsert(self, rows: list[dict[str, Any]]) -> list[WrittenFile]:
        by_partition: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            by_partition.setdefault((row["started_at"].date().isoformat(), row["host"]), []).append(row)
        written = []
        for (day, host), new in sorted(by_partition.items()):
            path = Path(partition_dir(self.lake, "jobs", day, host)) / FILE_NAME
            merged: dict[tuple, dict[str, Any]] = {}
            if path.exists():
                for old in pq.read_table(path).to_pylist():
                    merged[(old["job_id"], old["gpu_uuid"], old["started_at"])] = old
            for row in new:
                key = (row["job_id"], row["gpu_uuid"], row["started_at"])
                if key in merged and merged[key]["ended_at"] > row["ended_at"]:
                    row = {**row, "ended_at": merged[key]["ended_at"]}  # a range redone: keep the later end
                merged[key] = row
            table = pa.Table.from_pylist([{name: r.get(name) for name in ROW_SCHEMA.names} for r in merged.values()],
                                         schema=ROW_SCHEMA)
            written.append(write_parquet_atomic(conform("jobs", table).sort_by([("started_at", "ascending"),
                                                                                  ("job_id", "ascending")]), path))
        return written
