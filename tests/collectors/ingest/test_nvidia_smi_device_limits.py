"""nvidia-smi fields with a gpu_samples column of their own: the device's power limits
(power.default_limit, power.min_limit, power.max_limit -> power_limit_default_w / _min_w / _max_w,
which the recommender takes before the catalogue's guesses).

Logs are written by hand in nvidia-smi's `--format=csv` shape: values as "500.00 W", unknowns as
"[N/A]" or "[Not Supported]" (`nvidia-smi --help-query-gpu`: "The default power management
algorithm's power ceiling, in watts", "The minimum/maximum value in watts that power limit can be
set to").
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest

from joulehouse.collectors.ingest.nvidia_smi import NvidiaSmiError, ingest_nvidia_smi, read_nvidia_smi_csv

NOW = datetime(2026, 1, 6, tzinfo=timezone.utc)
LIMITS = ["power_limit_default_w", "power_limit_min_w", "power_limit_max_w"]
HEADER = "timestamp, index, uuid, power.draw [W], power.default_limit [W], power.min_limit [W], power.max_limit [W]\n"


def _lake_rows(result, columns: list[str]) -> list[dict]:
    columns = ["gpu_index", "sampled_at", *columns]
    rows = [r for w in result.written for r in pq.read_table(w.path, columns=columns).to_pylist()]
    return sorted(rows, key=lambda r: (r["gpu_index"], r["sampled_at"]))


def test_the_devices_own_limits_land_in_the_lake_and_unknown_ones_are_null_not_0(tmp_path, lake):
    """A 500 W board (default 500 W, accepts 100-500 W) and a GPU whose driver reports no limits:
    the lake held NULL for both, so the recommender fell back to the catalogue's guesses."""
    log = tmp_path / "smi.csv"
    log.write_text(
        HEADER
        + "2026/01/05 10:00:00.000, 0, GPU-aaaa, 312.40 W, 500.00 W, 100.00 W, 500.00 W\n"
        "2026/01/05 10:00:00.000, 1, GPU-bbbb, 70.00 W, [N/A], [N/A], [Not Supported]\n"
        "2026/01/05 10:00:01.000, 0, GPU-aaaa, 315.10 W, 500.00 W, 100.00 W, 500.00 W\n"
    )
    result = ingest_nvidia_smi(log, lake=lake, host="node-01", gpu_model="NVIDIA A100-SXM4-80GB", now=NOW)
    assert (result.good_rows, result.bad_rows) == (3, 0)
    assert [tuple(r[c] for c in LIMITS) for r in _lake_rows(result, LIMITS)] == [
        (500.0, 100.0, 500.0), (500.0, 100.0, 500.0), (None, None, None)]
    assert not any("power.default_limit" in n or "power.min_limit" in n for n in result.notes)


def test_limits_written_without_units_are_read_as_watts(tmp_path):
    """`--format=csv,nounits`: '400.00' is 400 W, as power.draw is."""
    log = tmp_path / "nounits.csv"
    log.write_text(HEADER + "2026/01/05 10:00:00.000, 0, GPU-aaaa, 60.00, 400.00, 150.00, 400.00\n")
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.table.select(LIMITS).to_pylist() == [
        {"power_limit_default_w": 400.0, "power_limit_min_w": 150.0, "power_limit_max_w": 400.0}]


def test_a_malformed_limit_rejects_its_row_with_the_field_and_reason(tmp_path):
    """A limit in another unit, not a number, negative, or cut short is not the device's limit:
    the row is quarantined naming the field, as a malformed power.draw is, never stored as a guess."""
    log = tmp_path / "smi.csv"
    log.write_text(
        HEADER
        + "2026/01/05 10:00:00.000, 0, GPU-aaaa, 300.00 W, 500.00 W, 100.00 W, 500.00 W\n"
        "2026/01/05 10:00:01.000, 0, GPU-aaaa, 300.00 W, 500000 mW, 100.00 W, 500.00 W\n"
        "2026/01/05 10:00:02.000, 0, GPU-aaaa, 300.00 W, 500.00 W, low, 500.00 W\n"
        "2026/01/05 10:00:03.000, 0, GPU-aaaa, 300.00 W, 500.00 W, 100.00 W, -500.00 W\n"
        "2026/01/05 10:00:04.000, 0, GPU-aaaa, 300.00 W, 500.00 W, 100.00 W, 5\n"
        "2026/01/05 10:00:05.000, 0, GPU-aaaa, 301.00 W, 500.00 W, 100.00 W, 500.00 W\n"
    )
    res = read_nvidia_smi_csv(log, host="h", now=NOW)
    assert res.table.column("power_w").to_pylist() == [300.0, 301.0]
    assert [(r.line, r.reason) for r in res.rejected] == [
        (3, "power.default_limit: '500000 mW' is not in W"),
        (4, "power.min_limit: 'low' is not a number"),
        (5, "power.max_limit: negative reading '-500.00 W'"),
        (6, "power.max_limit: '5' is written without its unit, the log's other rows with (a line cut short?)")]


def test_a_limit_header_in_another_unit_refuses_the_log(tmp_path):
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, power.draw [W], power.max_limit [mW]\n"
                   "2026/01/05 10:00:00.000, 0, 300.00 W, 500000 mW\n")
    with pytest.raises(NvidiaSmiError, match=r"column 'power.max_limit' is in \[mW\], expected \[W\]"):
        read_nvidia_smi_csv(log, host="h", now=NOW)


def test_a_log_of_power_draw_average_alone_has_its_power_and_an_a100s_log_keeps_the_instant(tmp_path):
    """power.draw.average (the 1 s average, Ampere and newer) was not stored: a log of it alone had
    no power on any row ('columns not stored: power.draw.average'). Beside power.draw.instant the
    instant stays the power stored: an A100 (GA100) writes [N/A] for the average on every row."""
    alone = tmp_path / "average.csv"
    alone.write_text("timestamp, index, power.draw.average [W]\n"
                     "2026/01/05 10:00:00.000, 0, 95.50 W\n"
                     "2026/01/05 10:00:01.000, 0, [N/A]\n")
    res = read_nvidia_smi_csv(alone, host="h", now=NOW)
    assert res.table.column("power_w").to_pylist() == [95.5, None]  # unknown: NULL, not 0
    assert not any("power.draw.average" in n for n in res.notes)
    a100 = tmp_path / "a100.csv"
    a100.write_text("timestamp, index, power.draw.average [W], power.draw.instant [W]\n"
                    "2026/01/05 10:00:00.000, 0, [N/A], 355.70 W\n"
                    "2026/01/05 10:00:01.000, 0, [N/A], 270.10 W\n")
    res = read_nvidia_smi_csv(a100, host="h", now=NOW)
    assert res.table.column("power_w").to_pylist() == pytest.approx([355.7, 270.1], abs=1e-4)
    assert any("columns not stored: power.draw.average" in n for n in res.notes)
