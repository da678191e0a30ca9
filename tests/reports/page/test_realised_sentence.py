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
                               "average (weighted by GPUs) against 11.0% predicted"), sentence


def test_without_gpu_counts_it_is_the_plain_mean_and_claims_no_weight():
    sentence = realised_sentence(_outcome())
    assert "15.0% less energy per unit of work on average against 10.0% predicted" in sentence
    assert "weighted" not in sentence and "GPUs" not in sentence
