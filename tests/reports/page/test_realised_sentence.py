"""The summary's sentence on realised savings says which mean it gives: the report read "15.1% on
average" where the plain mean of the six rows a reader sees under Recommendations is 13.5%."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl

from joulehouse.reports.page.section_summary import realised_sentence


def _outcome(**extra) -> SimpleNamespace:
    return SimpleNamespace(outcome=pl.DataFrame({
        "scope": ["model_setting", "model_setting", "gpu"], "realised_saving_pct": [10.0, 20.0, 99.0],
        "predicted_saving_pct": [8.0, 12.0, 99.0], **extra}))


def test_the_mean_over_settings_is_weighted_by_gpus_and_says_so():
    sentence = realised_sentence(_outcome(n_treated_gpus=[1, 3, 1]))
    # (10 x 1 + 20 x 3) / 4 = 17.5 realised, (8 + 36) / 4 = 11.0 predicted; the per-GPU row is not pooled
    assert sentence.startswith("2 settings measured on 4 GPUs, 17.5% less energy per unit of work on "
                               "average (weighted by GPUs), where 11.0% less was predicted"), sentence


def test_without_gpu_counts_it_is_the_plain_mean_and_claims_no_weight():
    sentence = realised_sentence(_outcome())
    assert "15.0% less energy per unit of work on average, where 10.0% less was predicted" in sentence
    assert "weighted" not in sentence and "GPUs" not in sentence


def test_a_setting_that_cost_energy_says_more_not_a_negative_less():
    """The operator's trial read "-17.4% less energy ... against 0.0% predicted" for a cap raised back."""
    data = SimpleNamespace(outcome=pl.DataFrame({"scope": ["model_setting"], "realised_saving_pct": [-17.4],
                                                 "predicted_saving_pct": [-13.1], "n_treated_gpus": [1]}))
    sentence = realised_sentence(data)
    assert "17.4% more energy per unit of work on average, where 13.1% more was predicted" in sentence, sentence
    assert "-" not in sentence.split("(")[0]


def test_settings_measured_without_a_prediction_are_counted_not_hidden():
    """The terminal listed two measured settings where the summary said "1 setting measured"."""
    data = SimpleNamespace(outcome=pl.DataFrame({
        "scope": ["model_setting", "model_setting"], "realised_saving_pct": [12.0, -7.1],
        "predicted_saving_pct": [10.0, None], "n_treated_gpus": [2, 1]}))
    sentence = realised_sentence(data)
    assert sentence.startswith("1 setting measured on 2 GPUs, 12.0% less energy per unit of work on average, "
                               "where 10.0% less was predicted (1 more setting measured with no prediction)"), sentence


def test_settings_that_were_lost_are_not_called_recommendations_taken():
    from joulehouse.models.outcome import LOST_SETTING_NOTE

    data = SimpleNamespace(outcome=pl.DataFrame({
        "scope": ["model_setting", "model_setting"], "realised_saving_pct": [-17.4, 12.0],
        "predicted_saving_pct": [-13.2, 10.0], "n_treated_gpus": [1, 1],
        "note": [LOST_SETTING_NOTE + " (undone outside it): not a recommendation taken", None]}))
    sentence = realised_sentence(data)
    assert sentence.endswith("1 of them was a setting the agent applied and that went back without it, "
                             "not a recommendation taken."), sentence


def test_a_shifting_saving_the_carbon_account_did_not_compute_is_not_a_saving_of_zero():
    """rpt_shift_opportunity_daily leaves the carbon columns NULL where only the cost account ran:
    the page said '0.0 kgCO2e ... would have been saved', the summary 'saves about 0.0 kgCO2e'."""
    import datetime as dt
    import html
    import re

    from joulehouse.reports.page.blocks import FigureWriter, Section
    from joulehouse.reports.page.render import shift_block
    from joulehouse.reports.page.section_summary import shift_action

    shift = pl.DataFrame({"site": ["s"], "team": ["t"], "job_id": ["j1"], "energy_kwh": [12.0],
                          "carbon_saving_gco2e": pl.Series([None], dtype=pl.Float64), "cost_saving_usd": [3.5],
                          "best_carbon_hour_at": pl.Series([None], dtype=pl.Datetime("us", "UTC")),
                          "best_cost_hour_at": [dt.datetime(2026, 6, 10, 3, tzinfo=dt.timezone.utc)]})
    data = SimpleNamespace(shift=shift, shift_why="")
    section = Section("shift", "shift")
    shift_block(data, FigureWriter(), section)
    note = html.unescape(re.sub("<[^>]+>", "", str(section.blocks[1])))
    assert "3.50 USD of energy cost would have been saved" in note and "carbon not computed" in note
    assert "kgCO2e" not in note
    (action,) = shift_action(data)
    assert "3.50 USD in the cheapest hours (carbon not computed)" in action.text and "kgCO2e" not in action.text


