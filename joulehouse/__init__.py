"""joulehouse: the energy warehouse of a GPU fleet.

One package; its layers are subpackages, and imports point one way (ARCHITECTURE.md):

    joulehouse.collectors  <-  joulehouse.warehouse  <-  joulehouse.models  <-  joulehouse.reports
                                                                              <-  joulehouse.cli, joulehouse.dags

In the repository each layer keeps its own top-level folder (collectors/, warehouse/, ...);
pyproject.toml maps the folders onto these names. The node side (collectors) needs only the
`node` extra; nothing here imports the analytics side at import time.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("joulehouse")
except _metadata.PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
