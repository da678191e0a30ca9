"""`ingest slurm`: sacct -P exports into the lake's jobs, on a lake that has GPU data only."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.ingest.hostlist import MAX_HOSTS, HostListError, expand_hostlist, gpus_in_tres
from joulehouse.collectors.ingest.slurm import SlurmError, ingest_slurm, read_sacct
from joulehouse.collectors.writer import write_dataset

HEADER = "JobID|JobName|User|Account|Partition|State|Start|End|NodeList|AllocTRES"
NOW = datetime(2026, 11, 30, 18, 0, tzinfo=timezone.utc)
DAY = datetime(2026, 11, 30, tzinfo=timezone.utc)


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{host}-{index}"


def write_gpu_lake(lake, gpus_by_host: dict[str, int], day: datetime = DAY) -> None:
    """One gpu_samples row per GPU (only the required columns, as another tool would write)."""
    rows = [{"sampled_at": day + timedelta(hours=1), "host": host, "gpu_index": i, "gpu_uuid": gpu_uuid(host, i),
             "power_w": 300.0, "source": "nvml"} for host, n in gpus_by_host.items() for i in range(n)]
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))


def export(tmp_path, *lines: str):
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([HEADER, *lines]) + "\n", encoding="utf-8")
    return path


def by_job(table: pa.Table) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        found.setdefault(row["job_id"], []).append(row)
    return found


def placed(tmp_path, gpus_by_host: dict[str, int], *lines: str, day: datetime = DAY, **read: object):
    """A lake of `gpus_by_host` on `day`, an export of `lines` read against it: (result, jobs by id)."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, gpus_by_host, day=day)
    result, _ = read_sacct(export(tmp_path, *lines), lake=lake, now=NOW, **read)
    return result, by_job(result.table)


@pytest.mark.parametrize("text, hosts", [
    ("node-[01-04,07]", ["node-01", "node-02", "node-03", "node-04", "node-07"]),
    ("gpu7", ["gpu7"]),
    ("a[9-11],b1", ["a9", "a10", "a11", "b1"]),
    ("n[008-010]", ["n008", "n009", "n010"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("dgx-[1,3]-ib,dgx-2-ib", ["dgx-1-ib", "dgx-3-ib", "dgx-2-ib"]),
])
def test_compressed_host_lists_expand_as_slurm_writes_them(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text", ["node-[01-04", "node-]", "node-[4-1]", "node-[a-b]", "", "n[[1]]", "a,,b",
                                  "node;rm -rf", f"n[0-{MAX_HOSTS + 5}]"])
def test_host_lists_slurm_would_not_print_are_refused(text):
    with pytest.raises(HostListError):
        expand_hostlist(text)


def test_the_gpu_count_comes_from_gres_gpu_or_its_typed_entries():
    assert gpus_in_tres("billing=8,cpu=8,gres/gpu=2,gres/gpu:a100=2,mem=64G,node=1") == 2
    assert gpus_in_tres("cpu=4,gres/gpu:h100=3,gres/gpu:a100=1,node=1") == 4
    assert gpus_in_tres("billing=1,cpu=1,mem=4G,node=1") == 0
    with pytest.raises(HostListError):
        gpus_in_tres("cpu=1,gres/gpu=two")


def test_whole_nodes_partial_nodes_running_and_skipped_jobs(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 8, "node-02": 8, "node-03": 8})
    path = export(
        tmp_path,
        "101|train-llm|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T05:00:00|node-[01-02]|billing=16,cpu=64,gres/gpu=16,node=2",
        "102|eval|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T03:00:00|node-03|cpu=4,gres/gpu=2,node=1",
        "103|eval-2|bob|nlp|gpu|FAILED|2026-11-30T02:30:00|2026-11-30T04:00:00|node-03|cpu=4,gres/gpu=3,node=1",
        "104|notebook|carol|nlp|gpu|RUNNING|2026-11-30T10:00:00|Unknown|node-03|cpu=2,gres/gpu=1,node=1",
        "105|queued|dave|nlp|gpu|PENDING|Unknown|Unknown|None assigned|billing=1,cpu=1,gres/gpu=1",
        "106|cpu-only|erin|infra|cpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-03|billing=1,cpu=1,node=1",
    )
    result, skipped = read_sacct(path, lake=lake, now=NOW)
    jobs = by_job(result.table)
    assert result.rejected == []
    assert skipped == {"never started (PENDING)": 1, "no GPU in AllocTRES": 1}
    assert sorted(r["gpu_uuid"] for r in jobs["101"]) == sorted(gpu_uuid(h, i) for h in ("node-01", "node-02") for i in range(8))
    assert {(r["team"], r["user"], r["gpu_assignment"]) for r in jobs["101"]} == {("vision", "alice", "whole-node")}
    # Jobs 102 and 103 overlap on node-03: each gets its own lowest free GPUs, as cons_tres does.
    assert [r["gpu_uuid"] for r in jobs["102"]] == [gpu_uuid("node-03", i) for i in (0, 1)]
    assert [r["gpu_uuid"] for r in jobs["103"]] == [gpu_uuid("node-03", i) for i in (2, 3, 4)]
    assert {r["gpu_assignment"] for r in jobs["102"] + jobs["103"]} == {"lowest-free-index"}
    # 104 starts after both ended: GPU 0 is free again.
    [running] = jobs["104"]
    assert running["gpu_uuid"] == gpu_uuid("node-03", 0)
    assert running["ended_at"] == NOW and running["state"] == "RUNNING"
    assert any("still running" in note for note in result.notes)
    assert jobs["101"][0]["started_at"] == datetime(2026, 11, 30, 1, tzinfo=timezone.utc)


