"""Review of `ingest slurm`: defects found placing a sacct export's jobs on the lake's GPUs."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.dataset  # noqa: F401  (pa.dataset)

from joulehouse.collectors.ingest.slurm import ingest_slurm, read_sacct
from joulehouse.collectors.writer import write_dataset
from test_slurm import DAY, HEADER, NOW, by_job, export, gpu_uuid, write_gpu_lake


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


def lake_jobs(lake) -> dict[str, list[dict]]:
    return by_job(pa.dataset.dataset(lake / "jobs", partitioning="hive").to_table())


def test_a_daily_export_into_one_file_keeps_the_days_before(tmp_path):
    """The CLI's own example, `sacct -S <day> > jobs.txt` then `ingest slurm jobs.txt`, run each
    day: the second day's import replaced every row the file had given, and job 1 (8 GPUs, 2 h:
    16 of team vision's GPU-hours on 30 November) was gone from the lake."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"n01": 8})
    write_gpu_lake(lake, {"n01": 8}, day=DAY + timedelta(days=1))
    jobs_txt = tmp_path / "jobs.txt"
    jobs_txt.write_text(HEADER + "\n"
                        "1|a|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T03:00:00|n01|gres/gpu=8\n"
                        "3|c|cy|nlp|gpu|RUNNING|2026-11-30T20:00:00|Unknown|n01|gres/gpu=8\n")
    ingest_slurm(jobs_txt, lake=lake, now=DAY + timedelta(hours=23))
    # the next day's window: job 3 named again with its real end, job 1 not
    jobs_txt.write_text(HEADER + "\n"
                        "3|c|cy|nlp|gpu|COMPLETED|2026-11-30T20:00:00|2026-12-01T02:00:00|n01|gres/gpu=8\n"
                        "2|b|bob|nlp|gpu|COMPLETED|2026-12-01T04:00:00|2026-12-01T05:00:00|n01|gres/gpu=8\n")
    result, _ = ingest_slurm(jobs_txt, lake=lake, now=DAY + timedelta(days=1, hours=23))
    jobs = lake_jobs(lake)
    gpu_hours = {job: sum((r["ended_at"] - r["started_at"]).total_seconds() / 3600 for r in rows)
                 for job, rows in jobs.items()}
    assert gpu_hours == {"1": 16.0, "2": 8.0, "3": 48.0}  # job 3 once, to its real end: 8 GPUs x 6 h
    assert any("1 job(s) an earlier import of this file gave are not in it now" in note for note in result.notes)


def test_importing_a_file_again_never_doubles_its_jobs(tmp_path):
    """Replay: the same export imported twice, and again read in another zone, holds each job's
    GPUs once (the second reading of the zone replaces the first, it does not add to it)."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"n01": 8})
    path = export(tmp_path, "1|a|alice|vision|gpu|COMPLETED|2026-11-30T03:00:00|2026-11-30T05:00:00|n01|gres/gpu=2")
    ingest_slurm(path, lake=lake, now=NOW)
    ingest_slurm(path, lake=lake, now=NOW)
    ingest_slurm(path, lake=lake, now=NOW, assume_tz="Europe/Berlin")
    [(job, rows)] = lake_jobs(lake).items()
    assert [(r["gpu_uuid"], r["started_at"].hour) for r in rows] == [(gpu_uuid("n01", 0), 2), (gpu_uuid("n01", 1), 2)]


def test_a_running_job_ends_when_the_export_was_written_not_when_it_was_imported(tmp_path):
    """An export written at 12:00 on 30 November, job 5 running since 10:00 on 8 GPUs, imported a
    week later: its end was the import time, 8 GPUs x 170 h where the export knows of 8 x 2 h, and
    that end outlasted the real one (13:00) a later export gave, since the readers keep a holding's
    latest end."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"n01": 8})
    path = export(tmp_path, "5|a|alice|vision|gpu|RUNNING|2026-11-30T10:00:00|Unknown|n01|gres/gpu=8")
    written_at = DAY + timedelta(hours=12)
    os.utime(path, (written_at.timestamp(), written_at.timestamp()))
    result, _ = read_sacct(path, lake=lake, now=DAY + timedelta(days=7))
    assert {(r["ended_at"], r["state"]) for r in result.table.to_pylist()} == {(written_at, "RUNNING")}
    assert any(f"ended_at is the export's time ({written_at.isoformat()}" in note for note in result.notes)
    # a file copied without its times is younger than its export: still never later than the import
    os.utime(path, ((DAY + timedelta(days=9)).timestamp(),) * 2)
    result, _ = read_sacct(path, lake=lake, now=NOW)
    assert {r["ended_at"] for r in result.table.to_pylist()} == {NOW}
