"""Fixtures for collector tests: the stand-in NVML library (see tests/nvml_stub/fixture.py)."""

from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401
