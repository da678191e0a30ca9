"""The recommended-config file: its schema, canonical form, ed25519 signature and verification.

The node side owns this contract (ARCHITECTURE.md, "The recommended-config file"): the analytics side signs with `sign_config`,
the agent accepts a file only through `verify_config`. A signed document is

    {"body": {...}, "signature": {"alg": "ed25519", "key_id": "<16 hex>", "value": "<base64>"}}

and the body is

    schema_version   int (1)
    kind             "joulehouse-recommended-config" (optional: a body without it is a config; any
                     other kind, such as the placement advice signed with the same key, is refused)
    generated_at, valid_from, valid_until   UTC ISO-8601, "YYYY-MM-DDTHH:MM:SSZ"
    site             str
    day              str, YYYY-MM-DD (optional: the pipeline day the settings come from)
    hosts            {host: {gpu_uuid: {power_limit_w, locked_sm_clock_min_mhz,
                      locked_sm_clock_max_mhz, workload_class, expected_saving_pct,
                      expected_slowdown_pct, gpu_model}}}
    excluded_gpu_models  [{gpu_model, reason}]   models left out by the quality gate
    excluded_gpus        [{host, gpu_uuid, reason}]   single GPUs left out (optional)

Canonical form (what is signed): `json.dumps(body, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)` encoded as UTF-8. Floats are rendered as Python's
`repr(float)` renders them: the shortest decimal text that reads back as the same IEEE-754
double, always with a fraction or exponent ("300.0", "12.5", "1e-05"); integers have no point.
NaN and infinities are refused. Because the verifier parses the JSON and canonicalises again,
the file on disk may be pretty-printed; the writer fixes numeric types (watts and percentages
as floats, clocks and schema_version as ints) so a round trip through JSON keeps the same text.

Only the standard library and `cryptography` are used, so the agent installs light.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from joulehouse.collectors.input_file import read_bytes_at_most
from joulehouse.collectors.sources.host_names import canonical_host
# The keys live in their own module; these names stay importable from here, where callers found them.
from joulehouse.collectors.signing_keys import (  # noqa: F401
    MAX_KEY_BYTES, PRIVATE_KEY_NAME, PUBLIC_KEY_NAME, generate_keypair, key_id, load_private_key, load_public_key)

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})
SIGNATURE_ALG = "ed25519"
# What the body says it is. The placement advice is signed with the same key and carries its own
# kind: read as a config, an advice that listed no hosts rolled every GPU back, and its
# generated_at made the day's real config a replay.
CONFIG_KIND = "joulehouse-recommended-config"
CONFIG_NAME = "recommended-config.json"  # the file agents poll (the newest day's)
WORKLOAD_CLASSES = frozenset({"latency-sensitive", "throughput", "background"})
# The largest document an agent reads; a larger one is refused before it is read whole. A GPU
# with a locked clock range takes about 360 bytes of the pretty-printed file, so this holds about
# 47,000 GPUs: a larger fleet publishes one config per site.
MAX_CONFIG_BYTES = 16 << 20


class ConfigError(ValueError):
    """A recommended-config document was refused; subclasses say why."""


class UnsignedConfig(ConfigError):
    """The document has no signature block (or no body to sign)."""


class BadSignature(ConfigError):
    """The signature does not match the body, or was made with another key."""


class ExpiredConfig(ConfigError):
    """`now` is at or after the body's valid_until."""


class NotYetValid(ConfigError):
    """`now` is before the body's valid_from."""


class UnsupportedSchemaVersion(ConfigError):
    """The body's schema_version is not one this agent understands."""


class MalformedConfig(ConfigError):
    """The document is not JSON of the expected shape; the message names the field."""


class HostNotInConfig(ConfigError):
    """The config has no entries for the host that asked."""


@dataclass(frozen=True)
class GpuSetting:
    """What one GPU should be set to. Power in W, clocks in MHz, percentages 0-100."""

    host: str
    gpu_uuid: str
    gpu_model: str
    power_limit_w: float
    workload_class: str
    expected_saving_pct: float | None
    expected_slowdown_pct: float | None
    locked_sm_clock_min_mhz: int | None = None
    locked_sm_clock_max_mhz: int | None = None


