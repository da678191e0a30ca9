"""The recommended-config contract: what an agent accepts and what it refuses."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json

import pytest
from hypothesis import given, settings, strategies as st

from joulehouse.collectors.config_contract import (
    BadSignature, ExpiredConfig, HostNotInConfig, MalformedConfig, NotYetValid, UnsignedConfig,
    UnsupportedSchemaVersion, canonical_body, dump_config, generate_keypair, load_private_key,
    sign_config, sign_document, verify_config,
)

T0 = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)


def make_body(**overrides):
    body = {
        "schema_version": 1,
        "generated_at": "2026-01-03T06:00:00Z",
        "valid_from": "2026-01-03T06:00:00Z",
        "valid_until": "2026-01-05T06:00:00Z",
        "site": "site-a",
        "day": "2026-01-02",
        "hosts": {
            "node-01": {
                "GPU-aaaa": {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                             "power_limit_w": 300.0, "locked_sm_clock_min_mhz": None,
                             "locked_sm_clock_max_mhz": None, "expected_saving_pct": 12.5,
                             "expected_slowdown_pct": 4.0},
                "GPU-bbbb": {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "background",
                             "power_limit_w": 250.0, "locked_sm_clock_min_mhz": 900,
                             "locked_sm_clock_max_mhz": 1200, "expected_saving_pct": 20.0,
                             "expected_slowdown_pct": 15.0},
            },
            "node-02": {
                "GPU-cccc": {"gpu_model": "NVIDIA H200", "workload_class": "latency-sensitive",
                             "power_limit_w": 650.0, "locked_sm_clock_min_mhz": None,
                             "locked_sm_clock_max_mhz": None, "expected_saving_pct": 3.0,
                             "expected_slowdown_pct": 1.0},
            },
        },
        "excluded_gpu_models": [{"gpu_model": "NVIDIA H100 80GB HBM3", "reason": "held-out MAPE 14% > 10%"}],
        "excluded_gpus": [],
    }
    body.update(overrides)
    return body


def test_round_trip_through_the_file_keeps_every_setting(keys):
    private, public = keys
    doc = json.loads(dump_config(sign_config(make_body(), private)))
    config = verify_config(doc, public, T0 + dt.timedelta(hours=1))
    assert {s.gpu_uuid: s.power_limit_w for s in config.settings} == {"GPU-aaaa": 300.0, "GPU-bbbb": 250.0, "GPU-cccc": 650.0}
    bbbb = next(s for s in config.settings if s.gpu_uuid == "GPU-bbbb")
    assert (bbbb.locked_sm_clock_min_mhz, bbbb.locked_sm_clock_max_mhz) == (900, 1200)
    assert config.excluded_gpu_models == (("NVIDIA H100 80GB HBM3", "held-out MAPE 14% > 10%"),)
    assert len(config.config_sha256) == 64


def test_a_flipped_byte_anywhere_in_the_body_is_refused(keys):
    private, public = keys
    data = bytearray(dump_config(sign_config(make_body(), private)))
    pos = data.index(b'"power_limit_w": 300.0') + len(b'"power_limit_w": ')
    data[pos] = ord("9")  # 300 W -> 900 W
    with pytest.raises(BadSignature, match="altered after signing"):
        verify_config(json.loads(data), public, T0)


def test_a_key_the_agent_does_not_trust_is_refused(keys, tmp_path):
    _, public = keys
    other_private = load_private_key(generate_keypair(tmp_path)[0])
    with pytest.raises(BadSignature, match="trusted key"):
        verify_config(sign_config(make_body(), other_private), public, T0)


def test_a_forged_signature_under_the_right_key_id_is_refused(keys):
    private, public = keys
    doc = sign_config(make_body(), private)
    doc["signature"]["value"] = base64.b64encode(b"\0" * 64).decode()
    with pytest.raises(BadSignature):
        verify_config(doc, public, T0)


@pytest.mark.parametrize("doc", [{"body": make_body()}, {"body": make_body(), "signature": None}, make_body()])
def test_unsigned_documents_are_refused(keys, doc):
    with pytest.raises(UnsignedConfig):
        verify_config(doc, keys[1], T0)


def test_the_validity_window_is_enforced(keys):
    private, public = keys
    doc = sign_config(make_body(), private)
    with pytest.raises(ExpiredConfig, match="expired at 2026-01-05T06:00:00Z"):
        verify_config(doc, public, T0 + dt.timedelta(days=2))
    with pytest.raises(NotYetValid):
        verify_config(doc, public, T0 - dt.timedelta(seconds=1))
    assert verify_config(doc, public, T0 + dt.timedelta(days=2, seconds=-1)).site == "site-a"


def test_an_unknown_schema_version_is_refused_even_when_signed(keys):
    private, public = keys
    body = make_body(schema_version=2)
    # sign_config refuses to sign it, so sign by hand as a newer exporter would
    doc = {"body": body, "signature": {**sign_config(make_body(), private)["signature"],
                                       "value": base64.b64encode(private.sign(canonical_body(body))).decode()}}
    with pytest.raises(UnsupportedSchemaVersion, match="schema_version 2"):
        verify_config(doc, public, T0)


def test_another_document_signed_with_the_same_key_is_no_config(keys):
    """The placement advice is signed with the export's key and holds a `hosts` too. Read as a
    config, one that listed no hosts rolled every GPU back and made the day's config a replay."""
    private, public = keys
    advice = make_body(kind="joulehouse-placement-advice", hosts={})
    with pytest.raises(MalformedConfig, match="body.kind is 'joulehouse-placement-advice'"):
        verify_config(sign_document(advice, private), public, T0)
    # the config's own kind, and a config from before the field, are configs
    for body in (make_body(kind="joulehouse-recommended-config"), make_body()):
        assert len(verify_config(sign_config(body, private), public, T0).settings) == 3


