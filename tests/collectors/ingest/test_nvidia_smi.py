"""Importing real nvidia-smi logs (../shared/data/telemetry) and hand-made bad ones.

Row counts were checked by hand: mddair has 5,240 lines (header + 5,239 rows at 1 Hz), the RTX
4090 log 2,620 (header + 2,619), and the 8x80GB log 44 lines: 5 full samples of 8 GPUs plus a cut
last sample of 3 GPUs (43 rows), whose `index` column is 0 on every row while `gpu` runs 0..7.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.collectors.ingest.nvidia_smi import (NvidiaSmiError, ingest_nvidia_smi, read_nvidia_smi_csv,
                                          synthetic_gpu_uuid)
from joulehouse.cli.ingest import register

UTC = timezone.utc


@pytest.fixture(scope="module")
def telemetry(shared_data):
    return shared_data / "telemetry"


def test_mddair_log_units_and_pstates(telemetry):
    res = read_nvidia_smi_csv(telemetry / "mddair_gpu_telemetry_1hz.csv", host="lab-01")
    assert (res.good_rows, res.bad_rows) == (5239, 0)
    first = res.table.slice(0, 1).to_pylist()[0]
    # line 2: "2026/06/11 15:24:31.269, 20.13 W, 33, 195 MHz, 405 MHz, 0 MiB, 0 %, P8"
    assert first["sampled_at"] == datetime(2026, 6, 11, 15, 24, 31, 269000, tzinfo=UTC)
    assert first["power_w"] == pytest.approx(20.13, abs=1e-4)
    assert (first["temp_c"], first["sm_clock_mhz"], first["mem_clock_mhz"]) == (33, 195, 405)
    assert (first["mem_used_mib"], first["util_gpu_pct"], first["pstate"]) == (0, 0, 8)
    assert first["util_mem_pct"] is None  # not in this log: NULL, not 0
    power = res.table.column("power_w").to_pylist()
    assert 15 < min(power) and max(power) < 400  # idle ~20 W, load 250-350 W (data README)
    assert any("synthetic" in n for n in res.notes)
    assert "5239 timestamps without a UTC offset read as UTC" in res.notes  # nvidia-smi's own format has none
    assert set(res.table.column("gpu_uuid").to_pylist()) == {synthetic_gpu_uuid("lab-01", 0)}


def test_rtx4090_log_takes_the_model_from_its_name_column(telemetry):
    res = read_nvidia_smi_csv(telemetry / "vlm_optimization_gpu_log_rtx4090_1hz.csv", host="lab-02",
                              gpu_model="ignored when the log names it")
    assert (res.good_rows, res.bad_rows) == (2619, 0)
    assert set(res.table.column("gpu_model").to_pylist()) == {"NVIDIA GeForce RTX 4090"}
    power = res.table.column("power_w").to_pylist()
    assert min(power) > 30 and max(power) < 340  # 33-333 W per the data README
    assert res.table.column("temp_c").null_count == res.good_rows
    assert any("--gpu-model 'ignored when the log names it' is used only where the name is empty" in n for n in res.notes)


def test_malformed_8gpu_log_rejects_rows_whose_gpu_cannot_be_told(telemetry, lake):
    path = telemetry / "gpu_glasses_nvidia_smi_8x80GB_idle.csv"
    res = ingest_nvidia_smi(path, lake=lake, host="node-07", gpu_model="NVIDIA A100-SXM4-80GB")
    # Only gpu 0 rows (gpu == index == 0) are unambiguous: one per sample time, 6 times.
    assert (res.good_rows, res.bad_rows) == (6, 37)
    assert res.reasons() == {"gpu identity": 37}
    assert all(r.line >= 3 for r in res.rejected)
    # +08:00 offset converted to UTC
    assert res.table.column("sampled_at")[0].as_py() == datetime(2025, 9, 8, 9, 26, 50, tzinfo=UTC)
    quarantined = [json.loads(x) for x in res.quarantine_path.read_text().splitlines()]
    assert len(quarantined) == 37 and quarantined[0]["line"] == 3
    assert "disagree" in quarantined[0]["reason"] and quarantined[0]["text"].startswith("2025-09-08T17:26:50")
    assert pq.read_table(res.written[0].path).num_rows == 6


def test_malformed_log_with_the_gpu_column_trusted(telemetry):
    path = telemetry / "gpu_glasses_nvidia_smi_8x80GB_idle.csv"
    trusted = read_nvidia_smi_csv(path, host="node-07", index_column="gpu")
    assert (trusted.good_rows, trusted.bad_rows) == (43, 0)
    assert sorted(set(trusted.table.column("gpu_index").to_pylist())) == list(range(8))
    assert not any("without a UTC offset" in n for n in trusted.notes), "every line has +08:00"
    assert 72 < min(trusted.table.column("power_w").to_pylist()) < max(trusted.table.column("power_w").to_pylist()) < 75
    by_index = read_nvidia_smi_csv(path, host="node-07", index_column="index")
    assert by_index.reasons() == {"duplicate": 37}  # 8 rows per time would all be GPU 0


def test_reimport_replaces_rather_than_doubles(telemetry, lake):
    path = telemetry / "vlm_optimization_gpu_log_rtx4090_1hz.csv"
    ingest_nvidia_smi(path, lake=lake, host="lab-02")
    ingest_nvidia_smi(path, lake=lake, host="lab-02")
    files = list((lake / "gpu_samples").rglob("*.parquet"))
    assert sum(pq.read_metadata(f).num_rows for f in files) == 2619


def test_a_log_imported_under_a_capitalised_fqdn_lands_under_the_lakes_name_for_the_server(telemetry, lake):
    """`--host LAB-02.example.org` put the log's GPUs under a host of that spelling, apart from
    what the node's collectors and Slurm name lab-02 (collectors.sources.host_names): its jobs
    and BMC energy met none of its GPUs."""
    path = telemetry / "vlm_optimization_gpu_log_rtx4090_1hz.csv"
    ingest_nvidia_smi(path, lake=lake, host="LAB-02.example.org")
    folders = {f.parent.name for f in (lake / "gpu_samples").rglob("*.parquet")}
    hosts = {h for f in (lake / "gpu_samples").rglob("*.parquet") for h in pq.read_table(f).column("host").to_pylist()}
    assert folders == {"host=lab-02"} and hosts == {"lab-02"}


def test_bad_values_are_rejected_with_line_and_reason(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, index, power.draw [W], pstate\n"
        "2026/01/01 00:00:00.000, 0, 100.5 W, P0\n"
        "2026/01/01 00:00:01.000, 0, 1.2 kW, P0\n"       # wrong unit
        "2026/01/01 00:00:02.000, 0, [N/A], P2\n"        # missing reading: NULL, kept
        "yesterday, 0, 90 W, P0\n"                        # bad timestamp
        "2026/01/01 00:00:03.000, 0, 90 W\n"              # short row
        "2026/01/01 00:00:00.000, 0, 101 W, P0\n"        # duplicate time for GPU 0
        "2026/01/01 00:00:04.000, 0, -3 W, P0\n"          # negative power
    )
    res = read_nvidia_smi_csv(log, host="h", assume_tz="Europe/Paris")
    assert res.good_rows == 2
    assert res.table.column("power_w").to_pylist()[1] is None
    assert res.table.column("sampled_at")[0].as_py() == datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    assert {r.line: r.reason.split(":")[0] for r in res.rejected} == {
        3: "power.draw", 5: "timestamp", 6: "field count", 7: "duplicate", 8: "power.draw"}


def test_a_log_with_uuid_but_no_index_column_is_refused_not_stored_as_gpu_0(tmp_path, lake):
    """Every GPU of such a log was stored as gpu_index 0: gpu_index is required (never NULL) in
    gpu_samples and no UUID says a GPU's index on its host, so the log is refused, in one line
    naming the file and the missing column, and nothing lands."""
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, uuid, power.draw [W]\n"
        "2026/01/05 10:00:00.000, GPU-aaaa, 300.00 W\n"
        "2026/01/05 10:00:00.000, GPU-bbbb, 280.00 W\n"
        "2026/01/05 10:00:01.000, GPU-aaaa, 301.00 W\n"
    )
    with pytest.raises(NvidiaSmiError, match=r"smi.csv: line 3: GPU GPU-bbbb after GPU GPU-aaaa, and no index column"):
        read_nvidia_smi_csv(log, host="node-01", now=datetime(2026, 1, 6, tzinfo=timezone.utc))
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "node-01"])
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert str(log) in out.output and "no index column" in out.output and "gpu_index is required" in out.output
    assert not list(lake.rglob("*.parquet")) and not list(lake.rglob("*.json*"))


def test_a_header_that_drops_the_index_keeps_each_known_gpu_at_its_index_and_refuses_an_unknown_one(tmp_path):
    """nvidia-smi restarted with fewer fields: GPU-bbbb, index 3 above, was stored as GPU 0 below the
    new header, so GPU 0 had two UUIDs. It keeps index 3; a GPU the log never indexed is refused."""
    log = tmp_path / "smi.csv"
    head = ("timestamp, index, uuid, power.draw [W]\n"
            "2026/01/05 10:00:00.000, 3, GPU-bbbb, 280.00 W\n"
            "2026/01/05 10:00:00.000, 0, GPU-aaaa, 300.00 W\n"
            "timestamp, uuid, power.draw [W]\n"
            "2026/01/05 10:00:01.000, GPU-bbbb, 281.00 W\n")
    log.write_text(head)
    res = read_nvidia_smi_csv(log, host="node-01", now=datetime(2026, 1, 6, tzinfo=timezone.utc))
    assert sorted((r["gpu_uuid"], r["gpu_index"]) for r in res.table.select(["gpu_uuid", "gpu_index"]).to_pylist()) == [
        ("GPU-aaaa", 0), ("GPU-bbbb", 3), ("GPU-bbbb", 3)]
    log.write_text(head + "2026/01/05 10:00:01.000, GPU-cccc, 250.00 W\n")
    with pytest.raises(NvidiaSmiError, match=r"line 6: GPU GPU-cccc after GPU GPU-bbbb, and no index column"):
        read_nvidia_smi_csv(log, host="node-01", now=datetime(2026, 1, 6, tzinfo=timezone.utc))


def test_a_log_with_one_uuid_and_no_index_is_that_gpu_and_its_duplicates_are_its_own(tmp_path):
    """One UUID is one GPU: GPU 0, as any log without an index column, under its real UUID."""
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, uuid, power.draw [W]\n"
        "2026/01/05 10:00:00.000, GPU-aaaa, 300.00 W\n"
        "2026/01/05 10:00:00.000, GPU-aaaa, 301.00 W\n"  # a true duplicate: same GPU, same time
        "2026/01/05 10:00:01.000, [N/A], 302.00 W\n"  # no UUID read: not a second GPU
        "2026/01/05 10:00:02.000, GPU-aaaa, 303.00 W\n"
    )
    res = read_nvidia_smi_csv(log, host="node-01", now=datetime(2026, 1, 6, tzinfo=timezone.utc))
    assert res.table.select(["gpu_index", "gpu_uuid", "power_w"]).to_pylist() == [
        {"gpu_index": 0, "gpu_uuid": "GPU-aaaa", "power_w": 300.0},
        {"gpu_index": 0, "gpu_uuid": synthetic_gpu_uuid("node-01", 0), "power_w": 302.0},
        {"gpu_index": 0, "gpu_uuid": "GPU-aaaa", "power_w": 303.0}]
    assert [(r.line, r.reason.split(" already")[0]) for r in res.rejected] == [(3, "duplicate: GPU 0 GPU-aaaa")]


def test_a_uuid_or_name_nvidia_smi_could_not_read_is_none_not_the_text_n_a(tmp_path):
    """'[N/A]' in the identity columns was stored as text: both GPUs became GPU '[N/A]' of model
    '[N/A]' (--gpu-model unheard), one stream in the warehouse, every second reading a duplicate."""
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, index, uuid, name, power.draw [W]\n"
        "2026/01/05 10:00:00.000, 0, [N/A], [N/A], 300.00 W\n"
        "2026/01/05 10:00:00.000, 1, [N/A], [Not Supported], 280.00 W\n"
    )
    res = read_nvidia_smi_csv(log, host="node-01", gpu_model="NVIDIA L4", now=datetime(2026, 1, 6, tzinfo=timezone.utc))
    rows = res.table.select(["gpu_index", "gpu_uuid", "gpu_model"]).to_pylist()
    assert [r["gpu_model"] for r in rows] == ["NVIDIA L4", "NVIDIA L4"] and not res.rejected
    assert len({r["gpu_uuid"] for r in rows}) == 2 and not any("N/A" in r["gpu_uuid"] for r in rows)


def test_unreadable_file_names_the_problem(tmp_path):
    log = tmp_path / "no_time.csv"
    log.write_text("index, power.draw [W]\n0, 10 W\n")
    with pytest.raises(NvidiaSmiError, match="timestamp"):
        read_nvidia_smi_csv(log, host="h")
    with pytest.raises(NvidiaSmiError, match="does not exist"):
        read_nvidia_smi_csv(tmp_path / "missing.csv", host="h")


def test_cli_prints_counts_and_reasons(telemetry, lake):
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(telemetry / "gpu_glasses_nvidia_smi_8x80GB_idle.csv"),
                                   "--lake", str(lake), "--host", "node-07"])
    assert out.exit_code == 0, out.output
    assert "6 rows imported, 37 rejected" in out.output
    assert "37 x gpu identity" in out.output and "--index-column" in out.output
    bad = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(lake / "nope.csv"), "--lake", str(lake), "--host", "h"])
    assert bad.exit_code == 2 and "does not exist" in bad.output


LLAMA = "energy_inference_llama2_70b_a100_4gpus_interleaved_10hz.csv"


@pytest.mark.slow  # reads a real 42,962-row log twice (about 2 s)
def test_four_interleaved_gpus_without_an_index_are_refused_not_integrated_as_one(telemetry, lake):
    """The A100 Llama-2-70B log: 42,962 rows in bursts of 4 a few ms apart every ~0.1 s, no index,
    gpu or uuid column. Imported as one GPU its power would jump between GPUs (idle ~55 W beside
    ~300 W in one sweep) and its energy be ~4x one GPU's: the importer refuses it, saying why."""
    with pytest.raises(NvidiaSmiError, match=r"bursts of 4 .* every 0\.10\d s.*cannot be told apart"):
        read_nvidia_smi_csv(telemetry / LLAMA, host="swing-a100", gpu_model="NVIDIA A100-SXM4-40GB")
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(telemetry / LLAMA), "--lake", str(lake), "--host", "swing"])
    assert out.exit_code == 2 and "cannot be told apart" in out.output
    assert not list(lake.glob("gpu_samples/**/*.parquet"))


