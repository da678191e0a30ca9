"""Review of `ingest slurm`: defects found placing a sacct export's jobs on the lake's GPUs."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa

from joulehouse.collectors.ingest.slurm import read_sacct
from joulehouse.collectors.writer import write_dataset
from test_slurm import DAY, NOW, by_job, export, gpu_uuid, write_gpu_lake


def seen_by_process_map(lake, host: str, job_id: str, index: int, at) -> None:
    rows = [{"sampled_at": at + timedelta(seconds=s), "host": host, "gpu_index": index,
             "gpu_uuid": gpu_uuid(host, index), "pid": 4000, "scheduler": "slurm", "job_id": job_id,
             "source": "nvml"} for s in (0, 10)]
    write_dataset(lake, "gpu_processes", pa.Table.from_pylist(rows))


def test_a_job_without_a_process_map_is_not_put_on_the_gpu_the_map_shows_a_later_job_on(tmp_path):
    """900 (01:00-03:00, no process seen) was given GPU 0, the lowest free at its start; 901
    (02:00-04:00) was seen by the map on GPU 0. Both sat on GPU 0 from 02:00 to 03:00, each
    charged half of it, while the GPU 900 really held was counted idle. Slurm gives one GPU to
    one job: 900 held the lowest GPU nobody else was on, GPU 1."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"n01": 4})
    seen_by_process_map(lake, "n01", "901", 0, DAY + timedelta(hours=2, minutes=30))
    path = export(tmp_path,
                  "900|a|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T03:00:00|n01|gres/gpu=1",
                  "901|b|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T04:00:00|n01|gres/gpu=1",
                  # after 901 ended, GPU 0 is free again
                  "902|c|cy|nlp|gpu|COMPLETED|2026-11-30T04:00:00|2026-11-30T05:00:00|n01|gres/gpu=1")
    result, _ = read_sacct(path, lake=lake, now=NOW)
    jobs = by_job(result.table)
    assert [(r["gpu_uuid"], r["gpu_assignment"]) for r in jobs["900"]] == [(gpu_uuid("n01", 1), "lowest-free-index")]
    assert [(r["gpu_uuid"], r["gpu_assignment"]) for r in jobs["901"]] == [(gpu_uuid("n01", 0), "process-map")]
    assert [r["gpu_uuid"] for r in jobs["902"]] == [gpu_uuid("n01", 0)]
