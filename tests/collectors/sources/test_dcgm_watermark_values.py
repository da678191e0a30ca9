"""The DCGM watermark file holding values the sync cannot go on from: a watermark ahead of
Prometheus' clock, and values that are not UTC instants. Each stops the sync with a SourceError
naming the file (one line in the collector's log), rather than waiting silently or a traceback."""

from __future__ import annotations

import pytest
from test_dcgm import ClockedPrometheus, fake_source, stored_times

from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm_state import iso_utc

NOW_S = 1_700_000_000


def test_a_watermark_a_day_ahead_of_prometheus_is_said_not_waited_for(tmp_path):
    """A state file restored from elsewhere, or written under a clock a day ahead: the source wrote
    nothing for a day without a word, then skipped that day's samples for good (3 hours of syncs
    here wrote 0 of 1,080 samples)."""
    client = ClockedPrometheus(NOW_S)
    src = fake_source(tmp_path, client)
    src.sync(now_s=NOW_S)
    written_before = stored_times(tmp_path / "lake")
    src.state.save({"state_version": 1, "watermark_at": iso_utc(NOW_S + 86_400), "pending": None})
    client.now = NOW_S + 3600
    with pytest.raises(SourceError, match=r"state.json: watermark_at .* 82800 s ahead of Prometheus' time"):
        src.sync(now_s=client.now)
    assert stored_times(tmp_path / "lake") == written_before


def test_a_watermark_a_few_seconds_ahead_is_waited_for(tmp_path):
    # Prometheus' clock stepped back by NTP: within the tolerance the next sync simply has no range yet.
    client = ClockedPrometheus(NOW_S)
    src = fake_source(tmp_path, client)
    src.state.save({"state_version": 1, "watermark_at": iso_utc(NOW_S + 10), "pending": None})
    assert src.sync(now_s=NOW_S) == []
    client.now = NOW_S + 100
    src.sync(now_s=client.now)
    assert stored_times(tmp_path / "lake") == [float(t) for t in range(NOW_S + 20, NOW_S + 101, 10)]


@pytest.mark.parametrize(("field", "value"), [
    ("watermark_at", "yesterday"),
    ("watermark_at", NOW_S),
    ("watermark_at", "2023-11-14T22:13:20"),  # no offset: read in the node's local time
    ("pending", "2023-11-14T22:13:20+00:00"),
    ("pending", {"start_at": "2023-11-14T22:13:20+00:00"}),
])
def test_a_watermark_value_that_is_not_a_utc_instant_names_the_file(tmp_path, field, value):
    src = fake_source(tmp_path, ClockedPrometheus(NOW_S))
    state = {"state_version": 1, "watermark_at": iso_utc(NOW_S - 600), "pending": None, field: value}
    src.state.save(state)
    with pytest.raises(SourceError, match=rf"state.json: {field}"):
        src.sync(now_s=NOW_S)
    assert not (tmp_path / "lake").exists()