def test_one_gpus_logs_are_not_taken_for_interleaved_ones(telemetry, tmp_path):
    """Regular 1 Hz logs, one with gaps (the RTX 4090's), and a hand-made 20 Hz one are one GPU each;
    two GPUs per sweep without an index are caught in a hand-made log too."""
    for name in ("mddair_gpu_telemetry_1hz.csv", "vlm_optimization_gpu_log_rtx4090_1hz.csv"):
        assert read_nvidia_smi_csv(telemetry / name, host="h", gpu_model="G").table.num_rows > 2000
    fast = tmp_path / "fast.csv"
    fast.write_text("timestamp, power.draw [W]\n" + "".join(
        f"2026/06/11 10:00:{i * 0.05:06.3f}, {100 + i % 7} W\n" for i in range(400)))
    assert read_nvidia_smi_csv(fast, host="h", gpu_model="G").table.num_rows == 400
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("timestamp, power.draw [W]\n" + "".join(
        f"2026/06/11 10:00:{i // 2 + 0.003 * (i % 2):06.3f}, {60 if i % 2 else 300} W\n" for i in range(100)))
    with pytest.raises(NvidiaSmiError, match="bursts of 2"):
        read_nvidia_smi_csv(pairs, host="h", gpu_model="G")
    # a sweep's rows within a millisecond share its stamp: taken for one GPU's duplicates first, 8
    # GPUs were one, stored as GPU 0 (its power jumping 60-340 W) or quarantined
    same = tmp_path / "same.csv"
    same.write_text("timestamp, power.draw [W]\n" + "".join(
        f"2026/06/11 10:{s // 60:02d}:{s % 60:02d}.{3 + (g > 5):03d}, {60 + 40 * g} W\n"
        for s in range(300) for g in range(8)))
    with pytest.raises(NvidiaSmiError, match="bursts of 8"):
        read_nvidia_smi_csv(same, host="h", gpu_model="G")


