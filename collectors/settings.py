"""The one settings object: a frozen dataclass tree loaded from a TOML file plus environment.

Nothing is read at import time. `load_settings(path)` reads the file (if any), then applies
`JOULEHOUSE_<SECTION>__<FIELD>=value` overrides (for example
`JOULEHOUSE_CARBON__CARBON_PRICE_USD_PER_TCO2E=80`), and returns a `Settings`. Each function
of the library takes only its own section.

This module lives at the bottom layer (collectors) because the node side needs its sections
too; it imports only the standard library.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

ENV_PREFIX = "JOULEHOUSE_"


class SettingsError(ValueError):
    """A settings file or override names an unknown key or carries a value of the wrong type."""


@dataclass(frozen=True)
class LakeSettings:
    """Where the Parquet lake lives (a folder, or an fsspec URL such as s3://bucket/lake)."""

    path: str = "var/lake"


@dataclass(frozen=True)
class CollectorSettings:
    """Node collector: sampling, spooling and Parquet rolling."""

    interval_s: float = 1.0
    spool_dir: str = "var/spool"
    spool_flush_interval_s: float = 2.0
    roll_interval_s: float = 300.0
    roll_max_rows: int = 500_000
    ipmi_host: str = "127.0.0.1"
    ipmi_port: int = 623
    ipmi_user: str = "admin"
    ipmi_password: str = ""
    ipmi_timeout_s: float = 5.0
    ipmi_retries: int = 2
    prometheus_url: str = "http://127.0.0.1:9090"
    prometheus_step_s: float = 30.0
    # Pause between IPMI retries (doubles each time); the BMC is slow, not the network.
    ipmi_backoff_s: float = 0.5
    # Prometheus: one query's HTTP timeout, bounded retries with doubling backoff.
    prometheus_timeout_s: float = 10.0
    prometheus_retries: int = 3
    prometheus_backoff_s: float = 1.0
    # DCGM watermark (JSON): where the last range written ends, so a restart resumes there.
    dcgm_state_path: str = "var/state/dcgm-watermark.json"
    # Extra PromQL label matchers for the dcgm-exporter series, e.g. '{job="dcgm-exporter"}'.
    dcgm_selector: str = ""
    # Ranges stop this far behind now: the newest scrapes may still be landing in Prometheus
    # (dcgm-exporter's default collect interval is 30 s).
    dcgm_settle_s: float = 60.0
    # With no watermark yet, the first range starts this long ago.
    dcgm_initial_lookback_s: float = 3600.0
    # The BMC is slow (each ipmitool call opens an RMCP+ session) and server power changes
    # slowly: read it on its own interval, in its own thread, into node_samples.
    ipmi_interval_s: float = 5.0
    # How often the DCGM source writes the ranges Prometheus has settled (it is its own spool).
    dcgm_sync_interval_s: float = 60.0


@dataclass(frozen=True)
class WarehouseSettings:
    """DuckDB warehouse over the lake and the data-quality rules."""

    db_path: str = "var/warehouse.duckdb"
    inventory_path: str = ""
    # A gap between two readings longer than this is not bridged by the power integral.
    max_gap_s: float = 10.0
    # Readings above this multiple of the power limit are physically implausible.
    max_power_over_limit_ratio: float = 1.5
    min_temp_c: float = -20.0
    max_temp_c: float = 125.0
    # Tolerated host clock running ahead of the analytics side before a row counts as "future".
    max_clock_skew_s: float = 300.0
    # Energy-counter intervals up to this long are bridged: the counter measured the gap's
    # energy exactly; longer ones are not (a reboot can hide in them and restart the count).
    max_counter_gap_s: float = 900.0
    # Power above this is implausible for any one GPU when its power limit is unknown.
    max_power_abs_w: float = 3000.0
    # BMC (IPMI) and facility meters are read every 5 s to 1 min: gaps up to this are bridged.
    max_meter_gap_s: float = 120.0
    threads: int = 2
    memory_limit: str = "4GB"
    # The build checks and pairs the readings of this many hosts at a time (8 hosts x 8 GPUs at
    # 1 Hz: 5.5 M readings a day), so the rows one sort holds stay within memory_limit.
    build_hosts_per_batch: int = 8
    # Before the build, rewrite each host's day in the (local, central) lake as one file per
    # dataset: the collector's 300 s files take 44-52% more bytes and build 18% slower
    # (warehouse/lake_compact.py). Off for an object-store lake or one the pipeline may not write.
    compact_lake: bool = True
    # Engine of the heavy daily SQL (hourly GPU energy, power-model sums, daily rollup):
    # "duckdb" (one machine, the default) or "spark" (the optional [spark] extra; warehouse/SCALING.md).
    engine: str = "duckdb"
    # Spark master URL when engine = "spark" (local[N] on one machine, spark://host:7077 on a cluster).
    spark_master: str = "local[2]"
    # Days of clean readings (stg_gpu_samples) the warehouse file keeps, counted back from the
    # newest day built; older days' readings are deleted by the build (the lake keeps them, and
    # every day's energy, checks, fits and sums stay). 0 keeps every day. At 1 Hz a GPU adds
    # about 2.7 MB a day to the file, so without it the file grows with history; it must cover
    # the days the models re-read (Settings checks it against them).
    readings_retention_days: int = 35


@dataclass(frozen=True)
class ModelSettings:
    """Power-model fitting and its quality gate."""

    holdout_fraction: float = 0.3
    # ... but never more than this many days: a 28-day window would otherwise hold out 8.4 days,
    # re-read sample by sample every day, where the last days already say how the model does.
    holdout_max_days: float = 2.0
    max_holdout_mape_pct: float = 10.0
    drift_warning_pct: float = 20.0
    min_samples: int = 600
    # Days of history (ending on the fitted day) a fit sees; sums make longer windows cheap.
    history_days: int = 28
    # One sample stands for at most this long when integrating energy (longer gaps are not bridged).
    max_sample_interval_s: float = 60.0
    # Grid of exponents alpha of (f/f_max) in the dynamic term: alpha_min + alpha_step*i, i < alpha_count.
    alpha_min: float = 1.0
    alpha_step: float = 0.25
    alpha_count: int = 11
    # Without clock readings alpha is not identifiable; utilisation saturates instead (any kernel
    # raises the clocks), so the dynamic term is act^gamma on this grid: gamma_min + step*i, i < count.
    activity_exponent_min: float = 0.2
    activity_exponent_step: float = 0.1
    activity_exponent_count: int = 14
    # ... and, still without clocks, the dynamic power decays with this time constant (s; 0 = none)
    # after activity stops (P-state hold and the power sensor's averaging): grid of candidates.
    activity_hold_grid_s: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
    # Job-id prefixes of workloads that run on several GPU models: their runs are paired to check
    # the cross-model job-energy prediction (fct_job_energy_prediction).
    cross_model_job_profiles: tuple[str, ...] = ()


@dataclass(frozen=True)
class CarbonSettings:
    """Carbon accounting (GHG Protocol scope 2, both methods, plus embodied)."""

    # Grid region of GPUs the inventory does not place (dim_gpu.region wins where it has one).
    region: str = "FR"
    grid_file: str = ""
    default_grid_gco2e_per_kwh: float = 400.0
    default_pue: float = 1.3
    market_contract_kwh_per_day: float = 0.0
    market_contract_gco2e_per_kwh: float = 0.0
    residual_mix_gco2e_per_kwh: float = 450.0
    embodied_kgco2e_per_gpu: float = 150.0
    embodied_kgco2e_per_server: float = 2750.0
    gpus_per_server: int = 8
    lifetime_years: float = 5.0
    # How idle / unallocated energy is treated: "unallocated" line or spread "proportional".
    idle_policy: str = "unallocated"
    grid_uncertainty_pct: float = 10.0
    pue_uncertainty_pct: float = 5.0
    embodied_uncertainty_pct: float = 30.0
    carbon_price_usd_per_tco2e: float = 0.0
    # Electricity Maps column: "direct" (combustion, GHG Protocol scope 2) or "lca" (life cycle).
    grid_intensity_basis: str = "direct"
    # Market-based contracts (PPA/REC) per site and period: "site|YYYY-MM|kwh|gco2e_per_kwh"
    # (a month's volume, spread evenly over its days) or "site|YYYY-MM-DD|kwh|gco2e_per_kwh".
    market_contracts: tuple[str, ...] = ()
    # Per-model embodied overrides, "NVIDIA H100 80GB HBM3=150" (kgCO2e per GPU).
    embodied_kgco2e_by_gpu_model: tuple[str, ...] = ()
    # IT energy: a host-hour's BMC (IPMI) energy replaces its GPUs' board energy when the BMC
    # covered at least this share of the hour (reports.accounts.it_energy_basis); below it, GPU energy only.
    node_energy_min_coverage_ratio: float = 0.9
    # Time-shifting estimate: hours a deferrable job may move from its own (0 = anywhere in its UTC day).
    shift_window_hours: int = 0


@dataclass(frozen=True)
class TcoSettings:
    """Total cost of ownership: prices, tariffs, demand charges, capital."""

    price_file: str = ""
    price_node: str = "PJM-RTO"
    tariff_file: str = ""
    flat_price_usd_per_mwh: float = 80.0
    demand_charge_usd_per_kw_month: float = 15.0
    green_premium_ratio: float = 0.18
    green_premium_below_renewable_pct: float = 30.0
    density_surcharge_25_35kw_ratio: float = 0.12
    density_surcharge_over_35kw_ratio: float = 0.28
    rack_kw: float = 20.0
    gpu_capex_usd: float = 30000.0
    server_capex_usd: float = 60000.0
    lifetime_years: float = 5.0
    operations_ratio_of_capex_per_year: float = 0.1
    # Time-of-use tariffs are written in the utility's local wall-clock time.
    tariff_timezone: str = "America/New_York"
    gpus_per_server: int = 8
    # Grid region whose renewable share (Electricity Maps file) drives the green premium.
    region: str = "FR"
    grid_file: str = ""
    default_pue: float = 1.3
    # What no job held: an explicit "unallocated" line, or spread "proportional" to job energy.
    idle_policy: str = "unallocated"
    # As CarbonSettings: BMC energy is the IT energy where it covered at least this share of the hour.
    node_energy_min_coverage_ratio: float = 0.9
    # As CarbonSettings: hours a deferrable job may move for the cheapest-hours estimate (0 = its day).
    shift_window_hours: int = 0
    # Relative uncertainty of the hourly price (+/-, %) for the cost range: an assumption (a
    # day-ahead price against the real-time one it stands for), not a measurement.
    price_uncertainty_pct: float = 20.0


@dataclass(frozen=True)
class RecommendSettings:
    """Choosing power limits and clocks per workload class."""

    max_slowdown_latency_pct: float = 2.0
    max_slowdown_throughput_pct: float = 10.0
    max_slowdown_background_pct: float = 25.0
    # USD a slowdown of throughput work costs per GPU-hour it adds, beyond its energy: 0 means such work
    # is valued by finishing within max_slowdown_throughput_pct (the bound is the constraint). Set it
    # (e.g. the GPU-hour's rental price) when a slower job really costs that: a saturated queue, a deadline.
    value_of_time_usd_per_gpu_hour: float = 0.0
    do_not_touch: tuple[str, ...] = ()
    limit_step_w: float = 25.0
    # The lowest cap recommended, as a share of the device's default limit (TDP): DESIGN.md's
    # P_limit = gamma * TDP with gamma >= 0.5. Below it a cap trades large slowdowns for the last
    # few percent of energy, and the model is extrapolating far from the power it was fitted on.
    min_limit_share_of_default: float = 0.5
    # Share of each GPU model's eligible GPUs (stable choice by UUID) left at the default as controls, so
    # the next days can measure what the settings saved against like GPUs; 0 applies everything.
    holdout_share: float = 0.25
    # What a server draws beyond its GPUs (CPUs, memory, fans, PSU losses), W per GPU, where its BMC
    # does not say (fct_node_reconciliation_hourly measures it where it does): a capped job runs
    # longer and the server draws that for longer too, so it counts in the energy-to-solution.
    host_overhead_w_per_gpu: float = 0.0


@dataclass(frozen=True)
class ExportSettings:
    """The signed recommended-config file."""

    out_dir: str = "var/export"
    private_key_path: str = "var/keys/joulehouse-ed25519.pem"
    validity_hours: float = 48.0
    # The site named in the signed body, so an agent can tell one site's file from another's.
    site: str = "site-a"
    # Where node agents fetch the config (a folder or fsspec URL); empty: the export folder is served as is.
    publish_url: str = ""


@dataclass(frozen=True)
class AgentSettings:
    """The node agent that applies recommended configs."""

    public_key_path: str = "var/keys/joulehouse-ed25519.pub.pem"
    config_url: str = ""
    poll_interval_s: float = 300.0


# Days of readings the recommendation outcome re-reads (models/outcome.py: a change's 14 days
# after and the 7 before it, plus the day measured); the power fit re-reads models.history_days.
OUTCOME_READING_DAYS = 22


@dataclass(frozen=True)
class Settings:
    lake: LakeSettings = field(default_factory=LakeSettings)
    collector: CollectorSettings = field(default_factory=CollectorSettings)
    warehouse: WarehouseSettings = field(default_factory=WarehouseSettings)
    models: ModelSettings = field(default_factory=ModelSettings)
    carbon: CarbonSettings = field(default_factory=CarbonSettings)
    tco: TcoSettings = field(default_factory=TcoSettings)
    recommend: RecommendSettings = field(default_factory=RecommendSettings)
    export: ExportSettings = field(default_factory=ExportSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)

    def __post_init__(self) -> None:
        kept = self.warehouse.readings_retention_days
        needed = max(self.models.history_days, OUTCOME_READING_DAYS)
        if kept < 0 or 0 < kept < needed:
            raise SettingsError(
                f"[warehouse].readings_retention_days = {kept}: expected 0 (keep every day) or at least "
                f"{needed}, the days of readings the models re-read (models.history_days = "
                f"{self.models.history_days}, the recommendation outcome {OUTCOME_READING_DAYS})"
            )


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Turn a TOML or environment value into the field's declared type, or say why not."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{where}: expected a list, got {value!r}")
        item = typing.get_args(annotation)[0]  # tuple[float, ...]: each item a float
        return tuple(_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if annotation is bool:
        if isinstance(value, str):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise SettingsError(f"{where}: expected true/false, got {value!r}")
    if annotation in (int, float, str):
        try:
            if annotation is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return annotation(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{where}: expected {annotation.__name__}, got {value!r}") from None
    raise SettingsError(f"{where}: unsupported field type {annotation!r}")


def _section_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def settings_from_mapping(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from a parsed TOML mapping, then apply JOULEHOUSE_* overrides from `env`."""
    sections = _section_types(Settings)
    merged: dict[str, dict[str, Any]] = {}
    for name, values in data.items():
        if name not in sections:
            raise SettingsError(f"unknown settings section [{name}]; expected one of {sorted(sections)}")
        if not isinstance(values, Mapping):
            raise SettingsError(f"[{name}] must be a table")
        merged[name] = dict(values)
    for key, raw in (env or {}).items():
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        section, _, field_name = key[len(ENV_PREFIX):].lower().partition("__")
        if section not in sections:
            raise SettingsError(f"{key}: unknown settings section {section!r}")
        merged.setdefault(section, {})[field_name] = raw
    built = {}
    for name, cls in sections.items():
        types_ = _section_types(cls)
        values = merged.get(name, {})
        unknown = set(values) - set(types_)
        if unknown:
            raise SettingsError(f"[{name}]: unknown keys {sorted(unknown)}; expected some of {sorted(types_)}")
        built[name] = cls(**{k: _coerce(v, types_[k], f"[{name}].{k}") for k, v in values.items()})
    return Settings(**built)


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the TOML file at `path` (optional) and the process environment (or `env`)."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise SettingsError(f"settings file {p} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"settings file {p} is not valid TOML: {exc}") from None
    return settings_from_mapping(data, os.environ if env is None else env)


def settings_to_toml(settings: Settings) -> str:
    """Write settings back as TOML text (what the demo saves beside its outputs)."""
    lines: list[str] = []
    for section in dataclasses.fields(settings):
        lines.append(f"[{section.name}]")
        for f in dataclasses.fields(getattr(settings, section.name)):
            value = getattr(getattr(settings, section.name), f.name)
            lines.append(f"{f.name} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def toml_value(value: Any) -> str:
    """One value as TOML (bool, number, string, or a list of them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def replace_section(settings: Settings, **sections: Any) -> Settings:
    """Return a copy of `settings` with whole sections replaced (tests and the demo use this)."""
    return dataclasses.replace(settings, **sections)


__all__ = [
    "AgentSettings", "CarbonSettings", "CollectorSettings", "ExportSettings", "LakeSettings",
    "ModelSettings", "RecommendSettings", "Settings", "SettingsError", "TcoSettings",
    "WarehouseSettings", "load_settings", "replace_section", "settings_from_mapping",
    "settings_to_toml", "toml_value",
]
