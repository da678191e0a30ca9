"""A vectorised simulator of a GPU fleet and its site, writing the lake the way collectors do.

`simulate_fleet(lake, gpus=32, days=2, start=date, seed=0)` writes gpu_samples (1 Hz),
node_samples (5 s), facility_samples (1 min), jobs and the inventory CSV; the returned
`SimulationSummary` carries the ground truth (true power coefficients per GPU model, in
`collectors.sim.constants`) that the fitted models should recover. Node side: numpy + pyarrow.
"""

from joulehouse.collectors.sim.simulate import CrossModelRun, GpuInfo, SimulationSummary, simulate_fleet

__all__ = ["CrossModelRun", "GpuInfo", "SimulationSummary", "simulate_fleet"]