NOW = datetime(2026, 3, 2, tzinfo=timezone.utc)


def test_a_restart_whose_header_lands_on_a_cut_line_is_read_by_its_new_columns(tmp_path):
    """nvidia-smi killed mid-line, then restarted on the file with its columns in another order
    (and nounits): the new header followed the cut row on one line, was rejected with it as a bad
    field count, and the rows below were read by the old header: 41 W and 310 C."""
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, power.draw [W], temperature.gpu\n"
                   "2026/03/01 10:00:00.000, 0, 300.00, 40\n"
                   "2026/03/01 10:00:01.000, 0, 30timestamp, index, temperature.gpu, power.draw [W]\n"
                   "2026/03/01 10:05:00.000, 0, 41, 310.00\n"
                   "2026/03/01 10:05:01.000, 0, 42, 320.00\n")
    res = read_nvidia_smi_csv(log, host="h", gpu_model="G", now=NOW)
    assert [(r["power_w"], r["temp_c"]) for r in res.table.select(["power_w", "temp_c"]).to_pylist()] == [
        (300.0, 40.0), (310.0, 41.0), (320.0, 42.0)]
    [cut] = res.rejected
    assert cut.line == 3 and cut.reason.startswith("cut short: a header follows on the same line")
    # cut where a field ended: the line read as a 6-column header, every row after it refused
    log.write_text(log.read_text().replace("0, 30timestamp", "0, 300.00,timestamp"))
    res = read_nvidia_smi_csv(log, host="h", gpu_model="G", now=NOW)
    assert res.table.num_rows == 3 and [r.line for r in res.rejected] == [3]
    # a header whose timestamp is not its first column is a header, not a cut row
    other = tmp_path / "other.csv"
    other.write_text("index, timestamp, power.draw [W]\n0, 2026/03/01 10:00:00.000, 300.00 W\n")
    assert read_nvidia_smi_csv(other, host="h", gpu_model="G", now=NOW).table.num_rows == 1