@dataclass(frozen=True)
class RecommendedConfig:
    """A verified config. `settings` holds only the asked host's GPUs when a host was given."""

    schema_version: int
    generated_at: datetime
    valid_from: datetime
    valid_until: datetime
    site: str
    day: str | None
    settings: tuple[GpuSetting, ...]
    excluded_gpu_models: tuple[tuple[str, str], ...]
    config_sha256: str
    key_id: str

    def for_host(self, host: str) -> tuple[GpuSetting, ...]:
        # Both sides as the lake names a server (collectors.sources.host_names): the warehouse keys a
        # setting by its short lowercase host, while a node whose uname is an FQDN or has capitals
        # asked by its own spelling and found no entry (HostNotInConfig: no cap applied)
        host = canonical_host(host)
        return tuple(s for s in self.settings if canonical_host(s.host) == host)


# ---- canonical form and signing ---------------------------------------------------------------

def format_utc(moment: datetime) -> str:
    """UTC ISO-8601 to the second, with a Z: the only time format the body uses."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} has no time zone; expected an aware UTC datetime")
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_body(body: Mapping[str, Any]) -> bytes:
    """The exact bytes that are signed (see the module docstring)."""
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        # inside the try: a lone surrogate ("\ud800") loads as JSON and cannot be encoded
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MalformedConfig(f"body holds text UTF-8 cannot represent (a lone surrogate?): {exc}") from None
    except ValueError as exc:
        raise MalformedConfig(f"body cannot be canonicalised (NaN or infinity?): {exc}") from None
    except TypeError as exc:
        raise MalformedConfig(f"body holds a value JSON cannot represent: {exc}") from None
    except RecursionError:
        # nested as deep as json.loads allows: json.dumps needs a few frames more
        raise MalformedConfig("body is nested too deeply to canonicalise") from None


def body_sha256(body: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical body: the config's identity in the audit."""
    return hashlib.sha256(canonical_body(body)).hexdigest()


