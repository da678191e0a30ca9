"""The one settings object of the analytics side: every layer's sections, assembled.

Each layer owns its sections (collectors: lake, collector, agent; warehouse; models: models,
recommend; reports: carbon, tco, export); this module puts them into one `Settings` read from
one TOML file plus `JOULEHOUSE_<SECTION>__<FIELD>=value` overrides (for example
`JOULEHOUSE_CARBON__CARBON_PRICE_USD_PER_TCO2E=80`), and checks what spans two sections. Each
function of the library takes only its own section. The node reads its sections without this
module (collectors.settings.load_node_settings): importing it imports every layer's settings.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator, Mapping

from pydantic import Field, model_validator

from joulehouse.collectors.lakefs import is_url
from joulehouse.collectors.settings import (AgentSettings, CollectorSettings, LakeSettings, NodeSettings, SettingsError,
                                            SettingsRoot, replace_section, setting_source, settings_to_toml, toml_value,
                                            write_settings_file)
from joulehouse.models.settings import (OUTCOME_READING_DAYS, ModelSettings, PlacementSettings, RecommendSettings,
                                        SensitivitySettings)
from joulehouse.reports.accounts.settings import CarbonSettings, TcoSettings, parse_site_prices
from joulehouse.reports.export.settings import ExportSettings
from joulehouse.warehouse.settings import WarehouseSettings


class Settings(SettingsRoot):
    """Every section, in the order `joulehouse settings` prints them."""

    lake: LakeSettings = Field(default_factory=LakeSettings)
    collector: CollectorSettings = Field(default_factory=CollectorSettings)
    warehouse: WarehouseSettings = Field(default_factory=WarehouseSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    carbon: CarbonSettings = Field(default_factory=CarbonSettings)
    tco: TcoSettings = Field(default_factory=TcoSettings)
    recommend: RecommendSettings = Field(default_factory=RecommendSettings)
    sensitivity: SensitivitySettings = Field(default_factory=SensitivitySettings)
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    export: ExportSettings = Field(default_factory=ExportSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)

    @model_validator(mode="after")
    def _readings_cover_what_the_models_reread(self) -> Settings:
        kept = self.warehouse.readings_retention_days
        needed = max(self.models.history_days, OUTCOME_READING_DAYS)
        if 0 < kept < needed:
            raise ValueError(
                f"[warehouse].readings_retention_days = {kept}: expected 0 (keep every day) or at least "
                f"{needed}, the days of readings the models re-read (models.history_days = "
                f"{self.models.history_days}, the recommendation outcome {OUTCOME_READING_DAYS})")
        return self


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the TOML file at `path` (optional) and the process environment (or `env`); SettingsError
    names the first settings that are wrong."""
    return Settings.load(path, env)


def _input_files(settings: Settings, signing_key: bool) -> Iterator[tuple[tuple[str, str], str]]:
    """((section, field), path) of every input file the settings name; "" is none configured."""
    if signing_key:
        yield ("export", "private_key_path"), settings.export.private_key_path
    yield ("warehouse", "inventory_path"), settings.warehouse.inventory_path
    yield ("carbon", "grid_file"), settings.carbon.grid_file
    yield ("tco", "grid_file"), settings.tco.grid_file
    yield ("tco", "price_file"), settings.tco.price_file
    yield ("tco", "tariff_file"), settings.tco.tariff_file
    for own in parse_site_prices(settings.tco.site_prices).values():  # a site's own tariff or price file
        yield ("tco", "site_prices"), own.tariff_file or own.price_file
    for entry in settings.models.clock_sweep_files:  # "PATTERN|PATH" (models.clock_exponent)
        yield ("models", "clock_sweep_files"), entry.partition("|")[2].strip() or entry


def input_file_problems(settings: Settings, path: str | Path | None = None,
                        env: Mapping[str, str] | None = None, *, signing_key: bool = False) -> str | None:
    """One line naming each configured local input file that is not a regular file (the setting,
    its path and where it was set: the environment variable, else the settings file at `path`),
    or None. URLs (s3://...) are left to their readers. Said before any work: a steps' reader
    would meet it 20-40 s into a run, inside Airflow, in words that name no setting.
    `signing_key`: the [export] key too, which only a run needs (its export task signs with it,
    minutes in, after the build and the fits, and the report waits on that task)."""
    environ = os.environ if env is None else env
    problems = []
    for (section, field), file in _input_files(settings, signing_key):
        if field != "private_key_path" and (not file or is_url(file)):  # the key is read as a local file
            continue
        where = setting_source((section, field), environ, path)
        try:
            mode = os.stat(file).st_mode
        except FileNotFoundError:
            problem = "does not exist"
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        else:
            if stat.S_ISREG(mode):
                continue
            problem = "is a folder; expected a file" if stat.S_ISDIR(mode) else "is not a regular file"
        if field == "private_key_path":
            fix = f"create one with `joulehouse keys generate --out {Path(file).parent}`, or fix the path"
        elif field in ("clock_sweep_files", "site_prices"):
            fix = "fix the path or drop the entry"
        else:
            fix = f'fix the path, or {field} = "" for none'
        problems.append(f"[{section}].{field} {file}{where}: {problem}; {fix}")
    return "; ".join(problems) or None


__all__ = [
    "AgentSettings", "CarbonSettings", "CollectorSettings", "ExportSettings", "LakeSettings", "ModelSettings",
    "NodeSettings", "OUTCOME_READING_DAYS", "PlacementSettings", "RecommendSettings", "SensitivitySettings", "Settings", "SettingsError", "TcoSettings",
    "WarehouseSettings", "input_file_problems", "load_settings", "replace_section", "settings_to_toml", "toml_value",
    "write_settings_file",
]
