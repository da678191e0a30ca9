"""Which changes of a lake folder since a build its compactions explain, as the gate sees them.

A compaction rewrites a host's files of a day into one with the same rows
(warehouse/lake_compact.py; the DAG compacts day D+1 after D was built), so a plain comparison of
the files a build of D read with those there now calls every day stale. A change of files is
excused when every file that went is in its partition's compaction ledger (with its size and
modification time, as the build read it) and every file that came is what they were merged into,
and nothing else merged in could hold readings of D's window: each other file the ledger names as
merged into the same one is a change where its first and last reading (kept in the ledger) reach
into the window, or the ledger does not say them, or it lay in D's own folder. A late file of a
host that already reached across midnight, merged before any gate listed it, changed no host list
and no file the build read, and passed. A file rewritten under its own name (a re-import with
corrected readings, as many as before) is a change. Only a local lake keeps ledgers (an object
store is not compacted).

A compaction is not atomic to a reader: from its new file landing until its ledger line is written
a folder holds every reading twice, and until its old files are removed some twice. A gate that
finds a local folder changed looks at it once more (warehouse/lake_fingerprint.py), after waiting
for the compactions under way there (their intent files, younger than COMPACTION_WAIT_S) to end,
COMPACTION_WAIT_S a gate in all, so one caught half done, or one that ended between the listing and
the verdict, is no change. Left open: a compaction of the same folder that starts and ends within
that second look (a false 'rebuild', said again or not by the next gate); one cut short, or still
running after the wait, is named in the result (`compaction_intents`).
"""

from __future__ import annotations

import datetime as dt
import posixpath
import time
from collections.abc import Mapping
from pathlib import Path

from joulehouse.collectors import lakefs
from joulehouse.collectors.input_file import open_regular
from joulehouse.warehouse.lake_compact import INTENT_GLOB

# A partition's ledger holds a line per file compacted away: 288 a day at the collector's roll.
MAX_LEDGER_BYTES = 16 << 20
# A compaction's intent lives from its new file's writing to its old files' removal: seconds. The
# gate waits for one that is younger than this; an older one was cut short and waits for nobody.
COMPACTION_WAIT_S = 60.0
COMPACTION_POLL_S = 0.5
_sleep = time.sleep  # a test lets a compaction go on while the gate waits
_clock = time.monotonic  # and counts the time it waited


def reaches(times: tuple, start: dt.datetime, end: dt.datetime) -> bool:
    """Whether a file's readings ((first_at, last_at, _): its footer's or its ledger line's) may
    reach into [start, end]; times not known count as reaching."""
    first, last, _ = times
    return first is None or last is None or (first <= end and last >= start)


def compaction_intents(lake: str, folders: set[tuple[str, dt.date]]) -> list[str]:
    """The intents (warehouse/lake_compact.py) of the compactions under way or cut short in the
    host folders of `folders` ((dataset, date=) of a local lake), as paths under the lake."""
    root = Path(lake)
    return sorted(str(p.relative_to(root)) for dataset, date in folders
                  for p in root.glob(f"{dataset}/date={date.isoformat()}/*/{INTENT_GLOB}"))


def wait_ends_s() -> float:
    """When a wait for compactions that begins now ends, on `_clock` (s)."""
    return _clock() + COMPACTION_WAIT_S


def wait_for_compactions(lake: str, folders: set[tuple[str, dt.date]], until_s: float) -> None:
    """Return once no compaction in `folders` is under way, or at `until_s` (on `_clock`, from
    `wait_ends_s`): a gate passes the same end to each of its three days' waits, which each took
    COMPACTION_WAIT_S of their own (3 minutes a gate holding the warehouse's writer lock, for an
    intent that stayed young). An intent older than COMPACTION_WAIT_S is a compaction cut short (it
    stays until the partition's next compaction): no reason to wait; so is one dated more than that
    ahead (a clock set wrong, a lake restored with its times), which looked young to every gate
    for as long."""
    while _clock() < until_s:
        now_s = time.time()
        live = [p for p in compaction_intents(lake, folders)
                if now_s - COMPACTION_WAIT_S < _modified_s(Path(lake) / p) < now_s + COMPACTION_WAIT_S]
        if not live:
            return
        _sleep(max(0.0, min(COMPACTION_POLL_S, until_s - _clock())))


