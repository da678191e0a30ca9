"""The signed recommended-config file that node agents apply (ARCHITECTURE.md, "The recommended-config file").

`export_config` turns one day's `fct_recommendation` rows into the body defined by
`collectors.config_contract`, gated on model quality (reports.export.selection): a GPU model whose power model did not
pass its gate that day (`fct_power_model.passed_gate`) is left out, and so is a model with no
fit at all, each with the reason written into the file. A limit above the device default is
never exported (it would widen, not cap): that GPU is listed in `excluded_gpus` with the reason,
as is one with no limit recommended. A GPU recommended to stay at its device default (no lock)
is exported as an explicit setting at that default: see reports.export.selection for why.

Output: `<out_dir>/recommended-config.json` (what agents poll) and
`<out_dir>/recommended-config-<day>.json`, both written atomically. Ed25519 signatures are
deterministic, so re-running a day with the same `now` gives byte-identical files.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
from pathlib import Path
from typing import Any

import polars as pl

from joulehouse.collectors.config_contract import (
    CONFIG_KIND, CONFIG_NAME, SCHEMA_VERSION, ConfigError, MalformedConfig, canonical_body, dump_config, format_utc,
    load_config_document, load_private_key, parse_gpu_setting, sign_config, verify_signature,
)
from joulehouse.reports.export.settings import ExportSettings
from joulehouse.collectors.writer import write_bytes_atomic
from joulehouse.reports.export.selection import exclusion_reason, gate_by_model, known_number, limit_verdict
from joulehouse.reports.warehouse_tables import read_day

RECOMMENDATION_COLUMNS = (
    "host", "gpu_uuid", "gpu_model", "workload_class", "power_limit_w", "default_limit_w",
    "locked_sm_clock_min_mhz", "locked_sm_clock_max_mhz", "expected_saving_pct",
    "expected_slowdown_pct", "reason",
)


class ExportError(RuntimeError):
    """The day has nothing that can be exported; the message says what is missing."""


def _round(value: Any, digits: int) -> float | None:
    """Fixed decimals keep the signed text short and the same on every run (see the contract)."""
    number = known_number(value)
    return None if number is None else round(number, digits)


def _clock(value: Any) -> int | None:
    number = known_number(value)
    return None if number is None else int(round(number))


def _setting(row: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """One GPU's entry of body.hosts from its row, checked as the agent will read it
    (config_contract.parse_gpu_setting): (entry, None), or (None, why it is left out). Signed
    unchecked, one odd row (a 0 W limit, a lone clock, an unknown workload class) made the whole
    file fail at signing, and the agents kept yesterday's config."""
    entry = {
        "gpu_model": row["gpu_model"],
        "workload_class": row["workload_class"],
        "power_limit_w": _round(row["power_limit_w"], 1),
        "locked_sm_clock_min_mhz": _clock(row["locked_sm_clock_min_mhz"]),
        "locked_sm_clock_max_mhz": _clock(row["locked_sm_clock_max_mhz"]),
        "expected_saving_pct": _round(row["expected_saving_pct"], 2),
        "expected_slowdown_pct": _round(row["expected_slowdown_pct"], 2),
    }
    try:
        parse_gpu_setting(row["host"], row["gpu_uuid"], entry)
    except MalformedConfig as exc:
        return None, f"not a setting the agent can apply: {exc}"
    return entry, None


def build_body(
    recommendations: pl.DataFrame, gate: dict[str, str | None], *, day: dt.date, site: str,
    now: dt.datetime, validity_hours: float,
) -> dict[str, Any]:
    """The unsigned body for one day (pure: frame and verdicts in, dict out)."""
    hosts: dict[str, dict[str, Any]] = {}
    excluded_models: dict[str, str] = {}
    excluded_gpus: list[dict[str, str]] = []
    for row in recommendations.sort(["host", "gpu_uuid"], nulls_last=True).iter_rows(named=True):
        model = row["gpu_model"]
        if not row["host"] or not row["gpu_uuid"]:
            # the file is keyed by host and GPU: a row without them names nothing to set
            excluded_gpus.append({"host": row["host"] or "", "gpu_uuid": row["gpu_uuid"] or "",
                                  "reason": "the recommendation names no host or GPU uuid"})
            continue
        why = exclusion_reason(gate, model, day)
        if why is not None:
            excluded_models[model] = why
            continue
        kind, reason = limit_verdict(row)  # the rule the report counts by (reports.export.selection)
        entry = None
        if kind is not None:
            entry, reason = _setting(row)
        if entry is None:
            excluded_gpus.append({"host": row["host"], "gpu_uuid": row["gpu_uuid"], "reason": reason})
            continue
        hosts.setdefault(row["host"], {})[row["gpu_uuid"]] = entry
    valid_from = now.astimezone(dt.timezone.utc).replace(microsecond=0)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": CONFIG_KIND,
        "generated_at": format_utc(valid_from),
        "valid_from": format_utc(valid_from),
        "valid_until": format_utc(valid_from + dt.timedelta(hours=validity_hours)),
        "site": site,
        "day": day.isoformat(),
        "hosts": hosts,
        "excluded_gpu_models": [{"gpu_model": m, "reason": r} for m, r in sorted(excluded_models.items())],
        "excluded_gpus": excluded_gpus,
    }


