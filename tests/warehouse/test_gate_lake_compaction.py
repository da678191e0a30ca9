"""The gate's 'rebuild' check against compactions: a compaction that merged a file the build never
read is a change where that file could hold readings of the day built; a compaction caught half
done is looked at again once it is done; one gate lists each lake partition once."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from warehouse_lakes import DAY, at, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse import lake_compact, lake_compactions_seen, lake_fingerprint
from joulehouse.warehouse.gate import run_gate
from joulehouse.warehouse.lake_compact import compact_host_day, compact_partition

NEXT_DAY = DAY + dt.timedelta(days=1)
NEXT_MIDNIGHT_S = 86400


def _rebuild_results(con) -> dict[dt.date, tuple[bool, str]]:
    rows = con.execute("SELECT day, success, observed_value FROM fct_check_results WHERE severity = 'rebuild'").fetchall()
    return {day: (success, said) for day, success, said in rows}


def _next_day_folder(lake):
    return lake / "gpu_samples" / f"date={NEXT_DAY}" / "host=node-01"


def _day_and_next_mornings_file(lake) -> None:
    """DAY whole (its last reading 23:59:50), then node-01's next-day files: 00:10-00:30 (inside
    DAY's 900 s margin: its build reads it) and 01:00-02:00 (outside: not read)."""
    write(lake, gpu_rows(range(0, NEXT_MIDNIGHT_S, 10), 100.0))
    write(lake, gpu_rows(range(NEXT_MIDNIGHT_S + 600, NEXT_MIDNIGHT_S + 1800, 10), 100.0))
    write(lake, gpu_rows(range(NEXT_MIDNIGHT_S + 3600, NEXT_MIDNIGHT_S + 7200, 10), 100.0))


def test_a_late_file_in_the_days_margin_merged_by_a_compaction_is_a_change(lake, warehouse):
    """node-01 already reached across midnight; its spool segment of 00:00-00:10 landed late in the
    next day's folder, and the next day's compaction merged it with the files DAY's build read
    before any gate looked: the ledger excused every file the build read (each was merged), the
    host list was the same, and DAY's energy of 23:59:50-00:00 (bridged by the reading of 00:00
    now) stood unchanged without a word."""
    _day_and_next_mornings_file(lake)
    warehouse(DAY)
    write(lake, gpu_rows(range(NEXT_MIDNIGHT_S, NEXT_MIDNIGHT_S + 600, 10), 100.0))
    compact_host_day(lake, NEXT_DAY, "node-01")
    assert len(list(_next_day_folder(lake).glob("*.parquet"))) == 1
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok, said
    assert (f"gpu_samples date={NEXT_DAY}: a compaction merged in what the build did not read, with readings "
            f"inside its window (or of times its ledger does not say): gpu_samples/date={NEXT_DAY}/host=node-01/"
            f"part-{int(at(NEXT_MIDNIGHT_S).timestamp()) * 10**6:016d}-") in said
    assert f"joulehouse run --date {DAY}" in said


def test_a_compaction_that_merged_only_later_hours_beside_the_files_read_is_no_change(lake, warehouse):
    """The next day's files of 01:00 onwards were never read by DAY's build: merged with those it
    read, they change nothing of DAY, and a second compaction of the result is followed too."""
    _day_and_next_mornings_file(lake)
    warehouse(DAY)
    compact_host_day(lake, NEXT_DAY, "node-01")
    write(lake, gpu_rows(range(NEXT_MIDNIGHT_S + 7200, NEXT_MIDNIGHT_S + 10800, 10), 100.0))
    compact_host_day(lake, NEXT_DAY, "node-01")
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert ok, said


def test_a_merged_file_the_ledger_gives_no_times_for_is_a_change(lake, warehouse):
    """A ledger line from before the ledger kept each file's times cannot tell whether the file
    held readings of the day: a false 'rebuild' is cheap, wrong energy is not."""
    _day_and_next_mornings_file(lake)
    warehouse(DAY)
    compact_host_day(lake, NEXT_DAY, "node-01")
    ledger = _next_day_folder(lake) / "_compacted.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert all("first_at" in e and "last_at" in e for e in lines)
    ledger.write_text("".join(json.dumps({k: v for k, v in e.items() if k not in ("first_at", "last_at")}) + "\n"
                              for e in lines))
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and "a compaction merged in what the build did not read" in said