def test_a_job_asking_more_gpus_than_its_node_has_gets_the_node_and_a_note(tmp_path):
    """gres/gpu=64 on an 8-GPU node was stored as the whole node with no word of it."""
    result, jobs = placed(
        tmp_path, {"node-01": 8, "node-02": 8},
        "8009|big|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-02|cpu=8,gres/gpu=64,node=1",
        "8010|fits|bob|nlp|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|cpu=8,gres/gpu=8,node=1")
    assert len(jobs["8009"]) == 8 and {r["gpu_assignment"] for r in jobs["8009"]} == {"whole-node"}
    [note] = [n for n in result.notes if "more GPUs than their nodes have" in n]
    assert note == ("1 job(s) asked for more GPUs than their nodes have, each given its nodes whole "
                    "(job 8009: 64 GPUs on node-02, which have 8)")


def test_a_jobs_gpus_over_its_nodes_add_up_to_what_it_was_allocated(tmp_path):
    """Split evenly and rounded up: 3 GPUs on two nodes were 4, and 12 on an 8-GPU and a 4-GPU node
    were 10 (6 + 4), with a note that the small node was asked for more than it has."""
    result, jobs = placed(
        tmp_path, {"big01": 8, "small01": 4, "n01": 8, "n02": 8},
        "201|a|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|big01,small01|gres/gpu=12",
        "202|b|bob|nlp|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|n[01-02]|gres/gpu=3")
    per_host = {job: sorted((h, sum(r["host"] == h for r in rows)) for h in {r["host"] for r in rows})
                for job, rows in jobs.items()}
    assert per_host == {"201": [("big01", 8), ("small01", 4)], "202": [("n01", 2), ("n02", 1)]}
    assert not [n for n in result.notes if "more GPUs" in n]


def test_a_requeued_jobs_runs_are_each_a_holding_and_only_a_repeated_start_is_a_duplicate(tmp_path):
    """sacct -D prints a requeued job once per run: the real run was quarantined as a duplicate
    JobID, 12 of its 14 GPU-hours lost."""
    result, jobs = placed(
        tmp_path, {"n01": 8},
        "300|t|alice|vision|gpu|REQUEUED|2026-11-30T01:00:00|2026-11-30T02:00:00|n01|gres/gpu=2",
        "300|t|alice|vision|gpu|COMPLETED|2026-11-30T03:00:00|2026-11-30T09:00:00|n01|gres/gpu=2",
        "300|t|alice|vision|gpu|COMPLETED|2026-11-30T03:00:00|2026-11-30T09:00:00|n01|gres/gpu=2")
    runs = sorted({(r["started_at"].hour, r["ended_at"].hour) for r in jobs["300"]})
    assert runs == [(1, 2), (3, 9)] and len(jobs["300"]) == 4
    assert [(r.line, r.reason.split(" starting")[0]) for r in result.rejected] == [(4, "duplicate JobID: 300")]


