"""Slurm's compressed host lists and TRES strings, as `sacct` prints them.

Host lists: `node-[01-04,07]` is node-01..node-04 and node-07 (zero padding kept from the range's
first bound), several bracket groups multiply (`r[1-2]n[1-2]`: r1n1 r1n2 r2n1 r2n2), commas
outside brackets separate names. A list is refused past MAX_HOSTS names, so a hostile line
(`n[0-999999999]`) cannot exhaust memory.

TRES: `billing=8,cpu=8,gres/gpu=2,gres/gpu:a100=2,mem=64G,node=1`; the GPU count is `gres/gpu`
(all of the job's GPUs, over all its nodes), or the sum of the typed `gres/gpu:<type>` entries
where the untyped one is missing.
"""

from __future__ import annotations

import re

MAX_HOSTS = 65_536
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class HostListError(ValueError):
    """A host list or TRES string Slurm would not print; the message says which part."""


def expand_hostlist(text: str) -> list[str]:
    """`text` (Slurm's compressed form) as host names, in order, without duplicates."""
    text = text.strip()
    if not text:
        raise HostListError("empty host list")
    hosts: list[str] = []
    for item in _split_top_level(text):
        for host in _expand_item(item):
            if host not in hosts:
                hosts.append(host)
            if len(hosts) > MAX_HOSTS:
                raise HostListError(f"host list {text[:60]!r} names more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostListError(f"nested '[' in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostListError(f"']' without '[' in host list {text!r}")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostListError(f"'[' not closed in host list {text!r}")
    items.append(text[start:])
    if any(not item for item in items):
        raise HostListError(f"empty name in host list {text!r}")
    return items


def _expand_item(item: str) -> list[str]:
    """One name with zero or more bracket groups."""
    open_at = item.find("[")
    if open_at < 0:
        if not _NAME.match(item):
            raise HostListError(f"host name {item!r} has characters Slurm does not use")
        return [item]
    close_at = item.index("]", open_at)
    prefix, group, rest = item[:open_at], item[open_at + 1:close_at], item[close_at + 1:]
    if prefix and not _NAME.match(prefix):
        raise HostListError(f"host name {prefix!r} has characters Slurm does not use")
    tails = _expand_item(rest) if rest else [""]
    names = []
    for number in _expand_group(group, item):
        names.extend(f"{prefix}{number}{tail}" for tail in tails)
        if len(names) > MAX_HOSTS:
            raise HostListError(f"host list item {item[:60]!r} names more than {MAX_HOSTS} hosts")
    return names


def _expand_group(group: str, item: str) -> list[str]:
    numbers = []
    for part in group.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise HostListError(f"range {part!r} in {item!r} is not N or N-M")
        first, last = match.group(1), match.group(2) or match.group(1)
        lo, hi = int(first), int(last)
        if hi < lo:
            raise HostListError(f"range {part!r} in {item!r} runs backwards")
        if hi - lo + 1 > MAX_HOSTS:
            raise HostListError(f"range {part!r} in {item!r} names more than {MAX_HOSTS} hosts")
        width = len(first)
        numbers.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return numbers


def gpus_in_tres(text: str) -> int:
    """The GPU count of an AllocTRES string (0 when it names none)."""
    untyped, typed = None, 0
    for entry in filter(None, (e.strip() for e in text.split(","))):
        key, sep, value = entry.partition("=")
        if not sep:
            raise HostListError(f"TRES entry {entry!r} is not name=value")
        if key != "gres/gpu" and not key.startswith("gres/gpu:"):
            continue
        if not value.isdigit():
            raise HostListError(f"TRES {key}={value!r}: expected a whole number of GPUs")
        if key == "gres/gpu":
            untyped = int(value)
        else:
            typed += int(value)
    return untyped if untyped is not None else typed