def export_config(
    con, day: dt.date | str, settings: ExportSettings, *, now: dt.datetime | None = None,
    private_key_path: str | Path | None = None,
) -> Path:
    """Sign and write the day's recommended config as `recommended-config-<day>.json` and, unless
    the file agents poll already holds a later day's, as `recommended-config.json`; returns the
    path agents poll, or the dated one when a later day's stays in place. `now` (UTC, default the
    clock) opens the validity window of `settings.validity_hours`."""
    day = dt.date.fromisoformat(str(day)) if not isinstance(day, dt.date) else day
    now = now or dt.datetime.now(dt.timezone.utc)
    recommendations, missing = read_day(con, "fct_recommendation", day, RECOMMENDATION_COLUMNS)
    if recommendations is None:
        raise ExportError(f"cannot export {day}: {missing}")
    models, models_missing = read_day(con, "fct_power_model", day, ("gpu_model", "passed_gate", "gate_reason"))
    body = build_body(
        recommendations, gate_by_model(models, models_missing), day=day, site=settings.site, now=now,
        validity_hours=settings.validity_hours,
    )
    key = load_private_key(private_key_path or settings.private_key_path)
    out_dir = Path(settings.out_dir)
    dated = out_dir / f"recommended-config-{day.isoformat()}.json"
    latest = out_dir / CONFIG_NAME
    body = after_earlier_export(body, (dated, latest), key)
    doc = sign_config(body, key)
    data = dump_config(doc)
    write_bytes_atomic(dated, data)
    # The scheduler's run and a backfill may export at once: one check-and-replace at a time.
    with open(out_dir / ".export.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        newest_day = _day_of(latest, key)
        if newest_day is not None and newest_day > day.isoformat():
            # A backfill or re-run of an older day: the newer day's config stays the one agents
            # poll (replacing it would hand them an expired file, and they would roll back).
            return dated
        write_bytes_atomic(latest, data)
    return latest


def after_earlier_export(body: dict[str, Any], earlier: tuple[Path, ...], key) -> dict[str, Any]:
    """`body`, made newer than the day's earlier export where it differs from it.

    generated_at is the day's window opening, not the clock, so that a re-run gives the same file.
    But a re-run with other settings gives another body at the same generated_at, which every
    agent that took the first one refuses as a replay (collectors/agent_replay.py): a corrected
    recommendation could not reach the fleet before the next day. So a body that differs from the
    day's earlier export (signed by this key: a file anyone could edit sets no time) is generated
    one second after it; the same body keeps the earlier generated_at, and the same bytes.

    The earlier export is the newest of the `earlier` files that holds this day: the dated file,
    and the file agents poll, which still holds the day when someone deleted the dated one."""
    found = [doc for doc in (_our_export(path, key) for path in earlier)
             if doc is not None and doc[0]["body"].get("day") == body["day"]]
    if not found:
        return body
    earlier_doc, earlier_at = max(found, key=lambda doc: doc[1])
    ours = {k: v for k, v in json.loads(canonical_body(body)).items() if k != "generated_at"}
    theirs = {k: v for k, v in earlier_doc["body"].items() if k != "generated_at"}
    if ours == theirs:
        return {**body, "generated_at": format_utc(earlier_at)}
    at = dt.datetime.fromisoformat(body["generated_at"].replace("Z", "+00:00"))
    if at > earlier_at:
        return body
    return {**body, "generated_at": format_utc(earlier_at + dt.timedelta(seconds=1))}


def _our_export(path: Path, key) -> tuple[dict[str, Any], dt.datetime] | None:
    """The export document at `path` and its generated_at, when it is there and signed by `key`."""
    try:
        doc = load_config_document(path)
        return doc, verify_signature(doc, key.public_key()).generated_at
    except (OSError, ConfigError):
        return None  # none, or not ours


def _day_of(path: Path, key) -> str | None:
    """body.day of our export at `path` (ISO date), None when there is none, it does not parse or
    `key` did not sign it: a planted file claiming day 9999-12-31 would otherwise keep every later
    export from the file agents poll, and the fleet would roll back when its config expired."""
    found = _our_export(path, key)
    day = None if found is None else found[0]["body"].get("day")
    return day if isinstance(day, str) else None