def test_a_line_cut_short_is_rejected_not_read_as_a_smaller_number(tmp_path):
    """'300.00 W' cut to '3' at the end of a log being written: stored as 3 W. A value written
    without its unit in a log that writes units (or the other way round), and a last line without
    a line end, are rejected with the reason."""
    log = tmp_path / "smi.csv"
    head = ("timestamp, index, utilization.gpu [%], power.draw [W]\n"
            "2026/03/01 10:00:00.000, 0, 50 %, 300.00 W\n2026/03/01 10:00:01.000, 0, 50 %, 300.00 W\n")
    log.write_text(head + "2026/03/01 10:00:02.000, 0, 50 %, 3")
    res = read_nvidia_smi_csv(log, host="h", gpu_model="G", now=NOW)
    assert res.table.num_rows == 2 and [r.reason for r in res.rejected] == [
        "cut short: the log's last line has no line end"]
    log.write_text(head + "2026/03/01 10:00:02.000, 0, 50 %, 3\n2026/03/01 10:00:03.000, 0, 50 %, 301.00 W\n")
    res = read_nvidia_smi_csv(log, host="h", gpu_model="G", now=NOW)
    assert res.table.column("power_w").to_pylist() == [300.0, 300.0, 301.0]
    assert [r.reason for r in res.rejected] == [
        "power.draw: '3' is written without its unit, the log's other rows with (a line cut short?)"]
    nounits = tmp_path / "nounits.csv"
    nounits.write_text("timestamp, index, power.draw [W]\n2026/03/01 10:00:00.000, 0, 300.00\n"
                       "2026/03/01 10:00:01.000, 0, 301.00\n")
    assert read_nvidia_smi_csv(nounits, host="h", gpu_model="G", now=NOW).table.num_rows == 2


def test_interleaved_gpus_are_refused_with_a_uuid_column_of_na_and_in_a_short_log(tmp_path):
    """4 GPUs a sweep under a uuid column that is all [N/A] (it tells no GPU apart), and 8 GPUs x
    3 sweeps: both were stored as GPU 0, their power jumping between GPUs."""
    na = tmp_path / "na.csv"
    na.write_text("timestamp, uuid, power.draw [W]\n" + "".join(
        f"2026/03/01 10:{s // 60:02d}:{s % 60:02d}.{5 * g:03d}, [N/A], {100 * (g + 1)}.00 W\n"
        for s in range(100) for g in range(4)))
    with pytest.raises(NvidiaSmiError, match="bursts of 4"):
        read_nvidia_smi_csv(na, host="h", gpu_model="G", now=NOW)
    short = tmp_path / "short.csv"
    short.write_text("timestamp, power.draw [W]\n" + "".join(
        f"2026/03/01 10:00:{s:02d}.{3 * g:03d}, {60 + 40 * g}.00 W\n" for s in range(3) for g in range(8)))
    with pytest.raises(NvidiaSmiError, match="bursts of 8"):
        read_nvidia_smi_csv(short, host="h", gpu_model="G", now=NOW)
