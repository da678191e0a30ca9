"""Embodied (manufacturing) carbon and capital, amortised per GPU-hour.

Per GPU-hour embodied carbon, gCO2e:
    (gpu_kgco2e + server_kgco2e / gpus_per_server) * 1000 / (lifetime_years * 8760)
Every hour a GPU is in the fleet carries this amount, busy or idle, read or not: the hardware
ages, and was paid for, either way, until its lifetime is over: from purchased_on + lifetime_years (the inventory's;
lifetime_years x 8760 hours, the same hours the rate divides by) the footprint and the capital
are paid off and an hour carries none of either (`amortised_share`; the hour the lifetime ends
in, its share); nor does an hour before purchased_on (a GPU read before its inventory date). A GPU without a purchase date is amortised without end. Idle hours' share therefore lands on the `unallocated` line (or is spread over
the jobs, by `idle_policy`): a lightly used fleet shows a large idle embodied line, which is
the point. Hours with no telemetry row are counted too (reports.accounts.fleet_hours: the
inventory says which GPUs are in the fleet on a day): charging only the hours a collector recorded
made a GPU whose collector was down half the day cost half its day of capital and embodied carbon,
which no coverage figure gives back. Those hours carry no energy and are counted apart
(unmetered_gpu_hours), so the charge is visible.

Defaults per GPU model (kgCO2e per GPU, cradle-to-gate), used when the inventory has none:
- A100 (any A100 name): 150. ../shared/data/README.md gives "A100 80GB ~143-150 kgCO2e";
  we take the top of that range.
- H100: 150. No per-GPU vendor figure was available to us. The H100 SXM die (TSMC 4N,
  814 mm^2) is about the A100's size (826 mm^2) with the same 80 GB of HBM, so we carry the
  A100 figure over rather than invent precision; the 30% embodied uncertainty covers it.
- H200: 180. Same die as H100 with 141 GB HBM3e instead of 80 GB; memory is a large part of
  an accelerator's footprint, so we add 20% as a stated assumption, not a measurement.
- Anything else: CarbonSettings.embodied_kgco2e_per_gpu (150).
Server without GPUs: CarbonSettings.embodied_kgco2e_per_server = 2,750, the middle of the
README's "8-GPU server without its GPUs ~2,500-3,000 kgCO2e", shared by gpus_per_server GPUs.
"""

from __future__ import annotations

import polars as pl

HOURS_PER_YEAR = 8760.0

EMBODIED_KGCO2E_BY_MODEL_PREFIX = {
    "NVIDIA A100": 150.0,
    "NVIDIA H100": 150.0,
    "NVIDIA H200": 180.0,
}


def default_gpu_embodied_kgco2e(gpu_model: str | None, fallback_kg: float, overrides: dict[str, float] | None = None) -> float:
    """The manufacturing footprint of one GPU, kgCO2e: settings override, model table, fallback."""
    model = gpu_model or ""
    if overrides and model in overrides:
        return overrides[model]
    for prefix, kg in EMBODIED_KGCO2E_BY_MODEL_PREFIX.items():
        if model.startswith(prefix):
            return kg
    return fallback_kg


def embodied_gco2e_per_gpu_hour(gpu_kg: float, server_kg: float, gpus_per_server: int, lifetime_years: float) -> float:
    """Amortised manufacturing carbon of one GPU and its share of the server, gCO2e per hour."""
    if lifetime_years <= 0 or gpus_per_server <= 0:
        raise ValueError(f"lifetime_years={lifetime_years}, gpus_per_server={gpus_per_server}: both must be > 0")
    return (gpu_kg + server_kg / gpus_per_server) * 1000.0 / (lifetime_years * HOURS_PER_YEAR)


def capital_usd_per_gpu_hour(gpu_usd: float, server_usd: float, gpus_per_server: int, lifetime_years: float) -> float:
    """Straight-line depreciation of one GPU and its share of the server, $ per hour."""
    if lifetime_years <= 0 or gpus_per_server <= 0:
        raise ValueError(f"lifetime_years={lifetime_years}, gpus_per_server={gpus_per_server}: both must be > 0")
    return (gpu_usd + server_usd / gpus_per_server) / (lifetime_years * HOURS_PER_YEAR)


def amortised_share(lifetime_years: pl.Expr) -> pl.Expr:
    """Per GPU-hour (columns hour_at, purchased_on): the share of the hour inside the GPU's
    amortisation, purchased_on (00:00 UTC) to lifetime_years x 8760 hours later; 1 without a
    purchase date. An hour before the purchase is outside it (0): a GPU read before its inventory
    date was charged those hours on top of the whole lifetime's, more than its footprint."""
    start = pl.col("purchased_on").cast(pl.Datetime("us", "UTC"))
    end = start + pl.duration(hours=lifetime_years * HOURS_PER_YEAR)
    hour_end = pl.col("hour_at") + pl.duration(hours=1)
    inside_us = (pl.min_horizontal(end, hour_end) - pl.max_horizontal(start, pl.col("hour_at"))).dt.total_microseconds()
    return pl.when(pl.col("purchased_on").is_null()).then(1.0).otherwise((inside_us / 3.6e9).clip(0.0, 1.0))
