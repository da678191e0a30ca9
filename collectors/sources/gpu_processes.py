"""The process map: which scheduler's job each GPU's compute processes belong to (`gpu_processes`).

The NVML source lists each GPU's compute processes at every read
(nvmlDeviceGetComputeRunningProcesses: pid and used GPU memory); this source takes the latest
list (`NvmlSource.take_processes`) and reads each pid's `<proc_root>/<pid>/cgroup`:
- Slurm (cgroup v1 `.../slurm/uid_1000/job_4242/step_0/task_0`, v2
  `.../slurmstepd.scope/job_4242/step_0/...`): scheduler "slurm", job_id "4242";
- Kubernetes (cgroupfs `/kubepods/burstable/pod<uid>/<container>`, systemd
  `kubepods-burstable-pod<uid with _>.slice/cri-containerd-<container>.scope`): scheduler
  "kubernetes", pod_uid with dashes, container_id the 64-hex runtime id;
- neither, or the process gone before its cgroup was read: scheduler NULL, the row kept (a
  process outside any scheduler still used the GPU).
NVML's pids are those of the host's pid namespace, so the collector reads the host's /proc
(in a container: mount it and point `proc_root` there). A cgroup file is read at most
MAX_CGROUP_BYTES: a file that large is not a cgroup listing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from joulehouse.collectors.schema import GPU_PROCESSES
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.host_names import canonical_host

MAX_CGROUP_BYTES = 64 * 1024
MIB = 1024 * 1024
_SLURM_JOB = re.compile(r"/job_(\d+)(?=/|$)")
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")


def scheduler_of(cgroup_text: str) -> dict[str, str | None]:
    """scheduler, job_id, pod_uid, container_id from the text of a /proc/<pid>/cgroup file."""
    found: dict[str, str | None] = {"scheduler": None, "job_id": None, "pod_uid": None, "container_id": None}
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1].strip()
        if job := _SLURM_JOB.search(path):
            return {**found, "scheduler": "slurm", "job_id": job.group(1)}
        if pod := _POD.search(path):
            container = _CONTAINER.search(path)
            return {**found, "scheduler": "kubernetes", "pod_uid": pod.group(1).replace("_", "-"),
                    "container_id": container.group(1) if container else None}
    return found


class GpuProcessSource:
    """gpu_processes rows from `nvml`'s last read. `proc_root` is the /proc to read cgroups
    from (a test hands in a folder of fake <pid>/cgroup files)."""

    dataset = "gpu_processes"

    def __init__(self, host: str, nvml: Any, *, proc_root: str | Path = "/proc",
                 clock: Callable[[], float] = time.time):
        self.host = canonical_host(host)  # as every source names this server (host_names)
        self._nvml = nvml
        self.proc_root = Path(proc_root)
        self._clock = clock

    def _cgroup(self, pid: int) -> str:
        try:
            with open(self.proc_root / str(int(pid)) / "cgroup", "rb") as fh:
                return fh.read(MAX_CGROUP_BYTES).decode("utf-8", errors="replace")
        except OSError:  # gone, or not ours to read: the row stays, its scheduler NULL
            return ""

    def read(self) -> pa.Table:
        processes = self._nvml.take_processes()
        if processes is None:
            raise SourceError("gpu_processes: the NVML source has not been read since the last process map")
        rows = []
        for process in processes:
            memory = process["used_gpu_memory_bytes"]
            rows.append({"sampled_at": process["sampled_at"], "host": self.host, "gpu_index": process["gpu_index"],
                         "gpu_uuid": process["gpu_uuid"], "pid": process["pid"],
                         "used_gpu_memory_mib": memory // MIB if memory is not None else None,
                         **scheduler_of(self._cgroup(process["pid"])), "source": "nvml"})
        return pa.Table.from_pylist(rows, schema=GPU_PROCESSES)

    def close(self) -> None:
        """Nothing of its own: the NVML source holds the library."""