def _modified_s(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:  # gone since it was listed: its compaction is over
        return 0.0


def not_compacted(lake: str, built: list[dict], now: list[dict], window: tuple[dt.datetime, dt.datetime],
                  own_folder: bool) -> tuple[list[str], list[str]]:
    """(the files of `built` (as the build read them) that are gone or changed otherwise than by a
    compaction, then the files of `now` no compaction of them made; the files a compaction merged
    with those of `built` that `built` lacks, and whose readings may reach into `window`: any of
    the day's own folder, whose every file the build reads). ([], []) when the difference is
    compactions of the files read alone. Only a local lake keeps ledgers (an object store is not
    compacted)."""
    stamp = lambda f: (f["size_bytes"], f["modified_at"])  # noqa: E731
    before, after = {f["path"]: stamp(f) for f in built}, {f["path"]: stamp(f) for f in now}
    gone = [p for p in before if after.get(p) != before[p]]
    came = [p for p in after if before.get(p) != after[p]]
    if not gone and not came:
        return [], []
    if lakefs.is_url(lake):
        return gone + came, []
    merged_into, unexplained, ledgers = set(), [], {}
    for path in gone:
        folder = posixpath.dirname(path)
        if folder not in ledgers:  # a compacted host-day has hundreds of files gone, one ledger
            ledgers[folder] = _ledger(Path(lake) / folder / lakefs.COMPACTED_LEDGER_NAME)
        into = None if path in after else _merged_into(ledgers[folder], path, *before[path], after)
        if into is None:
            unexplained.append(path)
        else:
            merged_into.add(into)
    # The files a compaction took in beside those the build read: a late file of a host that already
    # reached across midnight, merged before any gate listed it, changed no host list and no file
    # the build read, and passed (review). Only its readings, kept in the ledger, can excuse it.
    intos_by_folder: dict[str, list[str]] = {}
    for into in sorted(merged_into):
        intos_by_folder.setdefault(posixpath.dirname(into), []).append(into)
    not_excused = set(unexplained)
    merged_in = [path for folder, intos in intos_by_folder.items()
                 for path, entry in _merged_inputs(ledgers[folder], intos, before)
                 if path not in not_excused and (own_folder or reaches(_ledger_times(entry), *window))]
    return list(dict.fromkeys(unexplained + [p for p in came if p not in merged_into])), merged_in


def _merged_inputs(ledger: Mapping[str, dict], intos: list[str], read: Mapping[str, tuple]) -> list[tuple[str, dict]]:
    """(path, ledger entry) of each file merged into one of `intos` (paths under the lake, in the
    folder of `ledger`), through earlier compactions of their inputs, that is not one of `read`
    (path -> (size, mtime) as a build read it): files the build never read. One walk of the
    ledger for all of `intos`: a walk per file merged into (a ledger naming each of 288 files read
    merged into its own) took 13 s a look at 16 MiB."""
    folder = posixpath.dirname(intos[0])
    inputs: dict[str, list[dict]] = {}
    for entry in ledger.values():
        inputs.setdefault(str(entry.get("into")), []).append(entry)
    found, seen, todo = [], set(), [posixpath.basename(into) for into in intos]
    while todo:
        for entry in inputs.get(todo.pop(), []):
            name = entry["name"]
            path = f"{folder}/{name}"
            if name in seen:  # a cycle in a hostile ledger, or an input of two intos reached before
                continue
            seen.add(name)
            if path in read and _as_read(entry, *read[path]):
                continue
            if name in inputs:  # itself the result of a compaction after the build: its inputs say
                todo.append(name)
            else:
                found.append((path, entry))
    return found


def _ledger_times(entry: Mapping[str, object]) -> tuple:
    """A ledger entry's (first_at, last_at, None), as a footer's; (None, None, None) where the
    ledger does not say (a line from before it kept the times, a value that is no time)."""
    try:
        first, last = (dt.datetime.fromisoformat(entry[k]) for k in ("first_at", "last_at"))
    except (KeyError, TypeError, ValueError):
        return None, None, None
    # readings that end before they begin are no file's (a corrupt or hand-made line): read as a
    # range, year 9999 to year 1 reached no window and excused a late file's readings of the day
    if first.tzinfo is None or last.tzinfo is None or first > last:
        return None, None, None
    return first, last, None


def _epoch_us(at: dt.datetime) -> int:
    return (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def _as_read(entry: Mapping[str, object], size_bytes: int, modified_at: dt.datetime) -> bool:
    """Whether a ledger entry is the very file a build read: its size and modification time (a
    rewrite in place of as many bytes, then compacted, passed on the size alone); a ledger line
    without the time excuses nothing."""
    mtime_ns = entry.get("mtime_ns")
    return entry.get("bytes") == size_bytes and isinstance(mtime_ns, int) and mtime_ns // 1000 == _epoch_us(modified_at)


def _merged_into(ledger: Mapping[str, dict], path: str, size_bytes: int, modified_at: dt.datetime,
                 present: Mapping[str, object]) -> str | None:
    """The file of `present` that `path` (under the lake, as the build read it) was merged into,
    following its partition's `ledger` (and later compactions of the result); None where the
    ledger does not say so."""
    folder = posixpath.dirname(path)
    entry = ledger.get(posixpath.basename(path))
    if entry is None or not _as_read(entry, size_bytes, modified_at):
        return None
    for _ in range(8):  # a compacted file compacted again: a short chain, never a cycle
        into = f"{folder}/{entry.get('into')}"
        if into in present:
            return into
        entry = ledger.get(posixpath.basename(into))
        if entry is None:
            return None
    return None


def _ledger(path: Path) -> dict[str, dict]:
    """{file name: its ledger entry} of a partition's compaction ledger; {} without one."""
    try:  # the lake is hostile input: a FIFO there would hold the gate, a huge file its memory
        with open(open_regular(path, "compaction ledger", OSError), "rb") as fh:
            text = fh.read(MAX_LEDGER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return {}
    return lakefs.parse_compaction_ledger(text)
