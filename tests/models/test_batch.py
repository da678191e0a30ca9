"""Choosing the batch size with the best throughput per watt from a batch sweep."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from joulehouse.models.batch import BatchSweepError, best_batch_size, load_batch_sweeps

HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"


def test_hand_computed_sweep_picks_least_energy_per_unit_of_work(tmp_path):
    # Energy per epoch at 250 W: bs32 10 s x 200 W = 2000 J; bs64 6 s x 250 W = 1500 J (best);
    # bs128 5.5 s x 300 W = 1650 J. At 150 W: bs32 12 s x 140 W = 1680 J; bs64 9 s x 150 W = 1350 J (best).
    path = tmp_path / "sweep.csv"
    path.write_text(HEADER + "d,n,32,sgd,250,10,200\nd,n,64,sgd,250,6,250\nd,n,128,sgd,250,5.5,300\n"
                    "d,n,32,sgd,150,12,140\nd,n,64,sgd,150,9,150\n")
    (workload, points), = load_batch_sweeps(path).items()
    choice = best_batch_size(workload, points)
    assert (workload, choice.power_limit_w, choice.batch_size) == ("d/n/sgd", 250.0, 64)
    assert choice.energy_j == pytest.approx(1500.0)
    assert choice.gain_over_worst_ratio == pytest.approx(2000.0 / 1500.0)
    assert best_batch_size(workload, points, power_limit_w=150).batch_size == 64
    with pytest.raises(BatchSweepError, match="measured limits"):
        best_batch_size(workload, points, power_limit_w=175)


def test_real_zeus_sweep_choice_is_never_beaten_at_its_limit(shared_data):
    sweeps = load_batch_sweeps(shared_data / "sweeps" / "zeus_nsdi23_summary_power_a40.csv")
    assert len(sweeps) >= 6
    for workload, points in sweeps.items():
        choice = best_batch_size(workload, points)
        rivals = [p for p in points if p.power_limit_w == choice.power_limit_w]
        assert choice.batch_sizes_compared >= 2
        assert all(choice.energy_j <= p.energy_j + 1e-9 for p in rivals), workload
        assert choice.gain_over_worst_ratio >= 1.0


def test_cli_prints_json_and_names_a_bad_file(tmp_path, shared_data):
    import json

    import typer

    from joulehouse.cli.caps import register

    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["caps", "best-batch", str(shared_data / "sweeps" / "zeus_nsdi23_summary_power_v100.csv")])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert rows and {"workload", "batch_size", "eta_per_kj", "power_limit_w"} <= set(rows[0])
    bad = tmp_path / "bad.csv"
    bad.write_text("batch_size,time_per_epoch\n32,1\n")
    out = CliRunner().invoke(app, ["caps", "best-batch", str(bad)])
    assert out.exit_code == 2 and "missing columns" in out.output
