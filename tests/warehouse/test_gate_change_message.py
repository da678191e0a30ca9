"""A 'rebuild' result names a few of a folder's changed files and counts the rest: a compaction of
a host-day merges hundreds of files, and the result is one line a person reads."""

from __future__ import annotations

import datetime as dt

from joulehouse.warehouse.gate import _folder_change
from joulehouse.warehouse.lake_fingerprint import FolderChange

DAY = dt.date(2026, 1, 2)
SAME = {"n_rows": 100, "hosts": "node-01", "n_files": 2}


def _change(**files) -> str:
    return _folder_change(DAY, FolderChange("gpu_samples", DAY + dt.timedelta(days=1), dict(SAME), dict(SAME), **files))


def test_files_merged_in_are_named_three_and_counted():
    merged = tuple(f"gpu_samples/date=2026-01-03/host=node-01/late-{i}.parquet" for i in range(5))
    said = _change(merged_in=merged)
    assert all(name in said for name in merged[:3]) and merged[3] not in said and merged[4] not in said
    assert "and 2 more" in said


def test_compactions_under_way_name_three_host_folders_and_count_the_rest():
    intents = tuple(f"gpu_samples/date=2026-01-03/host=node-{i:02d}/_compaction-{i}.json" for i in range(7))
    said = _change(compacting=intents)
    assert "host=node-02" in said and "host=node-03" not in said and "and 4 more" in said


def test_three_names_or_fewer_are_all_named_with_no_count():
    rewritten = ("gpu_samples/date=2026-01-03/host=node-01/a.parquet",)
    said = _change(rewritten=rewritten)
    assert rewritten[0] in said and "more" not in said
