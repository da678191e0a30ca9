"""Fixtures for collector tests: the stand-in NVML library (see tests/nvml_stub/fixture.py) and a
signing key pair."""

import sys
from pathlib import Path

import pytest
from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401

from joulehouse.collectors.config_contract import generate_keypair, load_private_key, load_public_key

# pytest puts tests/ on sys.path (no __init__.py files), so tests/collectors/sources would
# otherwise shadow the package collectors.sources as a namespace package. A regular package
# anywhere on sys.path wins over namespace folders, so the repository root is enough.
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.append(_REPO)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """(private, public) ed25519 keys, as `joulehouse keys generate` writes and the agent reads them."""
    private_path, public_path = generate_keypair(tmp_path_factory.mktemp("keys"))
    return load_private_key(private_path), load_public_key(public_path)
