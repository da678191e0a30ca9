"""The signed placement-advice file: where schedulers should put tomorrow's work, beside the signed config.

`export_placement_advice(con, day, settings, placement)` writes `<out_dir>/placement-advice.json`
(what schedulers poll) and `placement-advice-<day>.json`, signed as the recommended config is
(ed25519 over the canonical body, `collectors.config_contract.sign_document`, the same key).
Consumable without joulehouse: `infra/placement/advice_to_scheduler.py` verifies it with the
public key and prints Slurm node weights and Kubernetes node labels (infra/placement/README.md).

Body (`schema_version` 1, `kind` "joulehouse-placement-advice"):
    generated_at, valid_from, valid_until   UTC ISO-8601 (the next day, as the config's window)
    site, day (the pipeline day), advice_for_day (the day after)
    hosts  {host: {"node_preference": 0-100, "gpus": {gpu_uuid: {
              gpu_model, preference (0-100, higher: place work here first), action
              ("prefer" | "normal" | "avoid" | "park"), theta_c_per_w, thermal_rank_in_model,
              expected_saving_kwh_per_day, latency_risk, reason}}}}
    sites  {site: {forecast_basis, deferrable_energy_kwh, deferrable_gpu_hours,
              cheapest_hours_utc [..], cleanest_hours_utc [..], expected_cost_saving_usd,
              expected_carbon_saving_kgco2e}}
Preference: the thermal ranking within the GPU model (rank 1, the best cooled per watt, 100; the
worst 0; no thermal fit, or a GPU alone in its model, 50); 'park' (0) for a GPU the consolidation plan frees, 'avoid' for a thermal
outlier above its model's median, 'prefer' for the best-cooled third. A node's preference is the mean
of its GPUs' that are not parked. A site's cheapest hours of the next day come from that day's
prices at the site's own price source ([tco] site_prices, else the fleet's; each source read once
however many sites share it) where they are known
the day before (reports.export.day_ahead: a day-ahead market file holding the next day, after the
market cleared, or a time-of-use tariff); otherwise, and for the cleanest
hours always (grid intensity has no day-ahead market), a persistence forecast: the pipeline day's
hourly price and grid intensity per site (rpt_context_hourly) a day later. `forecast_basis` says
which; the saving is what the pipeline day's deferrable jobs would have saved in its cheapest /
cleanest hours (rpt_shift_opportunity_daily). Only hours below the day's highest are listed: under a
flat price or one grid intensity all day none is (lowest_hours), and `forecast_basis` says so.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from joulehouse.collectors.config_contract import (
    ConfigError, dump_config, format_utc, load_config_document, load_private_key, sign_document, verify_document,
)
from joulehouse.collectors.writer import write_bytes_atomic
from joulehouse.reports.accounts.settings import TcoSettings, site_price_settings
from joulehouse.reports.export.day_ahead import NextDayPrices, next_day_prices
from joulehouse.reports.export.settings import ExportSettings
from joulehouse.reports.warehouse_tables import read_day

SCHEMA_VERSION = 1
KIND = "joulehouse-placement-advice"
ADVICE_NAME = "placement-advice.json"


def _preferences(thermal: pl.DataFrame | None, energy: pl.DataFrame | None) -> dict[tuple[str, str], dict[str, Any]]:
    """(host, uuid) -> thermal preference fields, for every GPU the day saw."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if energy is not None:
        for r in energy.select("host", "gpu_uuid", "gpu_model").unique().iter_rows(named=True):
            out[(r["host"], r["gpu_uuid"])] = {"gpu_model": r["gpu_model"], "preference": 50, "action": "normal",
                                               "theta_c_per_w": None, "thermal_rank_in_model": None,
                                               "reason": "no thermal fit for this GPU: neutral"}
    if thermal is None:
        return out
    sizes = thermal.group_by("gpu_model").len().to_dicts()
    n_by_model = {r["gpu_model"]: r["len"] for r in sizes}
    for r in thermal.iter_rows(named=True):
        n, rank = n_by_model[r["gpu_model"]], r.get("rank_in_model")
        if rank is None:
            continue
        # a GPU alone in its model has nothing to be ranked against: neutral, not first
        preference = 50 if n == 1 else round(100 * (1 - (rank - 1) / (n - 1)))
        worse = r.get("is_outlier") and (r.get("theta_vs_model_pct") or 0) > 0
        action = "avoid" if worse else ("prefer" if rank <= math.ceil(n / 3) else "normal")
        out[(r["host"], r["gpu_uuid"])] = {
            "gpu_model": r["gpu_model"], "preference": int(preference), "action": action,
            "theta_c_per_w": round(float(r["theta_c_per_w"]), 4) if r.get("theta_c_per_w") is not None else None,
            "thermal_rank_in_model": int(rank),
            "reason": f"thermal rank {rank} of {n} {r['gpu_model']} (theta {float(r['theta_c_per_w']):.3f} C/W)"
                      + ("; runs hot for its model: give it light work" if worse else ""),
        }
    return out


