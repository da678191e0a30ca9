"""Settings: typed, range-checked sections read from one TOML file plus environment overrides.

Each layer owns its sections: this module the node's ([lake], [collector], [agent]);
joulehouse.warehouse.settings, joulehouse.models.settings, joulehouse.reports.accounts.settings
and joulehouse.reports.export.settings the analytics'; joulehouse.settings assembles them all.
The node reads only its own (`load_node_settings`) and imports no analytics package.

What every section shares is here too: the `section` decorator (a frozen pydantic dataclass that
refuses unknown keys) and the range types (`Seconds`, `Ratio`, `PUE`, ...), declared in
collectors.settings_fields and re-exported here, and `SettingsRoot.load`, which reads the TOML
file, then the `JOULEHOUSE_<SECTION>__<FIELD>` environment overrides (pydantic-settings' TOML and
environment sources), and checks every value when it is read: a bad one is a SettingsError naming
the setting, the value and where it came from. Nothing is read at import time; a root built in
code (`Settings(lake=...)`) reads neither file nor environment. A number setting refuses a boolean
(pydantic would take TOML's `true` as 1), and a relative path in a location setting of the file is
the file's folder's (`RelativeToFile`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Mapping, Self

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import (BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict,
                               TomlConfigSettingsSource)

from joulehouse.collectors.input_file import read_bytes_at_most, regular_file
from joulehouse.collectors.settings_env import (ENV_DELIMITER, ENV_PREFIX, describe_errors, setting_source,
                                                unknown_variables)
# Re-exported: the analytics' settings modules declare their sections with these.
from joulehouse.collectors.settings_fields import (MAX_PUE, PUE, Count, Finite, Location, LocationOrNone, Names,
                                                   NonNegative, NonNegativeInt, NonNegativeList, Percent, Positive,
                                                   Ratio, RelativeToFile, Seconds, Text, relative_to_file, section)

# A settings file is a page of text; anything larger is a mistake (or an attack), refused unread.
MAX_FILE_BYTES = 1 << 20


class SettingsError(ValueError):
    """A settings file or override cannot be read, names an unknown key, or carries a value of the
    wrong type or out of its range; the message names the setting and where it came from."""


# A call's timeout or a pause between retries: at most an hour. Larger ones are typos, and past
# about 1e9 s the libraries that wait on them raise OverflowError mid-poll (ipmi_timeout_s =
# 1e308 lost the BMC's row of every poll, the collector exiting 0).
Timeout = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
Backoff = Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
# A Prometheus range step: whole seconds (the DCGM source refused 0.5 at start-up, after the
# settings had taken it, and its unit restarted every 5 s), at most an hour.
WholeSeconds = Annotated[float, Field(ge=1, le=3600, multiple_of=1, allow_inf_nan=False)]
Retries = Annotated[int, Field(ge=0, le=100)]
# How often the IPMI source asks a backed-off DCMI again: at most a day (a longer one is a typo, and
# its power_w would stay NULL that long after the BMC answered again).
DcmiRetryInterval = Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)]
# The least time a collector loop waits between reads or flushes: NVML refreshes a GPU's power
# reading every 20 ms or so, and `collect --interval 0.0001ms` (taken before) re-read it in a
# busy loop, against the unit's CPUQuota.
MIN_POLL_INTERVAL_S = 0.01
# How often a collector polls or flushes: at most an hour. A longer one records nothing usable
# (the energy bridges gaps of minutes) and makes `collect --max-polls 1` wait it out.
PollInterval = Annotated[float, Field(ge=MIN_POLL_INTERVAL_S, le=3600, allow_inf_nan=False)]
# How long a spool segment may stay before it is rolled into the lake: at most a day.
RollInterval = Annotated[float, Field(ge=MIN_POLL_INTERVAL_S, le=86400, allow_inf_nan=False)]
# How often the agent fetches the signed config: at least a second (`--interval 0.0001ms` was a busy
# loop hammering NVML and the config endpoint), at most a day (a revoked or expired config's caps
# stay on the GPUs until the next poll).
AGENT_POLL_MIN_S, AGENT_POLL_MAX_S = 1.0, 86400.0
AgentPollInterval = Annotated[float, Field(ge=AGENT_POLL_MIN_S, le=AGENT_POLL_MAX_S, allow_inf_nan=False)]
Port = Annotated[int, Field(ge=1, le=65535)]


@section
class LakeSettings:
    """Where the Parquet lake lives (a folder, or an fsspec URL such as s3://bucket/lake)."""

    path: Location = "var/lake"


@section
class CollectorSettings:
    """Node collector: sampling, spooling and Parquet rolling."""

    interval_s: PollInterval = Field(1.0, description="GPU sampling interval (NVML), s.")
    spool_dir: LocationOrNone = Field("", description="Local folder of the spool: readings not yet rolled into the lake (empty: beside\n"
                                         "the lake, <lake>/../spool; `collect --spool-dir` comes first).")
    spool_flush_interval_s: PollInterval = Field(2.0, description="How often the spool is flushed to disk, s.")
    roll_interval_s: RollInterval = Field(300.0, description="A Parquet file is rolled into the lake at least this often, s.")
    roll_max_rows: Count = Field(500_000, description="... or when it holds this many rows.")
    ipmi_host: Text = Field("127.0.0.1", description="The BMC read over IPMI (ipmitool -I lanplus).")
    ipmi_port: Port = 623
    ipmi_user: str = "admin"
    ipmi_password: str = Field("", description="Best given as JOULEHOUSE_COLLECTOR__IPMI_PASSWORD.")
    ipmi_timeout_s: Timeout = Field(5.0, description="One ipmitool call's timeout, s.")
    ipmi_retries: Retries = 2
    prometheus_url: Text = Field("http://127.0.0.1:9090", description="The Prometheus that scrapes dcgm-exporter.")
    prometheus_step_s: WholeSeconds = Field(30.0, description="Step of the DCGM range queries, s.")
    ipmi_backoff_s: Backoff = Field(
        0.5, description="Pause between IPMI retries (doubles each time), s; the BMC is slow, not the network.")
    ipmi_dcmi_silent_polls: Count = Field(
        3,
        description="A DCMI power reading that gets no answer while the SDR answers (older BMCs), or is refused\n"
                    "(not \"Invalid command\", which is no DCMI: not asked again), this many polls in a row is then\n"
                    "asked only every ipmi_dcmi_retry_interval_s; the SDR is still read every poll.")
    ipmi_dcmi_retry_interval_s: DcmiRetryInterval = Field(
        300.0,
        description="How often a backed-off DCMI power reading is asked again, s (never given up: a refusal in\n"
                    "the BMC's present state may clear).")
    prometheus_timeout_s: Timeout = Field(
        10.0, description="Prometheus: one query's HTTP timeout, s; bounded retries with doubling backoff.")
    prometheus_retries: Retries = 3
    prometheus_backoff_s: Backoff = 1.0
    dcgm_state_path: Location = Field(
        "var/state/dcgm-watermark.json",
        description="DCGM watermark (JSON): where the last range written ends, so a restart resumes there.")
    dcgm_selector: str = Field(
        "", description="Extra PromQL label matchers for the dcgm-exporter series, e.g. '{job=\"dcgm-exporter\"}'.")
    dcgm_settle_s: NonNegative = Field(
        60.0, description="Ranges stop this far behind now, s: the newest scrapes may still be landing in Prometheus\n"
                          "(dcgm-exporter's default collect interval is 30 s).")
    dcgm_initial_lookback_s: Seconds = Field(3600.0, description="With no watermark yet, the first range starts this long ago, s.")
    ipmi_interval_s: PollInterval = Field(
        5.0, description="The BMC is slow (each ipmitool call opens an RMCP+ session) and server power changes\n"
                         "slowly: read it on its own interval (s), in its own thread, into node_samples.")
    dcgm_sync_interval_s: PollInterval = Field(
        60.0, description="How often the DCGM source writes the ranges Prometheus has settled, s (it is its own spool).")

    @model_validator(mode="after")
    def _first_range_not_empty(self) -> CollectorSettings:
        # the first range runs from now - lookback to now - settle: shorter than a step, it was
        # empty at every poll, forever (no watermark is ever written), and DCGM recorded nothing
        if self.dcgm_initial_lookback_s < self.dcgm_settle_s + self.prometheus_step_s:
            raise ValueError(f"dcgm_initial_lookback_s = {self.dcgm_initial_lookback_s:g} must be at least "
                             f"dcgm_settle_s + prometheus_step_s = {self.dcgm_settle_s + self.prometheus_step_s:g}: "
                             "the first DCGM range would be empty at every poll")
        return self
    process_map_interval_s: PollInterval = Field(
        10.0, description="How often the NVML source's compute processes are mapped to their Slurm job or Kubernetes\n"
                          "pod (from /proc/<pid>/cgroup) into gpu_processes, s.")
    proc_root: Location = Field("/proc", description="The host's /proc, where the process map reads each pid's cgroup.")


@section
class AgentSettings:
    """The node agent that applies recommended configs."""

    public_key_path: Location = Field("var/keys/joulehouse-ed25519.pub.pem",
                                      description="The site's ed25519 public key: configs not signed with its pair are refused.")
    config_url: LocationOrNone = Field("", description="Where the agent fetches the signed config (a file path or URL).")
    site: str = Field("", max_length=200,
                      description="The site this node belongs to: a config made for another site is refused. "
                                  "Empty: any site whose configs the public key signs.")
    poll_interval_s: AgentPollInterval = Field(300.0, description="How often `agent run` fetches it, s.")
    # Per site, the generated_at of the last config applied: an older one is refused as a replay.
    state_path: Location = Field("var/state/agent-applied.json",
                                 description="Where the agent keeps, per site, the generated_at of the last config it "
                                             "applied (JSON, written atomically); an older config is refused as a replay.\n"
                                             "The SM clock locks it left are recorded beside it (<stem>.clock-locks.json).\n"
                                             "On a node: a folder only root can write (/var/lib/joulehouse-agent), not the lake's.")


# The file and environment a SettingsRoot.load() is reading; None while a root is built in code.
_READING: ContextVar[tuple[Path | None, Mapping[str, str]] | None] = ContextVar("joulehouse_settings_reading", default=None)


class _TomlFile(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, refusing a file that is too large or not UTF-8 in one line,
    with each relative path of a location setting made the file's folder's (RelativeToFile)."""

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path) -> None:
        self._root = settings_cls  # read by _read_file, which the parent's __init__ calls
        super().__init__(settings_cls, toml_file)

    def _read_file(self, file_path: Path) -> dict[str, Any]:
        # the folder as the system finds it (`..` after a symlink), the file itself not followed
        data, folder = self._parsed(Path(file_path)), Path(file_path).absolute().parent.resolve()
        for name, info in self._root.model_fields.items():
            values = data.get(name)
            for key, field in getattr(info.annotation, "__pydantic_fields__", {}).items():
                if isinstance(values, dict) and key in values and (marker := relative_to_file(field)) is not None:
                    values[key] = marker.resolve(values[key], folder)
        return data

    def _parsed(self, path: Path) -> dict[str, Any]:
        data = read_bytes_at_most(path, "settings file", MAX_FILE_BYTES, SettingsError)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SettingsError(f"settings file {path} is not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                                f"{exc.start}): TOML files are UTF-8") from None
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"settings file {path} is not valid TOML: {exc}") from None
        except RecursionError:  # a=[[[[... thousands deep: tomllib recurses per level
            raise SettingsError(f"settings file {path} is nested too deeply to be a settings file") from None


class _Environment(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (the process environment by default)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._environ.items()}


class SettingsRoot(BaseSettings):
    """Sections by name, each a `section` dataclass with a default. Subclasses declare them."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix=ENV_PREFIX,
                                      env_nested_delimiter=ENV_DELIMITER, case_sensitive=False)
    # Sections that another side of the project owns: a file or override may name them, and this
    # root leaves them to that side (the node's root lists the analytics' sections here).
    foreign_sections: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Built in code: only what the caller passed. Loading: the environment over the file."""
        reading = _READING.get()
        if reading is None:
            return (init_settings,)
        path, environ = reading
        return (init_settings, _Environment(settings_cls, environ), *([_TomlFile(settings_cls, path)] if path else []))

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Self:
        """Read the TOML file at `path` (optional), then the JOULEHOUSE_* overrides of `env` (default:
        the process environment), and check every value. Raises SettingsError, one line."""
        environ = os.environ if env is None else env
        if path is not None and Path(path).is_dir():
            raise SettingsError(f"settings file {path} is a folder; give the TOML file in it "
                                f"(e.g. {Path(path) / 'joulehouse.toml'})")
        if path is not None:
            regular_file(path, "settings file", SettingsError)  # /dev/zero, a FIFO: refused before any read
        cls._refuse_unknown_overrides(environ)
        token = _READING.set((Path(path) if path is not None else None, environ))
        try:
            return cls()
        except ValidationError as exc:
            raise SettingsError(describe_errors(exc, environ, path)) from None
        finally:
            _READING.reset(token)

    @classmethod
    def _refuse_unknown_overrides(cls, environ: Mapping[str, str]) -> None:
        """Refuse, at the load and in one line, every JOULEHOUSE_* variable that names no setting:
        pydantic-settings would silently ignore it, and the command run on defaults the operator
        did not mean (collectors.settings_env)."""
        sections = {name: frozenset(f.name for f in dataclasses.fields(info.annotation))
                    for name, info in cls.model_fields.items()}
        problem = unknown_variables(environ, sections, cls.foreign_sections)
        if problem:
            raise SettingsError(problem)


class NodeSettings(SettingsRoot):
    """What a node reads: the lake, the collector and the agent; the analytics' sections of the same
    file are theirs to check."""

    foreign_sections: ClassVar[frozenset[str]] = frozenset(
        {"warehouse", "models", "carbon", "tco", "recommend", "export", "sensitivity", "placement"})

    lake: LakeSettings = Field(default_factory=LakeSettings)
    collector: CollectorSettings = Field(default_factory=CollectorSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)

    @model_validator(mode="before")
    @classmethod
    def _leave_foreign_sections(cls, data: Any) -> Any:
        """The analytics' sections are left to them; any other unknown section is still refused."""
        return {k: v for k, v in data.items() if k not in cls.foreign_sections} if isinstance(data, Mapping) else data


def load_node_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> NodeSettings:
    """The node's sections of the settings file at `path` (optional) and the environment."""
    return NodeSettings.load(path, env)


def toml_value(value: Any) -> str:
    """One value as TOML (bool, number, string, or a list of them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    # every control character but tab as \uXXXX: raw, the file no TOML reader takes back (\x01 in a site)
    return '"' + re.sub(r"[\x00-\x08\x0a-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


def settings_to_toml(settings: SettingsRoot) -> str:
    """Write settings back as TOML text (what the demo saves beside its outputs). Relative paths
    are written absolute: here they are the working directory's, and read back from the file
    they would be its folder's (`joulehouse run` writes the file under its Airflow home)."""
    lines: list[str] = []
    for name in type(settings).model_fields:
        lines.append(f"[{name}]")
        for key, value in absolute_locations(getattr(settings, name), Path.cwd()).items():
            lines.append(f"{key} = {toml_value(tuple(value) if isinstance(value, list) else value)}")
        lines.append("")
    return "\n".join(lines)


def absolute_locations(values: Any, folder: Path) -> dict[str, Any]:
    """A section's values by key, each relative path of a location setting made `folder`'s: what
    a file must say to mean the paths these settings were read with (RelativeToFile)."""
    out = {}
    for key, field in type(values).__pydantic_fields__.items():
        value = getattr(values, key)
        out[key] = marker.resolve(value, folder) if (marker := relative_to_file(field)) is not None else value
    return out


def write_settings_file(path: str | Path, settings: SettingsRoot) -> Path:
    """`settings` as TOML at `path`, readable by its owner alone (0600): it may hold the IPMI
    password, which `joulehouse run` wrote into a world-readable file beside the warehouse."""
    from joulehouse.collectors.lakefs import write_file_atomically

    write_file_atomically(path, settings_to_toml(settings).encode(), 0o600)
    return Path(path)


def replace_fields(values: Any, **changes: Any) -> Any:
    """A copy of the section `values` with `changes`, checked like a loaded one: SettingsError names
    the field (`CollectorSettings.interval_s = nan: input should be a finite number`)."""
    try:
        return dataclasses.replace(values, **changes)
    except ValidationError as exc:
        messages = ((e, e["msg"].removeprefix("Value error, ")) for e in exc.errors())
        raise SettingsError("; ".join(f"{exc.title}.{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: "
                                      f"{msg[:1].lower()}{msg[1:]}" for e, msg in messages)) from None


def replace_section(settings: SettingsRoot, **sections: Any) -> SettingsRoot:
    """A copy of `settings` with whole sections replaced, checked again (tests and the demo use this)."""
    return type(settings)(**{name: getattr(settings, name) for name in type(settings).model_fields} | sections)


__all__ = [
    "AgentSettings", "CollectorSettings", "LakeSettings", "NodeSettings", "SettingsError", "SettingsRoot",
    "load_node_settings", "replace_fields", "replace_section", "section", "setting_source", "settings_to_toml",
    "toml_value", "write_settings_file",
    # the shared field types (collectors.settings_fields)
    "MAX_PUE", "PUE", "Count", "Finite", "Location", "LocationOrNone", "Names", "NonNegative", "NonNegativeInt",
    "NonNegativeList", "Percent", "Positive", "Ratio", "RelativeToFile", "Seconds", "Text",
]