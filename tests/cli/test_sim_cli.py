"""`joulehouse simulate` writes a lake and says what it wrote; bad input exits non-zero with a reason."""

from __future__ import annotations

import pytest

import typer
from typer.testing import CliRunner

from joulehouse.cli.sim import register


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps `simulate` addressable by name
        pass

    return app


def test_simulate_writes_the_lake_and_prints_the_summary(tmp_path):
    lake = tmp_path / "lake"
    result = CliRunner().invoke(_app(), ["simulate", "--lake", str(lake), "--gpus", "2", "--days", "1",
                                         "--start", "2026-01-05", "--seed", "4", "--interval", "1m"])
    assert result.exit_code == 0, result.output
    assert "2,880" in result.output  # 2 GPUs x 1440 minutes of gpu_samples
    assert (tmp_path / "inventory.csv").exists()
    assert sorted(p.name for p in lake.iterdir()) == ["facility_samples", "gpu_samples", "jobs", "link_samples", "node_samples"]


def test_a_bad_start_date_is_named(tmp_path):
    result = CliRunner().invoke(_app(), ["simulate", "--lake", str(tmp_path / "lake"), "--start", "10/06/2026"])
    assert result.exit_code == 2
    assert "--start '10/06/2026'" in result.output


BOUNDS = ("expected 250 ms to 60 s, dividing 86400 s evenly (a host's day is simulated in memory: below 250 ms it "
          "takes more than 2 GB)")


@pytest.mark.parametrize("interval, says", [
    ("200ms", f"error: --interval 200ms: {BOUNDS}"),  # 1 ms grew to 10.5 GB in 40 s on 8 GPUs
    ("7s", f"error: --interval 7s: {BOUNDS}"),
    ("fast", "error: --interval 'fast': expected a number with ms, s, m or h"),
])
def test_a_bad_interval_is_named(tmp_path, interval, says):
    result = CliRunner().invoke(_app(), ["simulate", "--lake", str(tmp_path / "lake"), "--gpus", "1",
                                         "--days", "1", "--interval", interval])
    assert result.exit_code == 2
    assert result.output.strip().startswith(says), result.output
    assert not (tmp_path / "lake").exists()


def test_the_shortest_interval_refused_is_below_the_bound():
    """`simulate --gpus 8 --days 1 --interval 1ms` passed the disk check and grew to 10.5 GB in 40 s:
    a host's day is simulated whole in memory, so the interval has a floor."""
    from joulehouse.collectors.sim.simulate import MIN_INTERVAL_S, interval_problem

    assert interval_problem(MIN_INTERVAL_S) is None and interval_problem(60) is None
    assert interval_problem(0.2) is not None and interval_problem(0.001) is not None


def test_a_fleet_past_the_bounds_or_past_its_disk_is_refused_before_anything_is_built(tmp_path):
    """`simulate --gpus 100000000 --days 100000` ran silently, building the fleet in memory (8 GB
    after a minute), with nothing to say how far it was from done or that no disk could hold it."""
    lake = tmp_path / "lake"
    too_many = CliRunner().invoke(_app(), ["simulate", "--lake", str(lake), "--gpus", "100001", "--days", "1"])
    assert too_many.exit_code == 2 and "--gpus" in too_many.output
    too_long = CliRunner().invoke(_app(), ["simulate", "--lake", str(lake), "--gpus", "8", "--days", "3661"])
    assert too_long.exit_code == 2 and "--days" in too_long.output
    past_disk = CliRunner().invoke(_app(), ["simulate", "--lake", str(lake), "--gpus", "100000", "--days", "3660"])
    assert past_disk.exit_code == 2
    assert "31,622,400,000,000 GPU readings take about 442,713.6 GB in the lake" in past_disk.output
    assert past_disk.output.count("\n") == 1 and not list(tmp_path.iterdir())
