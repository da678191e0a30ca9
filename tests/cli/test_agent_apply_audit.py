"""`joulehouse agent apply` never changes a GPU without an audit row saying so."""

from __future__ import annotations

import datetime as dt

import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import dump_config, load_private_key, sign_config
from nvml_stub.fixture import GpuState, nvml_stub, nvml_stub_library  # noqa: F401

from agent_cli import app, off_a_node  # noqa: F401  (fixtures)

runner = CliRunner()


@pytest.fixture()
def a100(nvml_stub):
    nvml_stub.write([GpuState.a100(0)])  # limits 100-400 W, at 400 W
    return nvml_stub


@pytest.fixture()
def signed(app, tmp_path):
    """A signed config setting the stand-in A100 to 300 W, and its public key."""
    assert runner.invoke(app, ["keys", "generate", "--out", str(tmp_path / "keys")]).exit_code == 0
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    now = dt.datetime.now(dt.timezone.utc)
    body = {"schema_version": 1, "generated_at": fmt(now - dt.timedelta(hours=1)),
            "valid_from": fmt(now - dt.timedelta(days=1)), "valid_until": fmt(now + dt.timedelta(days=1)),
            "site": "site-a", "hosts": {"node-01": {GpuState.a100(0).uuid: {
                "gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput", "power_limit_w": 300.0,
                "expected_saving_pct": 5.0, "expected_slowdown_pct": 1.0}}},
            "excluded_gpu_models": []}
    config = tmp_path / "c.json"
    config.write_bytes(dump_config(sign_config(body, load_private_key(tmp_path / "keys" / "joulehouse-ed25519.pem"))))
    return config, tmp_path / "keys" / "joulehouse-ed25519.pub.pem"


def _apply(app, signed, tmp_path, *extra):
    config, public_key = signed
    return runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(public_key), "--host", "node-01",
                               "--state", str(tmp_path / "state.json"), *extra])


