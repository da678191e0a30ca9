"""Wall-clock times of imported logs, to UTC, across daylight-saving changes.

A log written in local time without an offset (nvidia-smi's "2026/11/01 01:30:00.000", sacct's
"2026-11-01T01:30:00") cannot say which of two instants it means during the hour a zone repeats
when its clocks go back, and names no instant at all in the hour skipped when they go forward:
- a time in the skipped hour is refused (ValueError naming the zone): no clock in that zone ever
  read it, so the zone assumed for the log is wrong, or the log was edited. Python would silently
  move it by an hour, onto the instant of another reading;
- a time in the repeated hour is read as the first pass unless the log says otherwise. `LogClock`
  reads a log in its order: a reading whose first-pass instant lies about an hour behind the same
  GPU's previous reading, while its second-pass instant lies just after it, was taken after the
  clock went back. Taking every one as the first pass put the second pass's readings on the
  first pass's instants, where they were rejected as duplicates: an hour of readings lost.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

# No nvidia-smi --query-gpu log predates this (the query interface came with the 2012 drivers): a
# time before it is a clock that was never set (1970). One later than a day past now is a clock
# running ahead. Either would create a partition for a day nothing ran on.
EARLIEST_READING_AT = datetime(2010, 1, 1, tzinfo=timezone.utc)
LATEST_AHEAD = timedelta(days=1)
_TIMESTAMP_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")
# nvidia-smi's own format read without strptime, which took a quarter of an import's time; what
# this does not match, or names no date, goes through the formats above as before. ASCII digits
# only, as strptime reads them; a fraction of 7-9 digits (a log re-stamped in nanoseconds) is cut
# to microseconds, as fromisoformat cuts an ISO time's, where strptime refused every row of it
_NVIDIA_SMI_TIME = re.compile(r"([0-9]{4})/([0-9]{1,2})/([0-9]{1,2}) ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})"
                              r"(?:\.([0-9]{1,9}))?")
# A log's minutes whose offsets LogClock remembers; past this many it starts again. A log runs in
# time order, so its recent minutes are all it asks for again, and memory stays flat with its length
_OFFSET_MINUTES = 64


class SkippedLocalTime(ValueError):
    """A wall time in the hour a zone skips when its clocks go forward: no instant has it."""


def wall_time(raw: str) -> datetime:
    """A log's time as written: nvidia-smi's own format or ISO 8601; naive when it has no offset."""
    text = raw.strip()
    fast = _NVIDIA_SMI_TIME.fullmatch(text)
    if fast:
        year, month, day, hour, minute, second, fraction = fast.groups()
        try:
            return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                            int(fraction[:6].ljust(6, "0")) if fraction else 0)
        except ValueError:
            pass
    for fmt in _TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"timestamp {text!r} is neither 'YYYY/MM/DD HH:MM:SS.fff' nor ISO 8601") from None


def check_plausible(at: datetime, field: str, now: datetime) -> None:
    """ValueError naming `field` when `at` (UTC) is before any log or more than a day after `now`."""
    if at < EARLIEST_READING_AT:
        raise ValueError(f"{field}: {at.isoformat()} is before {EARLIEST_READING_AT.date()}, earlier than any log "
                         "this can be (a clock that was never set?)")
    if at > now + LATEST_AHEAD:
        raise ValueError(f"{field}: {at.isoformat()} is more than {LATEST_AHEAD.days} day after now "
                         f"({now.isoformat(timespec='seconds')}): a clock running ahead?")


def _instant(wall: datetime, zone: ZoneInfo, fold: int) -> datetime:
    return wall.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc)


def _passes(wall: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants a naive wall time names in `zone` (equal unless it is in a repeated hour);
    ValueError when it names none (the hour skipped when the clocks went forward)."""
    first = _instant(wall, zone, 0)
    if first.astimezone(zone).replace(tzinfo=None) != wall:
        raise SkippedLocalTime(f"{wall.isoformat(sep=' ')} never happened in {zone.key}: its clocks skipped that hour "
                         "going to daylight time (is the zone assumed for the log its own?)")
    return first, _instant(wall, zone, 1)


def local_timestamp(raw: str, assume_tz: ZoneInfo) -> datetime:
    """A log's time in UTC; without an offset, in `assume_tz` (a repeated hour: its first pass)."""
    wall = wall_time(raw)
    try:
        if wall.tzinfo is not None:
            return wall.astimezone(timezone.utc)
        return _passes(wall, assume_tz)[0]
    except OverflowError:
        raise ValueError(_beyond_dates(raw)) from None


def _beyond_dates(raw: str) -> str:
    # 9999-12-31T23:00-05:00 is in year 10000 in UTC: a row's reject reason, not the import's end
    return f"timestamp {raw.strip()!r} is in UTC beyond the dates a clock can show (years 1-9999)"


def second_pass(at: datetime, zone: ZoneInfo) -> datetime:
    """The later of the two UTC instants the wall time `zone` shows at `at` names (`at` itself
    outside a repeated hour)."""
    return _passes(at.astimezone(zone).replace(tzinfo=None), zone)[1]


def in_repeated_hour(at: datetime, zone: ZoneInfo) -> bool:
    """Whether the wall time `zone` shows at the instant `at` is one it shows twice."""
    first, second = _passes(at.astimezone(zone).replace(tzinfo=None), zone)
    return first != second


class LogClock:
    """Reads one log's times in the log's order, telling the two passes of a repeated hour apart
    by each stream's previous reading (module docstring). `ambiguous` counts readings in a
    repeated hour, `second_pass` those of them read as taken after the clock went back."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self.ambiguous = 0
        self.second_pass = 0
        self._last: dict[Hashable, datetime] = {}
        # wall minute -> its two passes' UTC offsets (None: skipped). Zones change their offset on
        # a whole minute (every change in tzdata since 2010, the earliest reading kept), so one
        # minute's offsets serve all its readings: the zone's arithmetic was a fifth of an import
        self._offsets: dict[datetime, tuple[timedelta, timedelta] | None] = {}

    def _passes(self, wall: datetime) -> tuple[datetime, datetime]:
        minute = wall.replace(second=0, microsecond=0)
        if minute not in self._offsets:
            if len(self._offsets) >= _OFFSET_MINUTES:
                self._offsets.clear()
            try:
                first, second = _passes(minute, self.zone)
            except SkippedLocalTime:
                self._offsets[minute] = None
            else:
                self._offsets[minute] = (minute - first.replace(tzinfo=None), minute - second.replace(tzinfo=None))
        offsets = self._offsets[minute]
        if offsets is None:
            return _passes(wall, self.zone)  # raises, naming the reading's own time
        return (wall - offsets[0]).replace(tzinfo=timezone.utc), (wall - offsets[1]).replace(tzinfo=timezone.utc)

    def utc(self, raw: str, stream: Hashable) -> datetime:
        try:
            return self._utc(raw, stream)
        except OverflowError:
            raise ValueError(_beyond_dates(raw)) from None

    def _utc(self, raw: str, stream: Hashable) -> datetime:
        wall = wall_time(raw)
        if wall.tzinfo is not None:
            instant = wall.astimezone(timezone.utc)
        else:
            first, second = self._passes(wall)
            instant = first
            if first != second:
                self.ambiguous += 1
                last = self._last.get(stream)
                # The pass nearer the stream's previous reading: the clock going back puts the first
                # pass about an hour behind it; a log slightly out of order stays a few seconds off.
                if last is not None and abs(second - last) < abs(first - last):
                    instant = second
                    self.second_pass += 1
        self._last[stream] = instant
        return instant