def test_an_end_only_the_repeated_hours_second_pass_puts_after_its_start_is_read_so(tmp_path):
    """Berlin, 25 October 2026: Start 02:30 CEST, End 02:10 CET, 40 minutes later. Both read as the
    first pass, End came before Start and the job was quarantined."""
    result, jobs = placed(tmp_path, {"n01": 8},
                          "400|t|alice|vision|gpu|COMPLETED|2026-10-25T02:30:00|2026-10-25T02:10:00|n01|gres/gpu=8",
                          day=datetime(2026, 10, 25, tzinfo=timezone.utc), assume_tz="Europe/Berlin")
    [row, *_] = jobs["400"]
    assert (row["started_at"], row["ended_at"]) == (datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc),
                                                    datetime(2026, 10, 25, 1, 10, tzinfo=timezone.utc))
    assert result.rejected == []


def test_a_rejected_job_holds_no_gpu_and_an_overlapping_export_keeps_a_jobs_gpus(tmp_path):
    """A job rejected at its second node had kept its first node's GPUs busy: the next job went to
    GPU 4. And a job across midnight in two daily exports was placed on GPU 1 by the first (another
    job held GPU 0) and on GPU 0 by the second: both copies were counted (6.5 h for 4)."""
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"n01": 8})
    first = export(
        tmp_path,
        "600|x|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T03:00:00|n01,nX|gres/gpu=8",
        "602|y|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T04:00:00|n01|gres/gpu=1",
        "700|p|ana|vision|gpu|COMPLETED|2026-11-30T08:00:00|2026-11-30T23:00:00|n01|gres/gpu=1",
        "701|q|ben|nlp|gpu|RUNNING|2026-11-30T20:00:00|Unknown|n01|gres/gpu=1",
    )
    ingest_slurm(first, lake=lake, now=NOW.replace(hour=23))
    result, _ = read_sacct(first, lake=lake, now=NOW.replace(hour=23))
    jobs = by_job(result.table)
    assert [r["gpu_uuid"] for r in jobs["602"]] == [gpu_uuid("n01", 0)] and "600" not in jobs
    assert [r["gpu_uuid"] for r in jobs["701"]] == [gpu_uuid("n01", 1)]
    second = tmp_path / "second.txt"
    second.write_text(HEADER + "\n701|q|ben|nlp|gpu|COMPLETED|2026-11-30T20:00:00|2026-12-01T04:00:00|n01|gres/gpu=1\n")
    again, _ = read_sacct(second, lake=lake, now=NOW.replace(hour=23))
    assert [r["gpu_uuid"] for r in by_job(again.table)["701"]] == [gpu_uuid("n01", 1)], "the GPU it was given"


def test_the_process_map_decides_a_partial_nodes_gpus(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-03": 8})
    seen = [{"sampled_at": DAY + timedelta(hours=2, seconds=s), "host": "node-03", "gpu_index": i,
             "gpu_uuid": gpu_uuid("node-03", i), "pid": 4000 + i, "scheduler": "slurm", "job_id": "102",
             "source": "nvml"} for i in (5, 6) for s in (0, 10)]
    write_dataset(lake, "gpu_processes", pa.Table.from_pylist(seen))
    path = export(tmp_path, "102|eval|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T03:00:00|node-03|gres/gpu=2")
    result, _ = read_sacct(path, lake=lake, now=NOW)
    assert [(r["gpu_uuid"], r["gpu_assignment"]) for r in result.table.to_pylist()] == [
        (gpu_uuid("node-03", 5), "process-map"), (gpu_uuid("node-03", 6), "process-map")]
    # An array task: its JobID is 100_2, its cgroup (and so the map) job_102, its JobIDRaw.
    array = tmp_path / "array.txt"
    array.write_text(HEADER + "|JobIDRaw\n"
                     "100_2|eval|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T03:00:00|node-03|gres/gpu=2|102\n")
    rows = read_sacct(array, lake=lake, now=NOW)[0].table.to_pylist()
    assert [(r["job_id"], r["gpu_uuid"], r["gpu_assignment"]) for r in rows] == [
        ("100_2", gpu_uuid("node-03", 5), "process-map"), ("100_2", gpu_uuid("node-03", 6), "process-map")]
    # Three allocated, a process seen on two: the third is held too (the map had halved such a job)
    three = tmp_path / "three.txt"
    three.write_text(HEADER + "\n102|eval|bob|nlp|gpu|COMPLETED|2026-11-30T02:00:00|2026-11-30T03:00:00|node-03|gres/gpu=3\n")
    rows = read_sacct(three, lake=lake, now=NOW)[0].table.to_pylist()
    assert [(r["gpu_uuid"], r["gpu_assignment"]) for r in rows] == [
        (gpu_uuid("node-03", 5), "process-map"), (gpu_uuid("node-03", 6), "process-map"),
        (gpu_uuid("node-03", 0), "lowest-free-index")]


def test_times_without_a_zone_are_read_in_the_zone_given(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 1})
    path = export(tmp_path, "7|x|u|a|p|COMPLETED|2026-11-30T09:00:00|2026-11-30T10:30:00|node-01|gres/gpu=1")
    result, _ = read_sacct(path, lake=lake, assume_tz="Europe/Berlin", now=NOW)
    [row] = result.table.to_pylist()
    assert (row["started_at"], row["ended_at"]) == (DAY + timedelta(hours=8), DAY + timedelta(hours=9, minutes=30))
    with pytest.raises(SlurmError, match="Mars/Olympus"):
        read_sacct(path, lake=lake, assume_tz="Mars/Olympus", now=NOW)