def test_settings_measured_per_active_hour_are_called_a_saving_of_busy_power():
    """Where no job reports work the outcome measures energy per active hour: a saving of power while
    busy (14.3% for a 400 -> 300 W cap that slowed the work 10%), not of energy per unit of work."""
    sentence = realised_sentence(_outcome(outcome_unit=["active_hour", "active_hour", "active_hour"]))
    assert "less power while busy on average" in sentence and "per unit of work" not in sentence
    mixed = realised_sentence(_outcome(outcome_unit=["flop", "active_hour", "active_hour"]))
    assert "energy per unit of work (power while busy where no job reported work)" in mixed
    assert "less energy per unit of work on average" in realised_sentence(_outcome(outcome_unit=["flop", "sample", "flop"]))


def test_the_outcome_figures_axis_names_what_its_percentages_are_of():
    from joulehouse.reports.page.figures_estimates import outcome_saving

    rows = pl.DataFrame({"scope": ["model_setting"], "host": [None], "gpu_uuid": [None], "gpu_model": ["NVIDIA A100-SXM4-80GB"],
                         "power_limit_w_before": [400.0], "power_limit_w_after": [300.0], "n_treated_gpus": [2],
                         "realised_saving_pct": [14.3], "saving_ci_low_pct": [10.0], "saving_ci_high_pct": [18.0],
                         "predicted_saving_pct": [14.3], "outcome_unit": ["active_hour"]})
    assert outcome_saving(rows).layout.xaxis.title.text == "saving (% of power while busy)"



def test_the_recommendations_section_says_what_its_savings_are_of():
    """The section's note began "Energy per unit of work before vs after" over rows measured per
    active hour, whose savings are of power while busy."""
    from joulehouse.reports.page.blocks import Section
    from joulehouse.reports.page.section_actions import _outcome

    data = SimpleNamespace(outcome=pl.DataFrame({"scope": ["model_setting"], "gpu_model": ["NVIDIA H200"],
                                                 "outcome_unit": ["active_hour"], "realised_saving_pct": [14.3],
                                                 "predicted_saving_pct": [14.3]}),
                           outcome_gpus=None)
    section = Section("recommendations", "Recommendations")
    _outcome(data, None, section)
    text = " ".join(str(b) for b in section.blocks)
    assert "Power while busy before vs after each setting took effect" in text and "unit of work" not in text


def test_the_outcome_table_shows_the_saving_re_predicted_on_the_work_that_ran():
    """The report's flag weighs the realised saving against the re-prediction on the work that ran
    (models.outcome_reprediction), but its table showed only the recommendation's prediction."""
    from joulehouse.reports.page.blocks import Section
    from joulehouse.reports.page.section_actions import _outcome

    data = SimpleNamespace(outcome=pl.DataFrame({
        "scope": ["gpu"], "gpu_model": ["NVIDIA H200"], "outcome_unit": ["flop"], "realised_saving_pct": [25.9],
        "predicted_saving_pct": [11.4], "predicted_on_mix_saving_pct": [24.6], "realised_slowdown_pct": [10.9],
        "predicted_slowdown_pct": [1.4], "predicted_on_mix_slowdown_pct": [10.0]}), outcome_gpus=None)
    section = Section("recommendations", "Recommendations")
    _outcome(data, None, section)
    text = " ".join(str(b) for b in section.blocks)
    assert "predicted_on_mix_saving_pct" in text and "24.6" in text and "predicted_on_mix_slowdown_pct" in text
