"""The `joulehouse` command line (typer apps, one module per command group)."""

from pathlib import Path

# The real reference data (traces, grid intensity, prices) beside the checkout, as an absolute path
# so that every command finds it from any working folder.
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