def test_a_host_gets_only_its_own_entries_and_another_host_is_refused(keys):
    private, public = keys
    doc = sign_config(make_body(), private)
    mine = verify_config(doc, public, T0, host="node-02")
    assert [s.gpu_uuid for s in mine.settings] == ["GPU-cccc"]
    with pytest.raises(HostNotInConfig, match="node-09"):
        verify_config(doc, public, T0, host="node-09")


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda b: b["hosts"]["node-01"]["GPU-aaaa"].update(power_limit_w=-5.0), "power_limit_w"),
        (lambda b: b["hosts"]["node-01"]["GPU-aaaa"].update(workload_class="batch"), "workload_class"),
        (lambda b: b["hosts"]["node-01"]["GPU-bbbb"].update(locked_sm_clock_max_mhz=None), "neither"),
        (lambda b: b.update(valid_until="2026-01-01T00:00:00Z"), "valid_until"),
        (lambda b: b.update(valid_from="2026-01-03 06:00"), "valid_from"),
    ],
)
def test_malformed_bodies_are_never_signed(keys, mutate, field):
    body = copy.deepcopy(make_body())
    mutate(body)
    with pytest.raises(MalformedConfig, match=field):
        sign_config(body, keys[0])


@settings(max_examples=60, deadline=None)
@given(watts=st.floats(min_value=1, max_value=2000, allow_nan=False), pct=st.floats(-50, 100, allow_nan=False))
def test_canonical_form_survives_a_json_round_trip(keys, watts, pct):
    """Any finite float the exporter writes canonicalises to the same bytes after parsing."""
    body = make_body()
    body["hosts"]["node-01"]["GPU-aaaa"].update(power_limit_w=watts, expected_saving_pct=pct)
    doc = sign_config(body, keys[0])
    parsed = json.loads(dump_config(doc))
    assert canonical_body(parsed["body"]) == canonical_body(body)
    assert verify_config(parsed, keys[1], T0).settings[0].power_limit_w == watts


def test_generate_keypair_will_not_overwrite_a_key(tmp_path):
    generate_keypair(tmp_path)
    with pytest.raises(FileExistsError):
        generate_keypair(tmp_path)
    assert (tmp_path / "joulehouse-ed25519.pem").stat().st_mode & 0o077 == 0


def test_a_new_key_written_over_an_old_one_is_private_whatever_the_old_ones_mode(tmp_path):
    import os
    import stat

    private, _ = generate_keypair(tmp_path)
    os.chmod(private, 0o644)
    private, _ = generate_keypair(tmp_path, overwrite=True)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert load_private_key(private) is not None


@pytest.mark.parametrize("opened, mode", [("public key", 0o666), ("public key's folder", 0o777),
                                          ("private key", 0o644), ("private key", 0o660)])
def test_a_key_another_user_could_replace_or_read_is_refused(tmp_path, opened, mode):
    """The public key is the agent's trust anchor: a mode 666 key, or one in a folder anyone can
    write, let any local user swap in their own key and sign what root applies; a 644 private key
    let any user sign (review, helper-85)."""
    import os

    from joulehouse.collectors.config_contract import load_public_key

    folder = tmp_path / "keys"
    private, public = generate_keypair(folder)
    load_public_key(public), load_private_key(private)  # as written: accepted
    target = {"public key": public, "public key's folder": folder, "private key": private}[opened]
    os.chmod(target, mode)
    load = load_private_key if opened == "private key" else load_public_key
    with pytest.raises(ValueError, match=r"can be (read or )?written by another user; refused"):
        load(private if opened == "private key" else public)
    os.chmod(folder, 0o1777)  # sticky, as /tmp: no one else can replace the key in it
    if opened == "public key's folder":
        assert load_public_key(public) is not None


def test_a_key_pair_made_under_a_group_writable_umask_is_accepted_by_its_own_loader(tmp_path):
    """Under umask 002 (a desktop user's default) the public key came out 664 in a 775 folder, and the
    project's own loader refused the pair it had just made (review, helper-94)."""
    import os

    from joulehouse.collectors.config_contract import load_public_key

    old = os.umask(0o002)
    try:
        private, public = generate_keypair(tmp_path / "keys")
    finally:
        os.umask(old)
    assert load_public_key(public) is not None and load_private_key(private) is not None
