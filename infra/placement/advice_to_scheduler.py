#!/usr/bin/env python3
"""Turn joulehouse's signed placement-advice file into scheduler commands, without joulehouse.

    advice_to_scheduler.py placement-advice.json --public-key joulehouse-ed25519.pub --format slurm
    advice_to_scheduler.py placement-advice.json --public-key joulehouse-ed25519.pub --format kubernetes

Checks the ed25519 signature over the canonical body (json.dumps(body, sort_keys=True,
separators=(",", ":"), ensure_ascii=False), UTF-8) with the site's public key, and the kind and
schema version, then prints one command per line (pipe to `sh` to apply them):
- slurm: `scontrol update NodeName=<host> Weight=<w>` with w = 1 + (100 - node_preference):
  Slurm allocates the lowest weight first, so the best-cooled nodes fill first; a node all of whose
  GPUs are to be parked is drained (`State=DRAIN Reason=...`), since Slurm parks nodes, not GPUs.
- kubernetes: `kubectl label node <host> --overwrite joulehouse.io/placement-preference=<p>
  joulehouse.io/parked-gpus=<n> joulehouse.io/cheapest-hours=<HH.HH...> joulehouse.io/cleanest-hours=<...>`
  for a nodeAffinity `preference` or a descheduler to read (hours of the next day, UTC).
Needs only Python 3.9+ and the `cryptography` package. Exit 1 on a bad signature, kind or version.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key

KIND = "joulehouse-placement-advice"
SCHEMA_VERSIONS = {1}


def verified_body(doc: dict, public_key_pem: bytes) -> dict:
    body = doc["body"]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    try:
        load_pem_public_key(public_key_pem).verify(base64.b64decode(doc["signature"]["value"]), canonical)
    except InvalidSignature:
        raise SystemExit("placement advice: the signature does not match the body (tampered, or another site's key)")
    if body.get("kind") != KIND or body.get("schema_version") not in SCHEMA_VERSIONS:
        raise SystemExit(f"placement advice: kind {body.get('kind')!r} version {body.get('schema_version')!r} is not "
                         f"{KIND!r} version {sorted(SCHEMA_VERSIONS)}")
    return body


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
    return ".".join(h[11:13] for h in hours)  # "2026-06-12T02:00:00Z" -> "02"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("advice", help="placement-advice.json")
    parser.add_argument("--public-key", required=True, help="the site's ed25519 public key (PEM)")
    parser.add_argument("--format", choices=("slurm", "kubernetes"), required=True)
    args = parser.parse_args(argv)
    with open(args.advice, "rb") as fh:
        doc = json.load(fh)
    with open(args.public_key, "rb") as fh:
        body = verified_body(doc, fh.read())
    print("\n".join(slurm_commands(body) if args.format == "slurm" else kubernetes_commands(body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