def sign_config(body: Mapping[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """Check `body` against the schema, then return the signed document {"body", "signature"}."""
    _parse_body(body)  # never sign what an agent would refuse as malformed
    return sign_document(body, private_key)


def sign_document(body: Mapping[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """{"body", "signature"} over the canonical body, as the config is signed, for another document
    with its own schema (the placement advice): the caller checks that schema."""
    signature = private_key.sign(canonical_body(body))
    return {
        "body": json.loads(canonical_body(body)),
        "signature": {
            "alg": SIGNATURE_ALG,
            "key_id": key_id(private_key.public_key()),
            "value": base64.b64encode(signature).decode("ascii"),
        },
    }


def dump_config(doc: Mapping[str, Any]) -> bytes:
    """The file's bytes: sorted keys, 2-space indent, UTF-8, final newline (deterministic)."""
    return (json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def load_config_document(source: str | bytes | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Parse a document from a path, JSON bytes/text or an already parsed mapping."""
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, Path):
        try:
            with open(source, "rb") as fh:
                source = fh.read(MAX_CONFIG_BYTES + 1)  # never more than the limit into memory
        except FileNotFoundError:
            raise MalformedConfig(f"config file {source} does not exist") from None
    if len(source) > MAX_CONFIG_BYTES:
        raise MalformedConfig(f"config is larger than {MAX_CONFIG_BYTES >> 20} MiB; refused unread")
    if not source.strip():
        raise MalformedConfig("config is empty (0 bytes, or only whitespace): an export that was never written, "
                              "or one cut off while it was fetched")
    try:
        doc = json.loads(source)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, and a number of over 4,300 digits
        raise MalformedConfig(f"config is not valid JSON: {str(exc)[:200]}") from None
    except RecursionError:
        raise MalformedConfig("config is not valid JSON: nested too deep") from None
    if not isinstance(doc, dict):
        raise MalformedConfig(f"config must be a JSON object, got {type(doc).__name__}")
    return doc


# ---- verification -----------------------------------------------------------------------------

def verify_config(
    doc: Mapping[str, Any], public_key: Ed25519PublicKey, now: datetime, host: str | None = None, *,
    host_may_be_absent: bool = False,
) -> RecommendedConfig:
    """Accept a signed document only if it is signed by `public_key`, of a supported schema
    version, well formed, valid at `now` (UTC) and, when `host` is given, has entries for it
    (the returned settings are then only that host's). Raises a ConfigError subclass otherwise.
    `host_may_be_absent`: a config without entries for `host` is valid with no settings (the node
    agent's loop: a newer config that left out every GPU of the host, their model held back by the
    fit's gate, means they go back to their defaults, not that yesterday's caps stay on)."""
    config = verify_signature(doc, public_key)
    now_utc = _aware(now, "now")
    if now_utc < config.valid_from:
        raise NotYetValid(f"config is valid from {format_utc(config.valid_from)}; it is now {format_utc(now_utc)}")
    if now_utc >= config.valid_until:
        raise ExpiredConfig(f"config expired at {format_utc(config.valid_until)}; it is now {format_utc(now_utc)}")
    if host is not None:
        mine = config.for_host(host)
        if not mine and not host_may_be_absent:
            hosts = sorted({s.host for s in config.settings})
            raise HostNotInConfig(f"config has no entries for host {host!r}; it covers {hosts}")
        config = _replace_settings(config, mine)
    return config


def verify_signature(doc: Mapping[str, Any], public_key: Ed25519PublicKey) -> RecommendedConfig:
    """The signature and form half of verify_config, whatever the time: signed by `public_key`, a
    supported schema version, well formed. Raises a ConfigError subclass otherwise."""
    body = verify_document(doc, public_key)
    return _parse_body(body, key=str(doc["signature"]["key_id"]))


def verify_document(doc: Mapping[str, Any], public_key: Ed25519PublicKey) -> Mapping[str, Any]:
    """The body of a document sign_document made, once its signature is `public_key`'s (any
    schema: the caller checks its own); raises UnsignedConfig or BadSignature otherwise."""
    if not isinstance(doc, Mapping) or "body" not in doc:
        raise UnsignedConfig("config has no signed body: expected {\"body\": ..., \"signature\": ...}")
    sig = doc.get("signature")
    if not sig:
        raise UnsignedConfig("config is not signed: it has no \"signature\" block")
    if not isinstance(sig, Mapping) or not all(k in sig for k in ("alg", "key_id", "value")):
        raise UnsignedConfig("config signature block must have alg, key_id and value")
    if sig["alg"] != SIGNATURE_ALG:
        raise BadSignature(f"signature algorithm {sig['alg']!r} is not accepted; expected {SIGNATURE_ALG!r}")
    expected_id = key_id(public_key)
    if sig["key_id"] != expected_id:
        raise BadSignature(f"config was signed by key {sig['key_id']!r}, but the trusted key is {expected_id!r}")
    body = doc["body"]
    if not isinstance(body, Mapping):
        raise MalformedConfig("config body must be a JSON object")
    try:
        signature = base64.b64decode(str(sig["value"]), validate=True)
    except ValueError:
        raise BadSignature("signature value is not valid base64") from None
    try:
        public_key.verify(signature, canonical_body(body))
    except InvalidSignature:
        raise BadSignature("signature does not match the config body: the file was altered after signing") from None
    return body


def _replace_settings(config: RecommendedConfig, settings: tuple[GpuSetting, ...]) -> RecommendedConfig:
    from dataclasses import replace

    return replace(config, settings=settings)


def _aware(moment: datetime, name: str) -> datetime:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ValueError(f"{name} must be a time-zone-aware datetime, got {moment!r}")
    return moment.astimezone(timezone.utc)


def _parse_time(body: Mapping[str, Any], name: str) -> datetime:
    value = body.get(name)
    if not isinstance(value, str):
        raise MalformedConfig(f"body.{name} must be a UTC ISO-8601 string, got {value!r}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedConfig(f"body.{name} = {value!r} is not ISO-8601 (expected YYYY-MM-DDTHH:MM:SSZ)") from None
    if moment.utcoffset() is None or moment.utcoffset().total_seconds() != 0:
        raise MalformedConfig(f"body.{name} = {value!r} must be UTC (end in Z)")
    return moment.astimezone(timezone.utc)


def _number(entry: Mapping[str, Any], name: str, where: str, *, optional: bool) -> float | None:
    value = entry.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MalformedConfig(f"{where}.{name} must be a finite number, got {value!r}")
    return float(value)


def _clock(entry: Mapping[str, Any], name: str, where: str) -> int | None:
    value = entry.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MalformedConfig(f"{where}.{name} must be a positive integer (MHz), got {value!r}")
    return value


def parse_gpu_setting(host: str, uuid: str, entry: Any) -> GpuSetting:
    """One GPU's entry of body.hosts as the agent reads it, or MalformedConfig naming the field
    (the export checks each entry with it, so one bad row leaves out its GPU, not the file)."""
    where = f"body.hosts[{host!r}][{uuid!r}]"
    if not isinstance(entry, Mapping):
        raise MalformedConfig(f"{where} must be an object")
    power = _number(entry, "power_limit_w", where, optional=False)
    if power <= 0:
        raise MalformedConfig(f"{where}.power_limit_w must be > 0 W, got {power}")
    lo = _clock(entry, "locked_sm_clock_min_mhz", where)
    hi = _clock(entry, "locked_sm_clock_max_mhz", where)
    if (lo is None) != (hi is None):
        raise MalformedConfig(f"{where}: give both locked_sm_clock_min_mhz and _max_mhz, or neither")
    if lo is not None and lo > hi:
        raise MalformedConfig(f"{where}: locked SM clock range {lo}-{hi} MHz has min above max")
    workload = entry.get("workload_class")
    if workload not in WORKLOAD_CLASSES:
        raise MalformedConfig(f"{where}.workload_class = {workload!r}; expected one of {sorted(WORKLOAD_CLASSES)}")
    model = entry.get("gpu_model")
    if not isinstance(model, str) or not model:
        raise MalformedConfig(f"{where}.gpu_model must be a non-empty string")
    return GpuSetting(
        host=host, gpu_uuid=uuid, gpu_model=model, power_limit_w=power, workload_class=workload,
        expected_saving_pct=_number(entry, "expected_saving_pct", where, optional=True),
        expected_slowdown_pct=_number(entry, "expected_slowdown_pct", where, optional=True),
        locked_sm_clock_min_mhz=lo, locked_sm_clock_max_mhz=hi,
    )


def _parse_body(body: Mapping[str, Any], key: str = "") -> RecommendedConfig:
    if not isinstance(body, Mapping):
        raise MalformedConfig("config body must be a JSON object")
    version = body.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise MalformedConfig(f"body.schema_version must be an integer, got {version!r}")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise UnsupportedSchemaVersion(
            f"config schema_version {version} is not supported; this agent reads {sorted(SUPPORTED_SCHEMA_VERSIONS)}"
        )
    kind = body.get("kind", CONFIG_KIND)
    if kind != CONFIG_KIND:
        raise MalformedConfig(f"body.kind is {kind!r}, not {CONFIG_KIND!r}: another document signed with the same "
                              "key is not a recommended config")
    generated_at, valid_from, valid_until = (_parse_time(body, n) for n in ("generated_at", "valid_from", "valid_until"))
    if valid_until <= valid_from:
        raise MalformedConfig(f"body.valid_until {body['valid_until']} is not after valid_from {body['valid_from']}")
    site = body.get("site")
    if not isinstance(site, str) or not site:
        raise MalformedConfig("body.site must be a non-empty string")
    day = body.get("day")
    if day is not None and not isinstance(day, str):
        raise MalformedConfig(f"body.day must be YYYY-MM-DD text, got {day!r}")
    hosts = body.get("hosts")
    if not isinstance(hosts, Mapping):
        raise MalformedConfig("body.hosts must be an object {host: {gpu_uuid: setting}}")
    settings = []
    for host, gpus in sorted(hosts.items()):
        if not isinstance(gpus, Mapping):
            raise MalformedConfig(f"body.hosts[{host!r}] must be an object {{gpu_uuid: setting}}")
        settings.extend(parse_gpu_setting(host, uuid, entry) for uuid, entry in sorted(gpus.items()))
    excluded = body.get("excluded_gpu_models", [])
    if not isinstance(excluded, list) or not all(
        isinstance(e, Mapping) and isinstance(e.get("gpu_model"), str) and isinstance(e.get("reason"), str)
        for e in excluded
    ):
        raise MalformedConfig("body.excluded_gpu_models must be a list of {gpu_model, reason}")
    return RecommendedConfig(
        schema_version=version, generated_at=generated_at, valid_from=valid_from, valid_until=valid_until,
        site=site, day=day, settings=tuple(settings),
        excluded_gpu_models=tuple((e["gpu_model"], e["reason"]) for e in excluded),
        config_sha256=body_sha256(body), key_id=key,
    )