def test_an_apply_with_nowhere_to_audit_is_refused_before_any_gpu_is_set(app, signed, tmp_path, a100, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _apply(app, signed, tmp_path)
    assert result.exit_code == 2, result.output
    assert a100.read()["gpu0.power_limit_mw"] == "400000", "the GPU is not touched"
    assert "never made unaudited" in result.stderr and "--lake" in result.stderr and "nothing applied" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state.json").exists(), "the config is not recorded as accepted either"
    assert not list(tmp_path.rglob("*.parquet"))


def test_an_apply_a_user_cannot_audit_on_a_node_is_refused(app, signed, tmp_path, a100, monkeypatch):
    node_data = tmp_path / "var-lib-joulehouse"
    (node_data / "lake" / "agent_audit").mkdir(parents=True)
    monkeypatch.setattr("joulehouse.cli.agent.NODE_DATA", node_data)
    monkeypatch.setattr("joulehouse.cli.agent._writable", lambda folder: False)  # a plain user; the tests run as root
    result = _apply(app, signed, tmp_path)
    assert result.exit_code == 2, result.output
    assert f"{node_data / 'lake' / 'agent_audit'} is not writable by this user" in result.stderr
    assert a100.read()["gpu0.power_limit_mw"] == "400000"


def test_a_dry_run_still_runs_without_a_lake(app, signed, tmp_path, a100, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _apply(app, signed, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would set 300.0 W" in result.output and "not audited: no --lake" in result.stderr
    assert a100.read()["gpu0.power_limit_mw"] == "400000"


def test_an_apply_with_a_lake_is_set_and_audited(app, signed, tmp_path, a100):
    result = _apply(app, signed, tmp_path, "--lake", str(tmp_path / "lake"))
    assert result.exit_code == 0, result.output
    assert a100.read()["gpu0.power_limit_mw"] == "300000"
    rows = ds.dataset(tmp_path / "lake" / "agent_audit", partitioning="hive").to_table().to_pylist()
    assert [(r["gpu_uuid"], r["action"], r["power_limit_w_after"]) for r in rows] == [(GpuState.a100(0).uuid, "apply", 300.0)]


def test_an_apply_whose_lake_cannot_take_the_audit_is_refused_before_any_gpu_is_set(app, signed, tmp_path, a100):
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "agent_audit").write_text("not a folder")  # a misplaced lake; a full or read-only one fails alike
    result = _apply(app, signed, tmp_path, "--lake", str(lake))
    assert result.exit_code == 2, result.output
    assert a100.read()["gpu0.power_limit_mw"] == "400000", "the GPU is not touched"
    assert f"cannot write the audit into {lake / 'agent_audit'}" in result.stderr and "nothing applied" in result.stderr
    assert not (tmp_path / "state.json").exists()


def _disk_full(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_an_audit_that_fails_after_the_gpus_were_set_says_what_was_set(app, signed, tmp_path, a100, monkeypatch):
    """The probe passed, then the disk filled: the limit is set and unaudited, and the user is told
    so (exit 4, the outcome table), never 'nothing applied'."""
    monkeypatch.setattr("joulehouse.collectors.writer.write_dataset", _disk_full)
    result = _apply(app, signed, tmp_path, "--lake", str(tmp_path / "lake"))
    assert a100.read()["gpu0.power_limit_mw"] == "300000"
    assert result.exit_code == 4, result.output
    assert "nothing applied" not in result.output
    assert GpuState.a100(0).uuid in result.stdout and "set 300.0 W" in result.stdout
    assert "GPUs changed as above (node-01: 1 apply), but the audit could not be written" in result.stderr
    assert "No space left on device" in result.stderr


def test_a_refused_config_whose_audit_fails_says_refused(app, signed, tmp_path, a100, monkeypatch):
    config, _ = signed
    config.write_bytes(config.read_bytes().replace(b"300.0", b"350.0"))  # tampered
    monkeypatch.setattr("joulehouse.collectors.writer.write_dataset", _disk_full)
    result = _apply(app, signed, tmp_path, "--lake", str(tmp_path / "lake"))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("refused: BadSignature") and "its audit could not be written" in result.stderr
    assert "cannot record the config" not in result.stderr
    assert a100.read()["gpu0.power_limit_mw"] == "400000"


def test_a_rollback_whose_audit_fails_says_what_it_did(app, signed, tmp_path, a100, monkeypatch):
    """The rollback's audit met a full disk: it said "rolled back" (exit 2) whatever the GPUs'
    outcome. It now prints the outcomes and says the lake does not record them (exit 4)."""
    assert _apply(app, signed, tmp_path, "--lake", str(tmp_path / "lake")).exit_code == 0
    monkeypatch.setattr("joulehouse.collectors.writer.write_dataset", _disk_full)
    result = runner.invoke(app, ["agent", "rollback", "--host", "node-01", "--lake", str(tmp_path / "lake")])
    assert a100.read()["gpu0.power_limit_mw"] == "400000"
    assert result.exit_code == 4, result.output
    assert GpuState.a100(0).uuid in result.stdout
    assert ("node-01: 1 rollback, but the audit could not be written" in result.stderr
            and "No space left on device" in result.stderr)


def test_the_agent_loop_with_nowhere_to_audit_is_refused_before_any_gpu_is_set(app, signed, tmp_path, a100):
    """`agent run` without a lake it could audit into printed "not audited" and applied all the
    same, every poll: a service that changes GPUs with no record of it."""
    config, public_key = signed
    result = runner.invoke(app, ["agent", "run", "--export-url", str(config), "--public-key", str(public_key),
                                 "--host", "node-01", "--state", str(tmp_path / "state.json"), "--iterations", "1"])
    assert result.exit_code == 2, result.output
    assert "an apply is never made unaudited: no --lake" in result.stderr
    assert a100.read()["gpu0.power_limit_mw"] == "400000"
    audited = runner.invoke(app, ["agent", "run", "--export-url", str(config), "--public-key", str(public_key),
                                  "--host", "node-01", "--state", str(tmp_path / "state.json"), "--iterations", "1",
                                  "--lake", str(tmp_path / "lake")])
    assert audited.exit_code == 0, audited.output
    assert a100.read()["gpu0.power_limit_mw"] == "300000"
    assert ds.dataset(tmp_path / "lake" / "agent_audit", format="parquet", partitioning="hive").count_rows() >= 1
