"""Fixtures of the stand-in NVML library for the stub's own tests."""

from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401
