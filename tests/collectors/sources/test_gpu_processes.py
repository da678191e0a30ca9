"""The process map: NVML's compute processes (real nvidia-ml-py on the stand-in library) joined to
the Slurm job or Kubernetes pod of their cgroup, read from a checked-in style fake /proc."""

from __future__ import annotations

import pytest

from joulehouse.collectors.schema import GPU_PROCESSES, conform
from joulehouse.collectors.sources.base import Source, SourceError
from joulehouse.collectors.sources.gpu_processes import GpuProcessSource, scheduler_of
from joulehouse.collectors.sources.nvml import NvmlSource
from joulehouse.collectors.writer import write_dataset
from nvml_stub.fixture import GpuState

NOW_S = 1_767_225_600.0
POD_UID = "3f2a9c4e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
CONTAINER = "a" * 64
CGROUPS = {
    # cgroup v1, Slurm's task/cgroup plugin
    4242: "12:devices:/slurm/uid_1000/job_81234/step_0/task_0\n11:memory:/slurm/uid_1000/job_81234/step_0/task_0\n",
    # cgroup v2, slurmstepd's scope
    4243: "0::/system.slice/slurmstepd.scope/job_81235/step_batch/user/task_0\n",
    # Kubernetes, systemd cgroup driver (uid with underscores) and containerd
    5000: f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/"
          f"cri-containerd-{CONTAINER}.scope\n",
    # Kubernetes, cgroupfs driver
    5001: f"0::/kubepods/besteffort/pod{POD_UID}/{CONTAINER}\n",
    # a user's process outside any scheduler
    6000: "0::/user.slice/user-1000.slice/session-3.scope\n",
}


@pytest.fixture()
def proc_root(tmp_path):
    for pid, text in CGROUPS.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    return tmp_path


def test_cgroup_paths_name_the_scheduler_and_its_job():
    assert scheduler_of(CGROUPS[4242]) == {"scheduler": "slurm", "job_id": "81234", "pod_uid": None, "container_id": None}
    assert scheduler_of(CGROUPS[4243])["job_id"] == "81235"
    for pid in (5000, 5001):
        assert scheduler_of(CGROUPS[pid]) == {"scheduler": "kubernetes", "job_id": None, "pod_uid": POD_UID,
                                              "container_id": CONTAINER}
    assert scheduler_of(CGROUPS[6000])["scheduler"] is None
    assert scheduler_of("0::/slurm/job_12x/step_0\n")["scheduler"] is None  # not a job id


def test_each_gpu_process_is_mapped_to_its_job_or_pod(nvml_stub, proc_root, tmp_path):
    nvml_stub.write([GpuState.a100(0, processes={4242: 30_000, 6000: 10}),
                     GpuState.a100(1, processes={5000: 512, 7777: 1}),  # 7777 ended before its cgroup was read
                     GpuState.a100(2)])
    nvml = NvmlSource("node-01", clock=lambda: NOW_S)
    source = GpuProcessSource("node-01", nvml, proc_root=proc_root)
    assert isinstance(source, Source)
    try:
        samples = nvml.read()
        table = source.read()
    finally:
        nvml.close()
    assert table.schema == GPU_PROCESSES
    rows = {r["pid"]: r for r in table.to_pylist()}
    uuid = {r["gpu_index"]: r["gpu_uuid"] for r in samples.to_pylist()}
    assert sorted(rows) == [4242, 5000, 6000, 7777]
    assert (rows[4242]["scheduler"], rows[4242]["job_id"], rows[4242]["gpu_uuid"]) == ("slurm", "81234", uuid[0])
    assert rows[4242]["used_gpu_memory_mib"] == 30_000
    assert (rows[5000]["scheduler"], rows[5000]["pod_uid"], rows[5000]["gpu_uuid"]) == ("kubernetes", POD_UID, uuid[1])
    assert rows[6000]["scheduler"] is None and rows[7777]["scheduler"] is None
    assert {r["sampled_at"].timestamp() for r in rows.values()} == {NOW_S}
    written = write_dataset(tmp_path / "lake", "gpu_processes", conform("gpu_processes", table))
    assert [w.path.parent.name for w in written] == ["host=node-01"]
    with pytest.raises(SourceError, match="not been read"):
        source.read()  # no NVML read since: no map of stale processes


def test_memory_nvml_cannot_tell_is_null_not_zero(nvml_stub, proc_root):
    # The stub answers NVML_VALUE_NOT_AVAILABLE for a pid listed without memory; pynvml gives None.
    nvml_stub.write([GpuState.a100(0, processes={4243: None})])
    nvml = NvmlSource("node-01", clock=lambda: NOW_S)
    try:
        nvml.read()
        [row] = GpuProcessSource("node-01", nvml, proc_root=proc_root).read().to_pylist()
    finally:
        nvml.close()
    assert row["used_gpu_memory_mib"] is None and row["job_id"] == "81235"
