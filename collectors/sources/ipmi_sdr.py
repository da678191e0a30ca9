"""The server's readings in `ipmitool sdr elist`: its text parsed into sensors, and the server's
power, inlet and exhaust temperatures and fans picked among them by name and unit (ipmi.py reads
them each poll). A sensor without a number is None, never 0; a reading that cannot be told to be
the server's own (a part's sensor, two candidates that disagree) is None, not a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(.*?)\s*$")


@dataclass(frozen=True)
class SensorReading:
    name: str
    status: str
    value: float | None
    unit: str


def parse_sdr_elist(text: str) -> list[SensorReading]:
    """Parse `ipmitool sdr elist` lines `name | id | status | entity | reading [unit]`.
    A reading without a number ("no reading", "disabled", "Not Readable") becomes None."""
    sensors = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5 or not parts[0]:
            continue
        name, status, reading = parts[0], parts[2].lower(), parts[4]
        match = _NUMBER.match(reading)
        if match is None or status in ("ns", "na", "disabled"):
            sensors.append(SensorReading(name, status, None, ""))
            continue
        sensors.append(SensorReading(name, status, float(match.group(1)), match.group(2).lower()))
    return sensors


_TOTAL_POWER = re.compile(r"pwr\s*consumption|total\s*power|sys(tem)?\s*power|node\s*power|power\s*meter|input\s*power", re.I)
# One power supply's input ("PS1 Input Power", "PSU2 Input Power"): the server draws their sum. Taken
# as the server's total, the first supply's alone was half the power of a server with two.
_SUPPLY_INPUT = re.compile(r"^\s*(ps|psu|pws|power\s*supply)\s*_?\d+\b.*\b(input|in)\b.*\bpower\b", re.I)
_INLET = re.compile(r"inlet|intake|ambient|front\s*panel\s*temp", re.I)
_EXHAUST = re.compile(r"exhaust|outlet", re.I)
# A part of the server named first ("GPU Total Power", "PSU1 Inlet Temp", "CPU1 VR Outlet Temp"): its
# own reading, not the server's. Taken first in SDR order, a GPU board's 2,400 W stood for the
# server's 4,100 W, and a supply's 41 C for the air coming in.
_COMPONENT = re.compile(r"^\s*(cpu|gpu|psu?|pws|vr|dimm|mem|nic|hba|pch|p\d|ps\d|riser|m\.?2|nvme|ssd|hdd|bp)"
                        r"(?![a-z])", re.I)


def _the_one(sensors: list[SensorReading]) -> float | None:
    """The value of the one sensor of the server among `sensors` (parts' sensors left out); None
    when none is left or the others disagree (two candidates: which is the server's is unknown)."""
    server = [s for s in sensors if not _COMPONENT.search(s.name)]
    values = {s.value for s in server}
    return server[0].value if len(values) == 1 else None


def pick_readings(sensors: Sequence[SensorReading]) -> dict[str, float | None]:
    """Choose the node readings among the SDR sensors by name and unit (units decide: a sensor
    named 'Inlet' that reads in Watts is not a temperature)."""
    readable = [s for s in sensors if s.value is not None]
    watts = [s for s in readable if s.unit.startswith("watt")]
    supplies = [s for s in sensors if _SUPPLY_INPUT.search(s.name)]
    # a total named but not read this poll leaves the server's power unknown: the one other Watts
    # sensor is then a component (a CPU's 180 W stood for a 1,240 W server)
    named_total = [s for s in sensors if _TOTAL_POWER.search(s.name) and s not in supplies
                   and (s.value is None or s.unit.startswith("watt"))]
    total = [s for s in named_total if s in watts]
    if named_total:
        sdr_power = _the_one(total) if total else None
    elif supplies:
        # the supplies' inputs summed; one not read leaves the server's total unknown (NULL), not lower
        read = [s for s in supplies if s.value is not None and s.unit.startswith("watt")]
        sdr_power = sum(s.value for s in read) if len(read) == len(supplies) else None
    else:
        sdr_power = watts[0].value if len(watts) == 1 else None
    temps = [s for s in readable if s.unit.startswith("degrees c")]
    # several of the server's own (Inlet Temp 1, 2): the coolest air in, the hottest out
    inlet = min((s.value for s in temps if _INLET.search(s.name) and not _COMPONENT.search(s.name)), default=None)
    exhaust = max((s.value for s in temps if _EXHAUST.search(s.name) and not _COMPONENT.search(s.name)), default=None)
    fans = [s.value for s in readable if s.unit.startswith("rpm")]
    return {
        "sdr_power_w": sdr_power,
        "inlet_temp_c": inlet,
        "exhaust_temp_c": exhaust,
        "fan_rpm_avg": sum(fans) / len(fans) if fans else None,
    }
