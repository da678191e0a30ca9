"""Job energy across GPU models, on the simulator's cross-model job (the same profile ran on an A100
and an H100 the same day, for the same two hours). Tolerance: 5% (the issue's job-energy target);
measured (seed 11): A100 -> H100 -1.3%, H100 -> A100 +1.2%."""

from __future__ import annotations

import pytest

from joulehouse.models.job_energy import job_energy_day, predict_job_energy, same_profile_pairs

PROFILE = "llm-finetune-7b-ref"


@pytest.mark.slow
def test_cross_model_job_energy_within_5_pct(fitted):
    con, day, runs = fitted.con, fitted.day, fitted.summary.cross_model_runs
    pairs = same_profile_pairs(con, day, PROFILE)
    assert sorted(pairs) == sorted([(runs[0].job_id, runs[1].job_id), (runs[1].job_id, runs[0].job_id)])
    predictions = job_energy_day(con, day, pairs)
    assert {(p.from_gpu_model, p.to_gpu_model) for p in predictions} == {
        ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"), ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")}
    for p in predictions:
        print(p)
        assert abs(p.error_pct) < 5.0, p
        # The prediction is not the source's energy carried over: the H100 draws ~1.7x the A100 here.
        assert abs(p.predicted_energy_kwh - p.source_energy_kwh) > 0.2 * p.source_energy_kwh
    stored = con.execute("SELECT count(*), max(abs(error_pct)) FROM fct_job_energy_prediction WHERE day = ?",
                         [day]).fetchone()
    assert stored[0] == 2 and stored[1] < 5.0


def test_a_job_predicted_on_its_own_model_gives_back_its_energy(fitted):
    con, day, run = fitted.con, fitted.day, fitted.summary.cross_model_runs[0]
    (row,) = predict_job_energy(con, day, [run.job_id], [run.gpu_model])
    assert row["predicted_energy_kwh"] == pytest.approx(row["source_energy_kwh"], rel=0.02)
    assert row["duration_s"] == pytest.approx(7200, rel=0.01)


def test_time_scale_scales_energy_and_bad_input_is_named(fitted):
    con, day, run = fitted.con, fitted.day, fitted.summary.cross_model_runs[0]
    (one,) = predict_job_energy(con, day, [run.job_id], ["NVIDIA H100 80GB HBM3"])
    (half,) = predict_job_energy(con, day, [run.job_id], ["NVIDIA H100 80GB HBM3"], time_scale=0.5)
    assert half["predicted_energy_kwh"] == pytest.approx(one["predicted_energy_kwh"] / 2)
    with pytest.raises(ValueError, match="NVIDIA B200"):
        predict_job_energy(con, day, [run.job_id], ["NVIDIA B200"])
    with pytest.raises(ValueError, match="no samples"):
        job_energy_day(con, day, [(run.job_id, "no-such-job")])


def test_a_fleet_without_cross_model_pairs_writes_no_rows_and_does_not_fail():
    """A single-GPU-model fleet has no pairs: the day's step must still succeed."""
    import datetime as _dt

    import duckdb

    from joulehouse.models.job_energy import job_energy_day

    con = duckdb.connect()
    day = _dt.date(2026, 6, 10)
    assert job_energy_day(con, day, []) == []
    assert con.execute("SELECT count(*) FROM fct_job_energy_prediction").fetchone()[0] == 0
