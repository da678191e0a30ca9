"""The one contract every sample source keeps (NVML, DCGM via Prometheus, IPMI, the simulator).

A source is polled by the collect loop (collectors/collect.py). Each `read()` returns the rows
it has for that poll as a pyarrow Table of ONE lake dataset (`dataset` names it: "gpu_samples",
"node_samples", ...), with the dataset's columns where it has them (collectors.schema.conform
fills the rest with NULL) plus any extra columns, which the writer keeps. A reading the source
cannot give is NULL, never 0.

A source that cannot read one device (a GPU lost from the bus, a BMC that times out) still
returns rows for the others and marks the failed device's row in the string column `error`
(NULL when the row is good). A source that cannot read at all raises SourceError; the loop logs
it and polls again next interval, and the other sources go on. A read whose every row carries an
`error` (IPMI's one row when the BMC does not answer) counts as a failed read too (its rows are
kept, with their reason): it read nothing.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pyarrow as pa

# Extra column a source may add: why a device's row carries no readings (NULL when none).
ERROR_COLUMN = "error"


def read_failure(table: pa.Table | None) -> str | None:
    """The first row's `error` when every row of a read carries one, else None (a good read, an
    empty one, or one where only some devices failed: the others were read)."""
    if table is None or table.num_rows == 0 or ERROR_COLUMN not in table.column_names:
        return None
    errors = table.column(ERROR_COLUMN)
    if errors.null_count:
        return None
    return str(errors[0].as_py())


class SourceError(RuntimeError):
    """A source could not be read at all this poll; the message names the source and the cause."""


@runtime_checkable
class Source(Protocol):
    """A sample source. `dataset` is the lake dataset its rows belong to."""

    dataset: str

    def read(self) -> pa.Table:
        """Rows sampled now (or since the last call, for sources that read a range)."""
        ...

    def close(self) -> None:
        """Release what the source holds (NVML handle, HTTP session). Idempotent."""
        ...