def _hosts(prefs: dict[tuple[str, str], dict[str, Any]], extra: pl.DataFrame | None) -> dict[str, Any]:
    savings: dict[tuple[str, str], dict[str, Any]] = {}
    if extra is not None:
        for r in extra.iter_rows(named=True):
            key = (r["host"], r["gpu_uuid"])
            entry = savings.setdefault(key, {"saving": 0.0, "park": False, "risk": None, "detail": []})
            entry["saving"] += float(r["expected_saving_kwh_per_day"] or 0.0)
            if r["kind"] == "consolidation":
                entry["park"], entry["risk"] = True, r.get("latency_risk")
            entry["detail"].append(r["detail"])
    hosts: dict[str, Any] = {}
    for (host, uuid), p in sorted(prefs.items()):
        s = savings.get((host, uuid), {})
        # + 0.0: a tiny negative share of a placement's saving rounds to -0.0, which the file printed
        gpu = {**p, "expected_saving_kwh_per_day": round(s.get("saving", 0.0), 3) + 0.0, "latency_risk": s.get("risk")}
        if s.get("park"):
            gpu.update(preference=0, action="park", reason="consolidation frees it: " + s["detail"][0])
        hosts.setdefault(host, {"gpus": {}})["gpus"][uuid] = gpu
    for entry in hosts.values():
        kept = [g["preference"] for g in entry["gpus"].values() if g["action"] != "park"]
        entry["node_preference"] = round(sum(kept) / len(kept)) if kept else 0
    return hosts


# An hour is listed as cheaper (cleaner) when it is at least this share below the day's highest:
# smaller differences are inside any forecast's error and move work for nothing.
LOWER_BY_RATIO = 0.02


def lowest_hours(hours: pl.DataFrame, column: str, n: int) -> pl.DataFrame:
    """The `n` hours lowest in `column`, only those at least LOWER_BY_RATIO below the day's highest:
    under a flat price (or one grid intensity all day) no hour is cheaper, and the first six of the
    day were listed as the cheapest, for a scheduler to move work into for nothing; one hour at
    80.01 USD/MWh among 23 at 80.00 is as flat."""
    known = hours.drop_nulls(column)
    if known.is_empty():
        return known
    highest = known[column].max()
    return known.filter(pl.col(column) <= highest - LOWER_BY_RATIO * abs(highest)).sort(column, "hour_at").head(n)


def _sites(context: pl.DataFrame | None, shift: pl.DataFrame | None, day: dt.date, window_hours: int,
           known_at: Callable[[str], NextDayPrices]) -> dict[str, Any]:
    """known_at(site): the next day's prices at the site's own price source."""
    sites: dict[str, Any] = {}
    if context is None:
        return sites
    persistence = f"persistence: the hours of {day.isoformat()} one day later"
    for site in sorted(context["site"].unique().to_list()):
        hours = context.filter(pl.col("site") == site)
        ahead = lambda frame: [format_utc(t + dt.timedelta(days=1)) for t in frame["hour_at"].to_list()]  # noqa: E731
        known = known_at(site)
        if known.prices is not None:
            basis = f"cheapest hours: {known.basis}; cleanest hours: {persistence}"
            cheapest = [format_utc(t) for t in lowest_hours(known.prices, "price_usd_per_mwh", window_hours)["hour_at"]]
        else:
            basis = f"{persistence} (prices: {known.basis})"
            cheapest = ahead(lowest_hours(hours, "price_usd_per_mwh", window_hours))
        cleanest = ahead(lowest_hours(hours, "intensity_gco2e_per_kwh", window_hours))
        unmoved = [what for what, listed in (("price", cheapest), ("grid intensity", cleanest)) if not listed]
        if unmoved:
            basis += f"; no hour lower than the others in {' or '.join(unmoved)}: none listed"
        entry: dict[str, Any] = {
            "forecast_basis": basis,
            "cheapest_hours_utc": sorted(cheapest),
            "cleanest_hours_utc": sorted(cleanest),
            "deferrable_energy_kwh": 0.0, "deferrable_gpu_hours": 0.0,
            "expected_cost_saving_usd": 0.0, "expected_carbon_saving_kgco2e": 0.0,
        }
        if shift is not None and "site" in shift.columns:
            own = shift.filter(pl.col("site") == site)
            entry.update(
                deferrable_energy_kwh=round(float(own["energy_kwh"].fill_null(0).sum()), 3),
                deferrable_gpu_hours=round(float(own["gpu_hours"].fill_null(0).sum()), 3),
                expected_cost_saving_usd=round(float(own["cost_saving_usd"].fill_null(0).sum()), 4),
                expected_carbon_saving_kgco2e=round(float(own["carbon_saving_gco2e"].fill_null(0).sum()) / 1000, 4))
        sites[site] = entry
    return sites


