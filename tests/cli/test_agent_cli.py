"""`joulehouse agent apply --dry-run` and `joulehouse keys generate`, as a user runs them."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.dataset as ds
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import dump_config, load_private_key, sign_config
from joulehouse.cli.agent import register
from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401

runner = CliRunner()


@pytest.fixture()
def app():
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture()
def keys(app, tmp_path):
    result = runner.invoke(app, ["keys", "generate", "--out", str(tmp_path / "keys")])
    assert result.exit_code == 0, result.output
    return tmp_path / "keys" / "joulehouse-ed25519.pem", tmp_path / "keys" / "joulehouse-ed25519.pub.pem"


def write_config(path, private_path, *, hours=48, tamper=False, signed=True):
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    body = {"schema_version": 1, "generated_at": fmt(now), "valid_from": fmt(now - dt.timedelta(days=2)),
            "valid_until": fmt(now + dt.timedelta(hours=hours)) if hours > 0 else fmt(now - dt.timedelta(minutes=1)),
            "site": "site-a", "hosts": {"node-01": {"GPU-1": {
                "gpu_model": "NVIDIA H200", "workload_class": "background", "power_limit_w": 500.0,
                "locked_sm_clock_min_mhz": 1000, "locked_sm_clock_max_mhz": 1500,
                "expected_saving_pct": 18.0, "expected_slowdown_pct": 12.0}}},
            "excluded_gpu_models": []}
    doc = sign_config(body, load_private_key(private_path)) if signed else {"body": body}
    data = dump_config(doc)
    path.write_bytes(data.replace(b"500.0", b"700.0") if tamper else data)
    return path


@pytest.fixture()
def no_driver(nvml_stub):
    """A machine whose NVML does not start (no driver loaded), whatever NVML this process loaded before."""
    nvml_stub.write([], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})


def test_dry_run_prints_what_it_would_set_without_a_gpu(app, keys, tmp_path, lake, no_driver):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert "GPU-1" in result.output and "500.0" in result.output and "1000-1500 MHz" in result.output
    assert "not checked against the device" in result.output
    assert list((lake / "agent_audit").rglob("*.parquet"))  # the dry run is audited too


@pytest.mark.parametrize("kwargs, message", [
    (dict(tamper=True), "refused: BadSignature"),
    (dict(hours=-1), "refused: ExpiredConfig"),
    (dict(signed=False), "refused: UnsignedConfig"),
])
def test_bad_configs_exit_non_zero_with_one_line(app, keys, tmp_path, kwargs, message):
    config = write_config(tmp_path / "c.json", keys[0], **kwargs)
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 2
    assert result.output.strip().startswith(message) and len(result.output.strip().splitlines()) == 1


def test_another_host_is_refused(app, keys, tmp_path):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-07"])
    assert result.exit_code == 2 and "HostNotInConfig" in result.output


def test_dry_run_reads_a_file_url_and_a_missing_one_is_an_error(app, keys, tmp_path, no_driver):
    config = write_config(tmp_path / "c.json", keys[0])
    ok = runner.invoke(app, ["agent", "apply", config.as_uri(), "--public-key", str(keys[1]), "--dry-run", "--host", "node-01"])
    assert ok.exit_code == 0, ok.output
    missing = runner.invoke(app, ["agent", "apply", str(tmp_path / "nope.json"), "--public-key", str(keys[1]), "--dry-run"])
    assert missing.exit_code == 2 and "no config at" in missing.output


def test_keys_generate_refuses_to_overwrite(app, keys):
    again = runner.invoke(app, ["keys", "generate", "--out", str(keys[0].parent)])
    assert again.exit_code == 2 and "already exists" in again.output
    assert "--overwrite" in again.output, "the message names the flag a user can pass"


def test_verify_checks_an_expired_export_and_says_when_it_was_valid(app, keys, tmp_path):
    """An old export (the demo's, any archived one) can still be checked: its signature and form,
    what it holds, and whether an agent would take it now or at --at."""
    config = write_config(tmp_path / "c.json", keys[0], hours=-1)
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1])])
    assert result.exit_code == 1, "well signed but expired: not what `verify && deploy` should pass"
    assert "signature: valid" in result.output and "1 GPU settings on 1 hosts (node-01)" in result.output
    assert "an agent would refuse it" in result.output
    inside = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    at = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", inside])
    assert at.exit_code == 0 and "an agent would take it" in at.output
    late = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", "2099-01-01T00:00:00Z"])
    assert late.exit_code == 1 and "an agent would refuse it" in late.output
    body = json.loads(config.read_text())["body"]
    # the expiry named is the file's own end of validity, not the time checked
    assert f"expired at {body['valid_until']}, before 2099-01-01T00:00:00Z" in late.output


@pytest.mark.parametrize("kwargs, message", [
    (dict(tamper=True), "refused: BadSignature"),
    (dict(signed=False), "refused: UnsignedConfig"),
])
def test_verify_refuses_what_apply_refuses(app, keys, tmp_path, kwargs, message):
    config = write_config(tmp_path / "c.json", keys[0], **kwargs)
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1])])
    assert result.exit_code == 2 and result.output.strip().startswith(message)


def test_verify_needs_a_time_zone_in_at(app, keys, tmp_path):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", "2026-01-12"])
    assert result.exit_code == 2 and "no time zone" in result.output


def _signed_for_a100(private_path, watts, generated_at):
    """A config for the stand-in NVML's first A100 (limits 100-400 W), generated at `generated_at`."""
    from nvml_stub.fixture import GpuState

    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    now = dt.datetime.now(dt.timezone.utc)
    body = {"schema_version": 1, "generated_at": fmt(generated_at), "valid_from": fmt(now - dt.timedelta(days=2)),
            "valid_until": fmt(now + dt.timedelta(days=2)), "site": "site-a", "hosts": {"node-01": {
                GpuState.a100(0).uuid: {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                                        "power_limit_w": float(watts), "expected_saving_pct": 5.0,
                                        "expected_slowdown_pct": 1.0}}},
            "excluded_gpu_models": []}
    return dump_config(sign_config(body, load_private_key(private_path)))


def test_a_dry_run_exits_non_zero_where_the_apply_would_refuse_a_gpu(app, keys, tmp_path, nvml_stub):
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    config = tmp_path / "c.json"
    config.write_bytes(_signed_for_a100(keys[0], 5000, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)))
    lake = tmp_path / "lake"
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01", "--lake", str(lake)])
    assert result.exit_code == 1, result.output
    assert "dry run: node-01: 1 refuse" in result.output
    assert nvml_stub.read()["gpu0.power_limit_mw"] == "400000", "a dry run sets nothing"
    config.write_bytes(_signed_for_a100(keys[0], 300, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)))
    ok = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                             "--host", "node-01", "--lake", str(lake)])
    assert ok.exit_code == 0 and "dry run: node-01: 1 dry-run" in ok.output, ok.output
    reasons = sorted(r["reason"] for r in ds.dataset(lake / "agent_audit", partitioning="hive").to_table().to_pylist())
    assert reasons == ["requested 5000.0 W is outside the device's limits 100.0-400.0 W; an apply would refuse it",
                       "would set 300.0 W (NVIDIA A100-SXM4-80GB, throughput); the device is at 400.0 W"]
    assert not (tmp_path / "state").exists(), "a dry run records no config as accepted"