def test_bad_lines_are_quarantined_with_their_reason_and_the_rest_imported(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 4})
    path = export(
        tmp_path,
        "1|ok|u|a|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|gres/gpu=4",
        "2|bad-time|u|a|p|COMPLETED|yesterday|2026-11-30T02:00:00|node-01|gres/gpu=4",
        "3|backwards|u|a|p|COMPLETED|2026-11-30T03:00:00|2026-11-30T02:00:00|node-01|gres/gpu=4",
        "4|short|u|a|p",
        "5|nowhere|u|a|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-09|gres/gpu=1",
        "1|again|u|a|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|gres/gpu=4",
        "6|a|b|c|u|a|p|COMPLETED|2026-11-30T04:00:00|2026-11-30T05:00:00|node-01|gres/gpu=1",
        "7|future|u|a|p|COMPLETED|2027-06-01T01:00:00|2027-06-01T02:00:00|node-01|gres/gpu=1",
        "8.batch|step|u|a|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|gres/gpu=1",
        # ended as it started (an instant OUT_OF_MEMORY): no GPU time, counted, not a bad line
        "9|oom|u|a|p|OUT_OF_MEMORY|2026-11-30T01:00:00|2026-11-30T01:00:00|node-01|gres/gpu=1",
    )
    result, skipped = ingest_slurm(path, lake=lake, now=NOW)
    reasons = {r.line: r.reason for r in result.rejected}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 9, 10]
    assert skipped == {"ended as it started (no GPU time)": 1}
    assert "Start" in reasons[3] and "is before Start" in reasons[4] and "field count" in reasons[5]
    assert "node-09" in reasons[6] and "no GPUs" in reasons[6] and "first at line 2" in reasons[7]
    assert "day after" in reasons[9] and "-X" in reasons[10]
    jobs = by_job(result.table)
    assert sorted(jobs) == ["1", "6"]
    assert jobs["6"][0]["job_name"] == "a|b|c"  # a '|' in JobName is put back together
    quarantined = [json.loads(line) for line in result.quarantine_path.read_text().splitlines()]
    assert [q["line"] for q in quarantined] == sorted(reasons)
    assert all(q["reason"] for q in quarantined)


def test_a_file_that_is_not_a_sacct_export_fails_whole(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("JobID,User\n1,alice\n")
    with pytest.raises(SlurmError, match="header lacks"):
        read_sacct(path, lake=tmp_path / "lake", now=NOW)
    path.write_text("")
    with pytest.raises(SlurmError, match="is empty"):
        read_sacct(path, lake=tmp_path / "lake", now=NOW)


def test_a_spreadsheets_byte_order_mark_and_crlf_lines_read_as_sacct_wrote_them(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 2})
    path = tmp_path / "sacct.txt"
    path.write_bytes(("\ufeff" + HEADER + "\r\n" + "1|a|u|t|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|"
                      "node-01|gres/gpu=2\r\n").encode())
    result, _ = read_sacct(path, lake=lake, now=NOW)
    assert result.rejected == [] and result.table.num_rows == 2


