"""The demo run again in its own folder: the same lake, and a second demo on a folder in use
refused before it writes anything."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from rich.console import Console

from joulehouse.cli.dagrun import DayBeingBuilt
from joulehouse.cli.demo_run import _apply_recommendations, demo_settings, run_demo
from joulehouse.cli.run_lock import one_run_at_a_time
from joulehouse.collectors.config_contract import generate_keypair, load_private_key, sign_config
from joulehouse.collectors.sim.nvml import simulated_nvml_by_host

DAY = dt.date(2026, 6, 11)


def _export(settings, gpus: int, seed: int) -> None:
    """A signed export of DAY capping every simulated GPU 50 W below its default limit."""
    hosts = {}
    for host, nvml in simulated_nvml_by_host(gpus=gpus, seed=seed).items():
        hosts[host] = {d.uuid: {"gpu_model": d.spec.nvml_name, "workload_class": "throughput",
                                "power_limit_w": d.power_limit_mw / 1000 - 50.0, "locked_sm_clock_min_mhz": None,
                                "locked_sm_clock_max_mhz": None, "expected_saving_pct": 5.0,
                                "expected_slowdown_pct": 1.0} for d in nvml.devices}
    body = {"schema_version": 1, "generated_at": f"{DAY}T06:00:00Z", "valid_from": f"{DAY}T06:00:00Z",
            "valid_until": f"{DAY + dt.timedelta(days=7)}T06:00:00Z", "site": "site-a", "day": str(DAY),
            "hosts": hosts, "excluded_gpu_models": []}
    doc = sign_config(body, load_private_key(settings.export.private_key_path))
    out = Path(settings.export.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"recommended-config-{DAY}.json").write_text(json.dumps(doc))


def test_the_agents_apply_replayed_by_a_rerun_replaces_its_audit(tmp_path, shared_data):
    """A re-run of the demo appended the day's audit again: 32 rows, then 64, 96..."""
    settings = demo_settings(tmp_path, shared_data)
    generate_keypair(tmp_path / "keys")
    _export(settings, gpus=16, seed=7)
    quiet = Console(file=io.StringIO())
    audits = []
    for _ in range(2):
        _apply_recommendations(settings, DAY, [DAY + dt.timedelta(days=1)], gpus=16, seed=7, console=quiet)
        rows = ds.dataset(tmp_path / "lake" / "agent_audit", format="parquet", partitioning="hive").to_table()
        audits.append(sorted(zip(rows["host"].to_pylist(), rows["gpu_uuid"].to_pylist(), rows["action"].to_pylist())))
    assert len(audits[0]) == 16 and {a for _, _, a in audits[0]} == {"apply"}
    assert audits[1] == audits[0]


def test_a_second_demo_on_a_folder_in_use_writes_nothing(tmp_path, shared_data):
    """It imported the real traces into the lake and rewrote the settings before the lock refused it."""
    with one_run_at_a_time(tmp_path / "airflow", [DAY]):
        with pytest.raises(DayBeingBuilt, match="another joulehouse run"):
            run_demo(out=tmp_path, days=3, gpus=8, seed=7, start=DAY, shared_data=shared_data,
                     console=Console(file=io.StringIO()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["airflow"]


@pytest.mark.parametrize("command", ["run", "demo"])
def test_ctrl_c_says_what_it_left_in_one_line(tmp_path, monkeypatch, command):
    """Ctrl-C on `run` or `demo` exited 130 in silence, a day half rebuilt and nothing saying so."""
    from typer.testing import CliRunner

    import joulehouse.cli.dagrun as dagrun
    import joulehouse.cli.demo_run as demo_run
    from joulehouse.cli.main import app

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dagrun, "run_days", interrupted)
    monkeypatch.setattr(demo_run, "run_demo", interrupted)
    args = (["run", "--date", str(DAY), "--airflow-home", str(tmp_path / "airflow")] if command == "run"
            else ["demo", "--out", str(tmp_path / "demo")])
    (tmp_path / "lake" / "gpu_samples" / f"date={DAY}" / "host=node-01").mkdir(parents=True)  # the day has readings
    monkeypatch.setenv("JOULEHOUSE_LAKE__PATH", str(tmp_path / "lake"))
    generate_keypair(tmp_path / "keys")  # a run refuses a missing signing key before it starts
    monkeypatch.setenv("JOULEHOUSE_EXPORT__PRIVATE_KEY_PATH", str(tmp_path / "keys" / "joulehouse-ed25519.pem"))
    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 130
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: interrupted")
    assert (f"joulehouse run --date {DAY}" if command == "run" else "joulehouse demo --out") in lines[0]


def test_run_names_a_missing_lake_before_it_starts_airflow(tmp_path, monkeypatch):
    """`joulehouse run --date D` without --config made var/airflow and started Airflow, then failed
    on the lake that was not there."""
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setenv("JOULEHOUSE_LAKE__PATH", str(tmp_path / "no-lake"))
    result = CliRunner().invoke(app, ["run", "--date", str(DAY)])
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: the lake {tmp_path / 'no-lake'} ([lake] path) does not exist; give "
                                     "--config with the site's settings, or JOULEHOUSE_LAKE__PATH")
    assert list(tmp_path.iterdir()) == []


def test_a_shared_data_folder_given_must_exist(tmp_path, monkeypatch):
    """`demo --shared-data /typo` ran the whole demo on the simulation alone and exited 0."""
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "demo"), "--shared-data", str(tmp_path / "typo")])
    assert result.exit_code == 2
    assert result.output.strip().startswith(f"error: --shared-data {tmp_path / 'typo'} is not a folder")
    assert not (tmp_path / "demo").exists()