def test_a_replayed_config_is_refused_by_apply_and_by_its_dry_run(app, keys, tmp_path, nvml_stub):
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    now = dt.datetime.now(dt.timezone.utc)
    today, yesterday = tmp_path / "today.json", tmp_path / "yesterday.json"
    today.write_bytes(_signed_for_a100(keys[0], 300, now - dt.timedelta(hours=1)))
    yesterday.write_bytes(_signed_for_a100(keys[0], 250, now - dt.timedelta(days=1)))
    lake = tmp_path / "node" / "lake"
    applied = runner.invoke(app, ["agent", "apply", str(today), "--public-key", str(keys[1]), "--host", "node-01",
                                  "--lake", str(lake)])
    assert applied.exit_code == 0, applied.output
    assert (tmp_path / "node" / "state" / "agent-applied.json").is_file(), "the state lives beside the node's lake"
    for dry in (["--dry-run"], []):
        replay = runner.invoke(app, ["agent", "apply", str(yesterday), "--public-key", str(keys[1]),
                                     "--host", "node-01", "--lake", str(lake), *dry])
        assert replay.exit_code == 2, replay.output
        assert replay.output.startswith("refused: ReplayedConfig: ") and len(replay.output.strip().splitlines()) == 1
    assert nvml_stub.read()["gpu0.power_limit_mw"] == "300000"


def test_a_config_over_16_mib_is_refused_in_one_line(app, keys, tmp_path):
    huge = tmp_path / "c.json"
    with open(huge, "wb") as fh:
        fh.truncate(17 << 20)
    result = runner.invoke(app, ["agent", "apply", str(huge), "--public-key", str(keys[1]), "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: config at {huge} is {17 << 20} bytes, over the 16 MiB limit; refused unread"


def test_the_outcome_table_prints_uuids_and_reasons_as_written(capsys):
    """A uuid or reason from the GPU or the config file is data: '[x]' is not rich markup to drop."""
    from joulehouse.cli.agent import _print_result
    from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome

    result = ApplyResult(host="node-[01]", config_sha256=None, dry_run=True,
                         outcomes=[GpuOutcome("GPU-[bold]1", "refuse", "limit [red]9999 W[/red] above max", 400.0)])
    _print_result(result)
    out = capsys.readouterr().out
    assert "GPU-[bold]1" in out and "[red]9999 W[/red]" in out and "node-[01]" in out
