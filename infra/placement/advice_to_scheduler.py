#!/usr/bin/env python3
"""Turn joulehouse's signed placement-advice file into scheduler commands, without joulehouse.

    advice_to_scheduler.py placement-advice.json --public-key joulehouse-ed25519.pub --format slurm
    advice_to_scheduler.py placement-advice.json --public-key joulehouse-ed25519.pub --format kubernetes

Checks the ed25519 signature over the canonical body (json.dumps(body, sort_keys=True,
separators=(",", ":"), ensure_ascii=False), UTF-8) with the site's public key, the kind and
schema version, and the validity window (valid_from <= now < valid_until, as the node agent
checks a config; --at TIME checks another moment, e.g. an archived file), then prints one command
per line (pipe to `sh` to apply them):
- slurm: `scontrol update NodeName=<host> Weight=<w>` with w = 1 + (100 - node_preference):
  Slurm allocates the lowest weight first, so the best-cooled nodes fill first; a node all of whose
  GPUs are to be parked is drained (`State=DRAIN Reason=...`), since Slurm parks nodes, not GPUs.
- kubernetes: `kubectl label node <host> --overwrite joulehouse.io/placement-preference=<p>
  joulehouse.io/parked-gpus=<n> joulehouse.io/cheapest-hours=<HH.HH...> joulehouse.io/cleanest-hours=<...>`
  for a nodeAffinity `preference` or a descheduler to read (hours of the next day, UTC).
Since the output goes to a shell, a host name that is not a plain node name (letters, digits,
'-', '_', '.') refuses the whole file: nothing is printed.
Needs only Python 3.9+ and the `cryptography` package. Exit 1: a bad signature, kind or version,
a file outside its validity window, an unsafe host name, an unreadable file; 2: bad arguments.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime as dt
import json
import os
import re
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

KIND = "joulehouse-placement-advice"
SCHEMA_VERSIONS = {1}
# A Slurm NodeName / Kubernetes node name as it may appear in a shell line unquoted: no shell
# metacharacter, no space, and no leading '-' (scontrol/kubectl would read it as an option).
SAFE_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class AdviceRefused(Exception):
    """The file must not be turned into commands; the message says why, in one line."""


def verified_body(doc: dict, public_key_pem: bytes) -> dict:
    try:
        body, signature = doc["body"], base64.b64decode(doc["signature"]["value"], validate=True)
    except (KeyError, TypeError, binascii.Error) as exc:
        raise AdviceRefused(f"not a signed placement-advice file (no body or signature: {type(exc).__name__}: {exc})")
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    try:
        load_pem_public_key(public_key_pem).verify(signature, canonical)
    except InvalidSignature:
        raise AdviceRefused("the signature does not match the body (tampered, or another site's key)")
    except (ValueError, TypeError) as exc:  # not a PEM key, or not an ed25519 one
        raise AdviceRefused(f"the public key cannot check this signature ({exc})")
    if body.get("kind") != KIND or body.get("schema_version") not in SCHEMA_VERSIONS:
        raise AdviceRefused(f"kind {body.get('kind')!r} version {body.get('schema_version')!r} is not "
                            f"{KIND!r} version {sorted(SCHEMA_VERSIONS)}")
    return body


def parse_utc(text: str) -> dt.datetime:
    """An ISO 8601 time with its zone ('Z' or an offset), as UTC; ValueError otherwise."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.utcoffset() is None:
        raise ValueError(f"{text!r} has no time zone; add Z for UTC")
    return moment.astimezone(dt.timezone.utc)


