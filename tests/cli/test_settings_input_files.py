"""A settings file that names an input file that is not there is refused in one line naming the
setting and the path, before any work: `joulehouse run` exited only ~20 s into Airflow's build
task (a missing [warehouse] inventory_path) or ~35 s in, on a GridFileError that named no
setting (a missing [carbon] grid_file), and `joulehouse settings --config` printed the file and
exited 0."""

from __future__ import annotations

import datetime as dt

import pytest
from typer.testing import CliRunner

import joulehouse.cli.dagrun as dagrun
from joulehouse.cli.main import app
from joulehouse.collectors.config_contract import generate_keypair

DAY = dt.date(2026, 6, 12)


@pytest.fixture()
def site(tmp_path, monkeypatch):
    """A site whose lake is there (so only the input file can stop the run) and whose Airflow
    must never start: run_days records the days instead."""
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps the one line at the terminal's width
    (tmp_path / "lake" / "gpu_samples" / f"date={DAY}" / "host=node-01").mkdir(parents=True)  # the day has readings
    started = []
    monkeypatch.setattr(dagrun, "run_days", lambda days, *a, **k: started.append(list(days)) or [{"ran": []}] * len(days))
    return tmp_path, started


def _config(tmp_path, body: str = "", warehouse: str = "", export: str | None = None):
    """A site's settings; its signing key is there unless `export` says otherwise."""
    if export is None:
        generate_keypair(tmp_path / "keys")
        export = f'private_key_path = "{tmp_path / "keys" / "joulehouse-ed25519.pem"}"\n'
    path = tmp_path / "joulehouse.toml"
    path.write_text(f'[lake]\npath = "{tmp_path / "lake"}"\n'
                    f'[warehouse]\ndb_path = "{tmp_path / "w.duckdb"}"\n{warehouse}[export]\n{export}' + body)
    return path


def _run(tmp_path, config):
    return CliRunner().invoke(app, ["run", "--date", str(DAY), "--config", str(config)])


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("section, key", [("warehouse", "inventory_path"), ("carbon", "grid_file"),
                                          ("tco", "price_file"), ("tco", "tariff_file")])
def test_run_names_a_missing_input_file_before_airflow_starts(site, section, key):
    tmp_path, started = site
    missing = tmp_path / "typo" / f"{key}.csv"
    setting = f'{key} = "{missing}"\n'
    config = (_config(tmp_path, warehouse=setting) if section == "warehouse"
              else _config(tmp_path, f"[{section}]\n{setting}"))
    line = _one_line(_run(tmp_path, config))
    assert line == (f"error: [{section}].{key} {missing} (in {config}): does not exist; "
                    f'fix the path, or {key} = "" for none')
    assert started == [] and not (tmp_path / "airflow").exists()  # the Airflow home beside the warehouse


def test_run_says_which_environment_variable_gave_the_path(site, monkeypatch):
    tmp_path, started = site
    monkeypatch.setenv("JOULEHOUSE_CARBON__GRID_FILE", str(tmp_path))
    line = _one_line(_run(tmp_path, _config(tmp_path)))
    assert line.startswith(f"error: [carbon].grid_file {tmp_path} (from JOULEHOUSE_CARBON__GRID_FILE): is a folder")
    assert started == []


def test_a_missing_clock_sweep_is_named_by_its_entry(site):
    tmp_path, started = site
    sweep = tmp_path / "sweeps" / "a100.csv"
    line = _one_line(_run(tmp_path, _config(tmp_path, f'[models]\nclock_sweep_files = ["A100|{sweep}"]\n')))
    assert f"[models].clock_sweep_files {sweep}" in line and "does not exist" in line
    assert started == []


def test_files_that_are_there_urls_and_empty_settings_let_the_run_start(site):
    tmp_path, started = site
    grid = tmp_path / "grid.csv"
    grid.write_text("at,region,gco2e_per_kwh\n")
    config = _config(tmp_path, f'[carbon]\ngrid_file = "{grid}"\n[tco]\nprice_file = ""\n',
                     warehouse='inventory_path = "s3://fleet/inv.csv"\n')
    result = _run(tmp_path, config)
    assert "error" not in result.output and len(started) == 1