def test_importing_the_grown_export_again_replaces_its_rows(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 2, "node-02": 2})
    running = "9|job|u|team-a|p|RUNNING|2026-11-30T01:00:00|Unknown|node-[01-02]|gres/gpu=4"
    path = export(tmp_path, running)
    ingest_slurm(path, lake=lake, now=NOW)
    export(tmp_path, running.replace("RUNNING", "COMPLETED").replace("Unknown", "2026-11-30T06:00:00"))
    result, _ = ingest_slurm(path, lake=lake, now=NOW)
    files = sorted((lake / "jobs").rglob("*.parquet"))
    assert [f.parent.name for f in files] == ["host=node-01", "host=node-02"]
    rows = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    assert len(rows) == 4 and {r["state"] for r in rows} == {"COMPLETED"}
    assert {r["ended_at"] for r in rows} == {DAY + timedelta(hours=6)}


def test_cli_imports_and_says_how_gpus_were_placed(tmp_path):
    lake = tmp_path / "lake"
    write_gpu_lake(lake, {"node-01": 8}, day=datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0))
    today = datetime.now(timezone.utc).date().isoformat()
    path = export(tmp_path, f"1|a|u|t|p|COMPLETED|{today}T00:00:01|{today}T00:00:05|node-01|gres/gpu=8",
                  f"2|a|u|t|p|COMPLETED|{today}T00:00:01|{today}T00:00:05|node-01|gres/gpu=1",
                  "3|broken")
    out = CliRunner().invoke(app, ["ingest", "slurm", str(path), "--lake", str(lake)])
    assert out.exit_code == 0, out.output
    assert "2 jobs imported as 9 job-GPU rows, 1 lines rejected" in out.output
    assert "8 GPUs placed by whole-node" in out.output and "1 GPUs placed by lowest-free-index" in out.output
    missing = CliRunner().invoke(app, ["ingest", "slurm", str(tmp_path / "none.txt"), "--lake", str(lake)])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_header_naming_a_field_twice_is_refused(tmp_path):
    """A row's dict kept the last copy: End named twice (02:00, then 23:00) gave the job 22 GPU-hours
    for 1, with nothing said (review, helper-87)."""
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}|End\n8|h|u|t|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|gres/gpu=1|"
                    "2026-11-30T23:00:00\n", encoding="utf-8")
    with pytest.raises(SlurmError, match=r"the header names \['End'\] twice"):
        read_sacct(path, lake=tmp_path / "lake", now=NOW)


def test_an_end_beyond_any_date_rejects_its_row_not_the_export(tmp_path):
    """9999-12-31T23:00 in New York is in year 10000 in UTC: an OverflowError ended the import."""
    result, jobs = placed(tmp_path, {"node-01": 1},
                          "7|a|u|t|p|COMPLETED|2026-11-30T01:00:00|9999-12-31T23:00:00|node-01|gres/gpu=1",
                          "8|b|u|t|p|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|node-01|gres/gpu=1",
                          assume_tz="America/New_York")
    assert list(jobs) == ["8"] and [r.line for r in result.rejected] == [2]
    assert result.rejected[0].reason.startswith("End: ")


def test_nodes_slurm_names_with_capitals_or_a_domain_are_the_lakes_servers(tmp_path):
    """Slurm names a node as its slurm.conf does (NodeName=GPU-NODE-01, or an FQDN); the lake names
    the server by its lowercase short name (collectors.sources.host_names). Taken as written, the
    job's node had 'no GPUs in the lake' and the job was rejected: its team's energy unallocated."""
    result, jobs = placed(tmp_path, {"gpu-node-01": 2, "gpu-node-02": 2},
                          "201|train|alice|vision|gpu|COMPLETED|2026-11-30T01:00:00|2026-11-30T02:00:00|"
                          "GPU-NODE-01,gpu-node-02.cluster.example.com|cpu=8,gres/gpu=4,node=2")
    assert result.rejected == []
    assert sorted(r["gpu_uuid"] for r in jobs["201"]) == sorted(gpu_uuid(h, i) for h in ("gpu-node-01", "gpu-node-02")
                                                                for i in range(2))
    assert {r["host"] for r in jobs["201"]} == {"gpu-node-01", "gpu-node-02"}