def check_validity(body: dict, when: dt.datetime) -> None:
    """Refuse advice outside [valid_from, valid_until) at `when`: the same window, and the same
    bounds, as the node agent's check of a config (joulehouse.collectors.config_contract, which this
    script cannot import: it runs where joulehouse is not installed)."""
    try:
        valid_from, valid_until = parse_utc(body["valid_from"]), parse_utc(body["valid_until"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AdviceRefused(f"the body has no readable validity window ({type(exc).__name__}: {exc})")
    shown = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    if when < valid_from:
        raise AdviceRefused(f"not valid until {shown(valid_from)}; it is {shown(when)} (check another time with --at)")
    if when >= valid_until:
        raise AdviceRefused(f"expired at {shown(valid_until)}; it is {shown(when)} (check another time with --at)")


def check_node_names(body: dict) -> None:
    """Refuse the file when a host name could do anything but name a node in a shell line."""
    unsafe = [host for host in body["hosts"] if not SAFE_NODE_NAME.fullmatch(host)]
    if unsafe:
        raise AdviceRefused(f"host name {unsafe[0]!r} is not a plain node name (letters, digits, '-', '_', '.'); "
                            f"{len(unsafe)} such host(s), no commands printed")


def slurm_commands(body: dict) -> list[str]:
    lines = []
    for host, entry in sorted(body["hosts"].items()):
        gpus = entry["gpus"].values()
        if gpus and all(g["action"] == "park" for g in gpus):
            lines.append(f'scontrol update NodeName={host} State=DRAIN Reason="joulehouse: consolidation parks all its GPUs"')
        else:
            lines.append(f"scontrol update NodeName={host} Weight={1 + (100 - int(entry['node_preference']))}")
    return lines


def _hours_label(hours: list[str]) -> str:
    labels = [parse_utc(h).strftime("%H") for h in hours]  # "2026-06-12T02:00:00Z" -> "02": digits only
    return ".".join(labels)


def kubernetes_commands(body: dict) -> list[str]:
    site = body["sites"].get(body["site"], {})
    lines = []
    for host, entry in sorted(body["hosts"].items()):
        parked = sum(1 for g in entry["gpus"].values() if g["action"] == "park")
        labels = [f"joulehouse.io/placement-preference={int(entry['node_preference'])}", f"joulehouse.io/parked-gpus={parked}"]
        if site.get("cheapest_hours_utc"):
            labels.append(f"joulehouse.io/cheapest-hours={_hours_label(site['cheapest_hours_utc'])}")
        if site.get("cleanest_hours_utc"):
            labels.append(f"joulehouse.io/cleanest-hours={_hours_label(site['cleanest_hours_utc'])}")
        lines.append(f"kubectl label node {host} --overwrite " + " ".join(labels))
    return lines


def commands(doc: dict, public_key_pem: bytes, fmt: str, when: dt.datetime) -> list[str]:
    """Every command for `doc`, or AdviceRefused: all checks come before the first line is printed."""
    body = verified_body(doc, public_key_pem)
    check_validity(body, when)
    try:
        check_node_names(body)
        return slurm_commands(body) if fmt == "slurm" else kubernetes_commands(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AdviceRefused(f"the body is not placement advice as expected ({type(exc).__name__}: {exc})")


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise AdviceRefused(f"cannot read the {what} {path}: {exc.strerror or exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("advice", help="placement-advice.json")
    parser.add_argument("--public-key", required=True, help="the site's ed25519 public key (PEM)")
    parser.add_argument("--format", choices=("slurm", "kubernetes"), required=True)
    parser.add_argument("--at", metavar="TIME", help="check the validity window at this ISO 8601 time "
                        "(e.g. 2026-06-12T00:00:00Z) instead of now")
    args = parser.parse_args(argv)
    try:
        when = dt.datetime.now(dt.timezone.utc) if args.at is None else parse_utc(args.at)
    except ValueError as exc:
        print(f"placement advice: --at {args.at!r} is not an ISO 8601 time with a zone ({exc})", file=sys.stderr)
        return 2
    try:
        try:
            doc = json.loads(_read(args.advice, "advice file"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise AdviceRefused(f"{args.advice} is not JSON ({exc})")
        if not isinstance(doc, dict):
            raise AdviceRefused(f"{args.advice} is not a signed placement-advice file (not a JSON object)")
        lines = commands(doc, _read(args.public_key, "public key"), args.format, when)
    except AdviceRefused as exc:
        print(f"placement advice: {exc}", file=sys.stderr)
        return 1
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:
        # a reader that stopped early (| head): the rest is not wanted; no traceback, and the
        # interpreter's own flush at exit must not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
