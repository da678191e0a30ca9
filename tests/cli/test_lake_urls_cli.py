"""The commands' --lake: an object-store URL reaches the store (simulate, ingest), or is refused
in one line where only a node's local folder will do (collect, ship). Typer's Path used to turn
s3://bucket/lake into the local folder s3:/bucket/lake without a word."""

from __future__ import annotations

import os

import pytest
from s3_server import local_s3
from typer.testing import CliRunner

from joulehouse.cli.main import app


@pytest.mark.integration
@pytest.mark.slow
def test_simulate_and_ingest_write_to_the_object_store_not_a_local_folder(tmp_path, shared_data, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with local_s3("fleet"):
        import s3fs

        result = CliRunner().invoke(app, ["simulate", "--lake", "s3://fleet/lake", "--gpus", "1", "--days", "1",
                                          "--start", "2026-06-10", "--interval-s", "60"])
        assert result.exit_code == 0, result.output
        log = shared_data / "telemetry" / "gpu_glasses_nvidia_smi_8x80GB_idle.csv"
        result = CliRunner().invoke(app, ["ingest", "nvidia-smi", str(log), "--lake", "s3://fleet/lake",
                                          "--host", "glasses", "--gpu-model", "NVIDIA A100-SXM4-80GB"])
        assert result.exit_code == 0, result.output
        fs = s3fs.S3FileSystem()
        files = fs.glob("fleet/lake/gpu_samples/*/*/*.parquet")
        assert any("host=glasses" in f for f in files) and any("host=" in f and "glasses" not in f for f in files)
    assert not os.path.exists(tmp_path / "s3:"), "nothing written to a local folder named after the URL"


@pytest.mark.parametrize("command", [["collect", "--source", "sim", "--max-polls", "1"],
                                     ["ship", "--to", "/tmp/central"]])
def test_a_nodes_own_lake_must_be_a_local_folder(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*command, "--lake", "s3://fleet/lake"])
    assert result.exit_code == 2
    assert "--lake s3://fleet/lake: a node's lake is a local folder" in result.output
    assert not os.path.exists(tmp_path / "s3:")
