"""README.md, "The recommended-config file", lists what each GPU's entry of the body holds.

It left out `gpu_model`, which the agent requires: a config written by hand from the README for a
pilot node (`joulehouse agent apply --dry-run`) was refused as malformed, and `sign_config` would
not sign it ("body.hosts[...].gpu_model must be a non-empty string")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from joulehouse.collectors.config_contract import MalformedConfig, parse_gpu_setting

README = Path(__file__).resolve().parents[2] / "README.md"
FULL_ENTRY = {"power_limit_w": 450.0, "gpu_model": "NVIDIA H100 80GB HBM3", "workload_class": "throughput",
              "expected_saving_pct": 12.0, "expected_slowdown_pct": 3.0,
              "locked_sm_clock_min_mhz": 1200, "locked_sm_clock_max_mhz": 1600}


# fields left out together: a lock is both ends or none
GROUPS = [("power_limit_w",), ("gpu_model",), ("workload_class",), ("expected_saving_pct",),
          ("expected_slowdown_pct",), ("locked_sm_clock_min_mhz", "locked_sm_clock_max_mhz")]


def _required_fields() -> set[str]:
    """The entry's fields the agent refuses an entry without."""
    required = set()
    for group in GROUPS:
        try:
            parse_gpu_setting("node-01", "GPU-0", {k: v for k, v in FULL_ENTRY.items() if k not in group})
        except MalformedConfig:
            required.update(group)
    return required


def _readme_gpu_fields() -> set[str]:
    text = " ".join(README.read_text(encoding="utf-8").split())
    sentence = re.search(r"per host and GPU UUID the (.*?);", text)
    assert sentence, "README.md no longer describes a GPU's entry of the recommended config"
    return set(re.findall(r"`(\w+)`", sentence[1]))


def test_the_full_entry_is_one_the_agent_takes():
    assert parse_gpu_setting("node-01", "GPU-0", FULL_ENTRY).gpu_model == "NVIDIA H100 80GB HBM3"
    with pytest.raises(MalformedConfig):
        parse_gpu_setting("node-01", "GPU-0", {})


def test_every_field_the_agent_requires_is_in_the_readme():
    assert _required_fields() - _readme_gpu_fields() == set()
