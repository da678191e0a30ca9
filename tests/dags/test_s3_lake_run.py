"""The daily DAG over a lake on object storage (moto's S3 server on 127.0.0.1): the same
`joulehouse run` lists the hosts there, builds the day and reports it. Before, the per-host
listing looked for local folders, found no host on s3://, every step was skipped and the run
still said success."""

from __future__ import annotations

import dataclasses
import datetime as dt

import duckdb
import pytest
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import generate_keypair
from joulehouse.settings import LakeSettings, replace_section, settings_to_toml
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.cli.demo_run import demo_settings
from joulehouse.cli.main import app
from s3_server import local_s3

DAY = dt.date(2026, 6, 10)
BUCKET = "jh-dag"
pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_a_day_on_an_s3_lake_goes_through_the_dag(tmp_path, shared_data):
    with local_s3(BUCKET):
        lake = f"s3://{BUCKET}/lake"
        simulate_fleet(lake, gpus=8, days=1, start=DAY, seed=5, interval_s=10.0)
        settings = demo_settings(tmp_path, shared_data)
        settings = replace_section(
            settings, lake=LakeSettings(path=lake),
            warehouse=dataclasses.replace(settings.warehouse, inventory_path=f"s3://{BUCKET}/inventory.csv"))
        config = tmp_path / "joulehouse.toml"
        config.write_text(settings_to_toml(settings))
        generate_keypair(tmp_path / "keys")
        result = CliRunner().invoke(app, ["run", "--date", DAY.isoformat(), "--config", str(config)])
        assert result.exit_code == 0, result.output

    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
    try:
        gpus, hours, kwh = con.execute(
            "SELECT count(DISTINCT gpu_uuid), count(*), sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = ?",
            [DAY]).fetchone()
    finally:
        con.close()
    assert (gpus, hours) == (8, 8 * 24) and kwh > 0
    assert (tmp_path / "reports" / f"{DAY}.html").exists()
    assert (tmp_path / "export" / "recommended-config.json").exists()