def test_run_refuses_a_missing_signing_key_before_the_day_is_built(site):
    """Without the key, the DAG built, checked, fitted, accounted and recommended the day, then
    failed at the signed export, minutes in, and the report after it was never drawn.
    `joulehouse settings` does not need the key."""
    tmp_path, started = site
    key = tmp_path / "keys" / "joulehouse-ed25519.pem"
    config = _config(tmp_path, export=f'private_key_path = "{key}"\n')
    line = _one_line(_run(tmp_path, config))
    assert line == (f"error: [export].private_key_path {key} (in {config}): does not exist; "
                    f"create one with `joulehouse keys generate --out {key.parent}`, or fix the path")
    assert started == []
    assert CliRunner().invoke(app, ["settings", "--config", str(config)], env={}).exit_code == 0
    assert CliRunner().invoke(app, ["keys", "generate", "--out", str(key.parent)]).exit_code == 0
    result = _run(tmp_path, config)  # the fix the line gives is enough
    assert "error" not in result.output and len(started) == 1


def test_settings_refuses_a_missing_input_file_in_one_line(tmp_path):
    config = tmp_path / "site.toml"
    config.write_text(f'[warehouse]\ninventory_path = "{tmp_path / "inventory.csv"}"\n')
    result = CliRunner().invoke(app, ["settings", "--config", str(config)], env={})
    line = _one_line(result)
    assert line == (f"error: [warehouse].inventory_path {tmp_path / 'inventory.csv'} (in {config}): does not exist; "
                    'fix the path, or inventory_path = "" for none')
    (tmp_path / "inventory.csv").write_text("host,gpu_uuid\n")
    assert CliRunner().invoke(app, ["settings", "--config", str(config)], env={}).exit_code == 0


def test_a_missing_grid_file_names_the_option_that_gave_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    missing = tmp_path / "grid.csv"
    result = CliRunner().invoke(app, ["carbon", "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "1",
                                      "--region", "FR", "--start", "2026-06-01T00:00:00Z", "--grid-file", str(missing)])
    assert result.exit_code != 0
    assert f"grid intensity file {missing} does not exist (--grid-file)" in result.output


def test_a_range_runs_every_day_in_order_and_a_day_without_readings_stops_it_before_airflow(site):
    """`--through` restates the days built after an earlier one was rebuilt (the build's warning
    gives the command): every day of the range must have readings, checked before Airflow starts."""
    tmp_path, started = site
    config = _config(tmp_path)
    after = DAY + dt.timedelta(days=2)
    args = ["run", "--date", str(DAY), "--through", str(after), "--config", str(config)]
    line = _one_line(CliRunner().invoke(app, args))
    assert line.startswith(f"error: no GPU readings for {DAY + dt.timedelta(days=1)} in the lake") and started == []
    for day in (DAY + dt.timedelta(days=1), after):
        (tmp_path / "lake" / "gpu_samples" / f"date={day}" / "host=node-01").mkdir(parents=True)
    result = CliRunner().invoke(app, args)  # (Airflow stood in for: no warehouse to show a headline of after)
    assert started == [[DAY, DAY + dt.timedelta(days=1), after]]
    assert [line.split(":")[0] for line in result.output.splitlines() if "success" in line] == [
        f"joulehouse_daily {d}" for d in started[0]]


def test_a_missing_file_a_sites_own_price_entry_names_is_said_before_any_work(tmp_path):
    """[tco] site_prices names a tariff or price file per site: a missing one passed the settings
    check and failed at the cost step, minutes into a run, where [tco] tariff_file is said at once."""
    config = tmp_path / "site.toml"
    config.write_text('[tco]\nsite_prices = ["site-b|tariff|tou.json|America/Chicago"]\n')
    line = _one_line(CliRunner().invoke(app, ["settings", "--config", str(config)], env={}))
    assert line.startswith(f"error: [tco].site_prices {tmp_path / 'tou.json'}") and "does not exist" in line, line
    (tmp_path / "tou.json").write_text("{}")
    assert CliRunner().invoke(app, ["settings", "--config", str(config)], env={}).exit_code == 0