def test_a_late_file_merged_into_the_days_own_folder_is_a_change_of_its_readings(lake, warehouse):
    """The day's own folder: every file there is read, so a late one merged in shows as more readings."""
    for start in range(0, 43200, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    write(lake, gpu_rows(range(43200, 46800, 10), 100.0))
    compact_host_day(lake, DAY, "node-01")
    assert len(list((lake / "gpu_samples" / f"date={DAY}" / "host=node-01").glob("*.parquet"))) == 1
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and f"gpu_samples date={DAY}: 4,320 readings when built, 4,680 now" in said


def test_a_gate_lists_each_lake_partition_once_for_the_three_days_it_checks(lake, warehouse, monkeypatch):
    """The gate checks the three built days whose builds read its day's folder; each check listed
    its three date= folders again: the day's own folder three times a gate, its neighbours twice."""
    write(lake, gpu_rows(range(-600, 2 * NEXT_MIDNIGHT_S + 600, 10), 100.0))
    warehouse(DAY - dt.timedelta(days=1))
    warehouse(DAY)
    con = warehouse(NEXT_DAY)
    listed = Counter()
    real = lake_fingerprint.day_files

    def counting(con, dataset, dates):
        listed.update((dataset, d) for d in dates)
        return real(con, dataset, dates)

    monkeypatch.setattr(lake_fingerprint, "day_files", counting)
    run_gate(con, DAY, WarehouseSettings())
    results = _rebuild_results(con)
    assert all(results[d][0] for d in (DAY - dt.timedelta(days=1), DAY, NEXT_DAY)), results
    checked = [DAY + dt.timedelta(days=k) for k in range(-2, 3)]
    assert {d for ds, d in listed if ds == "gpu_samples"} == set(checked), listed
    assert max(listed.values()) == 1, listed


class _Killed(Exception):
    """The compaction's process dies here."""


def _compaction_stopped_after_its_new_file(monkeypatch, lake, day: dt.date):
    """Compact node-01's gpu_samples of `day` up to the moment its new file landed beside the old
    ones (no ledger line yet, none removed): what a reader sees mid-way. Returns the folder."""
    def killed(*args, **kwargs):
        raise _Killed

    with monkeypatch.context() as patched:
        patched.setattr(lake_compact, "_remove_replaced", killed)
        with pytest.raises(_Killed):
            compact_partition(lake, day, "node-01", "gpu_samples")
    folder = lake / "gpu_samples" / f"date={day}" / "host=node-01"
    assert len(list(folder.glob("_compaction-*.json"))) == 1
    return folder


def test_a_gate_that_looks_while_a_compaction_is_under_way_waits_for_it(lake, warehouse, monkeypatch):
    """Between a compaction's new file landing and its old files going, the day's folder holds
    every reading twice: the gate said 8,640 readings when built, 17,280 now, a false 'rebuild'."""
    for start in range(0, 86400, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    folder = _compaction_stopped_after_its_new_file(monkeypatch, lake, DAY)
    waited = []

    def compaction_goes_on(seconds):
        waited.append(seconds)
        lake_compact.finish_interrupted(folder)

    monkeypatch.setattr(lake_compactions_seen, "_sleep", compaction_goes_on)
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert ok, said
    assert len(waited) == 1 and len(list(folder.glob("*.parquet"))) == 1


def test_a_compaction_that_ends_between_the_gates_listing_and_its_verdict_is_no_change(lake, warehouse, monkeypatch):
    """The gate listed the next day's folder mid-way (the new file beside the old, no ledger line),
    and the compaction was over before the gate compared: a false 'rebuild'. It looks again."""
    _day_and_next_mornings_file(lake)
    warehouse(DAY)
    folder = _compaction_stopped_after_its_new_file(monkeypatch, lake, NEXT_DAY)
    con = warehouse(NEXT_DAY)
    real = lake_compactions_seen.not_compacted

    def compaction_ends_after_the_listing(*args, **kwargs):
        lake_compact.finish_interrupted(folder)
        return real(*args, **kwargs)

    monkeypatch.setattr(lake_compactions_seen, "not_compacted", compaction_ends_after_the_listing)
    monkeypatch.setattr(lake_compactions_seen, "_sleep", lambda seconds: pytest.fail("waited"))
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert ok, said


def test_a_compaction_cut_short_long_ago_is_named_and_not_waited_for(lake, warehouse, monkeypatch):
    """A compaction that died after its new file landed leaves the readings twice in the lake
    until the partition's next compaction finishes it: a change, said with its cause and cure."""
    import os

    for start in range(0, 86400, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    folder = _compaction_stopped_after_its_new_file(monkeypatch, lake, DAY)
    [intent] = folder.glob("_compaction-*.json")
    an_hour_ago = intent.stat().st_mtime - 3600
    os.utime(intent, (an_hour_ago, an_hour_ago))
    monkeypatch.setattr(lake_compactions_seen, "_sleep", lambda seconds: pytest.fail("waited"))
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and f"gpu_samples date={DAY}: 8,640 readings when built, 17,280 now" in said
    assert (f"a compaction of gpu_samples/date={DAY}/host=node-01 was under way or cut short when the gate "
            f"looked") in said and f"joulehouse compact --lake LAKE --date {DAY}" in said


def test_a_file_with_a_reading_past_year_9999_still_compacts_and_its_times_are_unknown(lake):
    """Times past Python's datetime cannot be written as ISO text: the file is merged all the same
    (its rows are kept as stored), and its ledger line says no times, which the gate takes as a change."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write(lake, gpu_rows(range(0, 600, 10), 100.0))
    folder = lake / "gpu_samples" / f"date={DAY}" / "host=node-01"
    [good] = folder.glob("*.parquet")
    table = pq.read_table(good)
    far = table.slice(0, 1).set_column(table.schema.get_field_index("sampled_at"), "sampled_at",
                                       pa.array([2**62], table.schema.field("sampled_at").type))
    pq.write_table(far, folder / "part-far.parquet")
    [report] = compact_host_day(lake, DAY, "node-01")
    assert report.rows == 61 and report.files_after == 1
    entries = {e["name"]: e for e in map(json.loads, (folder / "_compacted.jsonl").read_text().splitlines())}
    assert entries["part-far.parquet"]["first_at"] is None and entries[good.name]["first_at"].startswith(f"{DAY}T00:00:00")


def test_one_gate_waits_for_compactions_once_however_many_of_its_days_changed(lake, warehouse, monkeypatch):
    """A late host's file in the day's folder changes all three built days the gate checks, and an
    intent there stays young (one host's compaction follows another): each day's check waited the
    full minute, 3 minutes a gate holding the warehouse's writer lock. The gate waits one minute in
    all, then says the change and names the intent."""
    import os

    write(lake, gpu_rows(range(-NEXT_MIDNIGHT_S - 600, 2 * NEXT_MIDNIGHT_S + 600, 10), 100.0))
    built_days = (DAY - dt.timedelta(days=1), DAY, NEXT_DAY)
    for day in built_days:
        con = warehouse(day)
    write(lake, gpu_rows(range(-300, NEXT_MIDNIGHT_S + 300, 10), 100.0, host="node-02", uuid="GPU-9"))
    intent = lake / "gpu_samples" / f"date={DAY}" / "host=node-01" / "_compaction-0123456789ab.json"
    intent.write_text(json.dumps({"new": "part-new.parquet", "replaces": []}))
    clock_s = [1000.0]

    def next_hosts_compaction_begins(seconds):
        clock_s[0] += seconds
        os.utime(intent)

    monkeypatch.setattr(lake_compactions_seen, "_clock", lambda: clock_s[0])
    monkeypatch.setattr(lake_compactions_seen, "_sleep", next_hosts_compaction_begins)
    run_gate(con, DAY, WarehouseSettings())
    assert clock_s[0] - 1000.0 <= lake_compactions_seen.COMPACTION_WAIT_S, clock_s
    results = _rebuild_results(con)
    assert all(not results[d][0] and "node-02" in results[d][1] for d in built_days), results
    assert f"a compaction of gpu_samples/date={DAY}/host=node-01 was under way or cut short" in results[DAY][1]


def test_a_ledger_line_whose_first_reading_comes_after_its_last_is_a_change(lake, warehouse):
    """A ledger line whose first reading is after its last is no file's (a corrupt or hand-made
    line): read as a range, year 9999 to year 1 reached no window and excused the late file's
    readings of DAY's margin."""
    _day_and_next_mornings_file(lake)
    warehouse(DAY)
    write(lake, gpu_rows(range(NEXT_MIDNIGHT_S, NEXT_MIDNIGHT_S + 600, 10), 100.0))
    compact_host_day(lake, NEXT_DAY, "node-01")
    ledger = _next_day_folder(lake) / "_compacted.jsonl"
    late = f"part-{int(at(NEXT_MIDNIGHT_S).timestamp()) * 10**6:016d}-"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert sum(e["name"].startswith(late) for e in entries) == 1
    backwards = {"first_at": "9999-12-31T00:00:00+00:00", "last_at": "0001-01-01T00:00:00+00:00"}
    ledger.write_text("".join(json.dumps({**e, **backwards} if e["name"].startswith(late) else e) + "\n"
                              for e in entries))
    con = warehouse(NEXT_DAY)
    run_gate(con, NEXT_DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and "a compaction merged in what the build did not read" in said and late in said, said


class _CountedLedger(dict):
    """A compaction ledger that counts how often it is walked whole."""

    walks = 0

    def values(self):
        type(self).walks += 1
        return super().values()


def test_a_ledger_is_walked_once_however_many_files_the_build_read_were_merged(tmp_path, monkeypatch):
    """A 16 MiB ledger (67,000 lines) naming each of 288 files a build read as merged into a file
    of its own was walked once per such file: 13 s for one look at one folder, and a gate looks up
    to six times. Each folder's ledger is walked once a look."""
    folder = f"gpu_samples/date={NEXT_DAY}/host=node-01"
    (tmp_path / folder).mkdir(parents=True)
    modified_at = at(NEXT_MIDNIGHT_S + 43200)
    built = [{"path": f"{folder}/read-{i}.parquet", "size_bytes": 1000, "modified_at": modified_at} for i in range(288)]
    now = [{"path": f"{folder}/into-{i}.parquet", "size_bytes": 9, "modified_at": modified_at} for i in range(288)]
    ledger = _CountedLedger({f"read-{i}.parquet": {
        "name": f"read-{i}.parquet", "bytes": 1000, "mtime_ns": int(modified_at.timestamp()) * 10**9,
        "first_at": at(NEXT_MIDNIGHT_S + 3600).isoformat(), "last_at": at(NEXT_MIDNIGHT_S + 7200).isoformat(),
        "into": f"into-{i}.parquet"} for i in range(288)})
    monkeypatch.setattr(lake_compactions_seen, "_ledger", lambda path: ledger)
    window = (at(-900), at(NEXT_MIDNIGHT_S + 900))
    assert lake_compactions_seen.not_compacted(str(tmp_path), built, now, window, own_folder=False) == ([], [])
    assert _CountedLedger.walks == 1


def test_an_intent_dated_ahead_of_the_gates_clock_is_named_and_not_waited_for(lake, warehouse, monkeypatch):
    """An intent dated an hour ahead (a clock set wrong, a lake restored with its times) looked
    young for an hour: every gate in that hour waited its full minute for a compaction nobody ran
    (a `joulehouse run` of 30 days, 30 minutes). No live compaction's intent is dated more than
    COMPACTION_WAIT_S ahead: it is one cut short, said with the change."""
    import os
    import time

    for start in range(0, NEXT_MIDNIGHT_S, 3600):
        write(lake, gpu_rows(range(start, start + 3600, 10), 100.0))
    con = warehouse()
    folder = _compaction_stopped_after_its_new_file(monkeypatch, lake, DAY)
    [intent] = folder.glob("_compaction-*.json")
    an_hour_ahead = time.time() + 3600
    os.utime(intent, (an_hour_ahead, an_hour_ahead))
    monkeypatch.setattr(lake_compactions_seen, "_sleep", lambda seconds: pytest.fail("waited"))
    run_gate(con, DAY, WarehouseSettings())
    ok, said = _rebuild_results(con)[DAY]
    assert not ok and f"gpu_samples date={DAY}: 8,640 readings when built, 17,280 now" in said
    assert f"a compaction of gpu_samples/date={DAY}/host=node-01 was under way or cut short" in said