def build_advice(con, day: dt.date, *, site: str, now: dt.datetime, validity_hours: float,
                 window_hours: int, tco: TcoSettings | None = None, data_dir: Path | None = None) -> dict[str, Any]:
    """The unsigned advice body for `day` (see the module doc). `tco`, `data_dir`: where the day's
    prices came from (None: persistence for the prices too)."""
    thermal, _ = read_day(con, "fct_thermal_gpu", day)
    energy, _ = read_day(con, "fct_gpu_energy_hourly", day, ("host", "gpu_uuid", "gpu_model"))
    extra, _ = read_day(con, "fct_recommendation_extra", day)
    context, _ = read_day(con, "rpt_context_hourly", day)
    shift, _ = read_day(con, "rpt_shift_opportunity_daily", day)
    if context is not None:
        context = context.with_columns(pl.col("hour_at").dt.convert_time_zone("UTC"))
    valid_from = now.astimezone(dt.timezone.utc).replace(microsecond=0)
    return {
        "schema_version": SCHEMA_VERSION, "kind": KIND,
        "generated_at": format_utc(valid_from), "valid_from": format_utc(valid_from),
        "valid_until": format_utc(valid_from + dt.timedelta(hours=validity_hours)),
        "site": site, "day": day.isoformat(), "advice_for_day": (day + dt.timedelta(days=1)).isoformat(),
        "hosts": _hosts(_preferences(thermal, energy), extra),
        "sites": _sites(context, shift, day, window_hours, next_day_prices_by_source(day, valid_from, tco, data_dir)),
    }


def next_day_prices_by_source(day: dt.date, now: dt.datetime, tco: TcoSettings | None,
                              data_dir: Path | None) -> Callable[[str], NextDayPrices]:
    """known_at(site): the next day's prices at the site's own price source
    (reports.export.day_ahead.next_day_prices), each source read once however many sites share it:
    every site of a fleet on one price file or tariff had re-read and re-parsed it (50 sites, 50
    parses of the file)."""
    if tco is None:
        return lambda site: next_day_prices(day, now, None)
    read_once = functools.cache(lambda settings, folder: next_day_prices(day, now, settings, folder))
    return lambda site: read_once(*site_price_settings(tco, site, data_dir))


def export_placement_advice(con, day: dt.date, settings: ExportSettings, *, window_hours: int,
                            now: dt.datetime, private_key_path: str | Path | None = None,
                            tco: TcoSettings | None = None, data_dir: Path | None = None) -> Path:
    """Sign and write the day's advice (dated file, and the one schedulers poll unless it holds a
    later day's); returns the path written last. `tco` and `data_dir` as the day's cost accounting
    had them, so the next day's day-ahead prices are read from the same price file."""
    body = _known_numbers(build_advice(con, day, site=settings.site, now=now, validity_hours=settings.validity_hours,
                                       window_hours=window_hours, tco=tco, data_dir=data_dir))
    key = load_private_key(private_key_path or settings.private_key_path)
    data = dump_config(sign_document(body, key))
    out_dir = Path(settings.out_dir)
    dated = out_dir / f"placement-advice-{day.isoformat()}.json"
    write_bytes_atomic(dated, data)
    latest = out_dir / ADVICE_NAME
    with open(out_dir / ".export.lock", "a+b") as lock:  # the config's lock: one check-and-replace at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        newest_day = _advice_day(latest, key)
        if newest_day is not None and newest_day > day.isoformat():
            return dated  # a backfilled day: the later day's advice stays the one schedulers read
        write_bytes_atomic(latest, data)
    return latest


def _advice_day(path: Path, key) -> str | None:
    """body.day of our advice at `path`, None when there is none or `key` did not sign it. By
    file names alone, any later-dated file (empty, unsigned) kept every new day's advice from the
    file schedulers poll."""
    try:
        body = verify_document(load_config_document(path), key.public_key())
    except (OSError, ConfigError):
        return None
    day = body.get("kind") == KIND and body.get("day")
    return day if isinstance(day, str) else None


def _known_numbers(value: Any) -> Any:
    """`value` with every NaN or infinite number made None (unknown): JSON has neither, and one
    NaN theta or saving made the whole day's advice fail to sign."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _known_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_known_numbers(v) for v in value]
    return value
