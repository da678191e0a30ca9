"""The node agent's NVML plumbing, shared by its apply (collectors.agent) and its rollback
(collectors.agent_rollback): opening NVML around a piece of work, finding GPUs by UUID, NVML's
error text, mW to W. NVML is injected (`nvml=pynvml`, a stand-in library, or a fake module).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

log = logging.getLogger(__name__)


def watts_from_mw(mw: int | None) -> float | None:
    return None if mw is None else mw / 1000.0


def nvml_error_text(nvml: Any, exc: Exception) -> str:
    """NVML's own text for an error (e.g. 'Insufficient Permissions')."""
    try:
        return f"{type(exc).__name__}: {nvml.nvmlErrorString(exc.value)}"
    except Exception:  # noqa: BLE001 - an error string is best effort
        return f"{type(exc).__name__}: {exc}"


def as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus_by_uuid(nvml: Any, unreadable: list[str] | None = None) -> dict[str, Any]:
    """{uuid: NVML handle} for every GPU this node's driver sees. A GPU that cannot be read (lost,
    fallen off the bus) is left out and named in `unreadable`: the others are still served."""
    handles = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            handles[as_text(nvml.nvmlDeviceGetUUID(handle))] = handle
        except nvml.NVMLError as exc:
            if unreadable is not None:
                unreadable.append(f"GPU index {index}: {nvml_error_text(nvml, exc)}")
    return handles


def unlock_clocks(nvml: Any, handle: Any) -> None:
    try:
        nvml.nvmlDeviceResetGpuLockedClocks(handle)
    except nvml.NVMLError_NotSupported:
        pass  # a device without clock locking has nothing to unlock


def is_nvml_error(exc: BaseException) -> bool:
    """An NVMLError of whichever NVML module (pynvml or a stand-in) raised it."""
    return any(cls.__name__ == "NVMLError" for cls in type(exc).__mro__)


def with_nvml(nvml: Any, work: Callable[[Any], Any]) -> Any:
    """`work(nvml)` between nvmlInit and nvmlShutdown; `nvml` None: pynvml, imported only then."""
    if nvml is None:
        import pynvml as nvml  # noqa: PLW0127 - the production default, imported only when used
    nvml.nvmlInit()
    try:
        result = work(nvml)
    except BaseException:
        _shut_down(nvml)
        raise
    # after the work: a shutdown error raised from `finally` replaced a successful apply's result,
    # and every GPU whose limit had been set was audited 'not applied'
    _shut_down(nvml)
    return result


def _shut_down(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - the work's own outcome (or error) is what counts
        if not is_nvml_error(exc):
            raise
        log.warning("nvmlShutdown failed (%s); the work it closed stands", exc)
