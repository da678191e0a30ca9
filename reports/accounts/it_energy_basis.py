"""Which IT energy the accounts charge: the server's BMC (IPMI) energy where it is trustworthy,
else the GPUs' board energy (pure, frame in, frame out).

Policy, per host-hour:
- 'node_ipmi' when fct_node_energy_hourly has energy_kwh for the host-hour, its coverage_ratio is
  at least `min_node_coverage_ratio`, it is not below the sum of the host's GPU energies (a
  server cannot draw less than its own GPUs: then the meters disagree and the BMC is not used),
  and either every GPU row of the host-hour has its board energy or none has: with some measured
  and some not, no share says what the unmeasured ones drew (split by board energy, they took 0
  of the server's energy and a measured GPU's job was charged their draw), so the host-hour stays
  on the GPU basis and the unmeasured ones count as unmetered. A GPU of the fleet with no row at
  all in the host-hour (`unread`: its readings lost) is unmeasured the same way: split among the
  GPUs that were read, its draw was charged to their jobs.
  The node kWh is taken over the whole hour: its energy over the covered part / coverage_ratio
  (the BMC's average power x 1 h; at most 1/min_node_coverage_ratio of what it measured), so a BMC
  that missed the hour's last minutes does not charge less than the hour drew.
  The node kWh (CPUs, memory, fans, PSU losses included) is split among the host's GPUs in
  proportion to each GPU's board energy in that hour; when the GPUs' energies sum to zero or are
  all NULL it is split equally among the GPU rows of that host-hour. The split adds up to the
  node kWh exactly, so attributed == metered at the node basis.
- 'gpu_only' otherwise: the GPU board energy, as measured (CPUs etc. not counted).
Every row keeps its board energy in `gpu_energy_kwh`; `energy_kwh` becomes the IT energy and
`it_energy_basis` says which basis it is.
"""

from __future__ import annotations

import polars as pl

NODE_BASIS = "node_ipmi"
GPU_BASIS = "gpu_only"


def apply_it_energy_basis(
    gpu_hours: pl.DataFrame, node_hours: pl.DataFrame, min_node_coverage_ratio: float,
    unread: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, dict[str, int]]:
    """gpu_hours (hour_at, host, energy_kwh [kWh board], ...) and node_hours (hour_at, host,
    energy_kwh [kWh], coverage_ratio) -> gpu_hours with energy_kwh [kWh IT], gpu_energy_kwh
    [kWh board] and it_energy_basis; `unread` (hour_at, host): one row per GPU of the fleet
    without a row that hour. Also returns host-hour counts: node_ipmi, gpu_only_no_node (no BMC
    energy), gpu_only_low_coverage, gpu_only_node_below_gpus, gpu_only_gpu_unmeasured."""
    if not 0.0 <= min_node_coverage_ratio <= 1.0:
        raise ValueError(f"min_node_coverage_ratio={min_node_coverage_ratio}: expected a ratio in [0, 1]")
    board = gpu_hours.with_columns(pl.col("energy_kwh").alias("gpu_energy_kwh"))
    host_hours = board.group_by(["hour_at", "host"]).agg(
        pl.col("gpu_energy_kwh").sum().alias("_gpu_sum_kwh"),
        pl.len().alias("_n_gpu_rows"),
        pl.col("gpu_energy_kwh").null_count().alias("_n_unmeasured"),
    )
    if unread is not None and unread.height:
        absent = unread.group_by(["hour_at", "host"]).agg(pl.len().alias("_n_absent"))
        host_hours = host_hours.join(absent, on=["hour_at", "host"], how="left").with_columns(
            # an absent GPU is unmeasured and has no row to carry a share: never all-or-none
            pl.col("_n_absent").fill_null(0).alias("_n_absent"))
    else:
        host_hours = host_hours.with_columns(pl.lit(0, pl.UInt32).alias("_n_absent"))
    coverage = pl.col("coverage_ratio").cast(pl.Float64)
    node = node_hours.select(
        "hour_at", "host",
        pl.when(coverage > 0).then(pl.col("energy_kwh").cast(pl.Float64) / coverage).alias("_node_kwh"),
        coverage.alias("_node_coverage"),
    ).unique(["hour_at", "host"])
    decided = host_hours.join(node, on=["hour_at", "host"], how="left").with_columns(
        pl.when(pl.col("_node_kwh").is_null()).then(pl.lit("gpu_only_no_node"))
        .when(pl.col("_node_coverage").fill_null(0.0) < min_node_coverage_ratio).then(pl.lit("gpu_only_low_coverage"))
        # 1e-9 kWh of slack: equal meters are not a disagreement.
        .when(pl.col("_node_kwh") < pl.col("_gpu_sum_kwh") - 1e-9).then(pl.lit("gpu_only_node_below_gpus"))
        .when(((pl.col("_n_unmeasured") > 0) & (pl.col("_n_unmeasured") < pl.col("_n_gpu_rows")))
              | (pl.col("_n_absent") > 0))
        .then(pl.lit("gpu_only_gpu_unmeasured"))
        .otherwise(pl.lit(NODE_BASIS)).alias("_decision")
    )
    counts = {k: 0 for k in (NODE_BASIS, "gpu_only_no_node", "gpu_only_low_coverage", "gpu_only_node_below_gpus",
                             "gpu_only_gpu_unmeasured")}
    for decision, n in decided.group_by("_decision").len().iter_rows():
        counts[decision] = int(n)
    use_node = pl.col("_decision") == NODE_BASIS
    share = (
        pl.when(pl.col("_gpu_sum_kwh") > 0).then(pl.col("gpu_energy_kwh").fill_null(0.0) / pl.col("_gpu_sum_kwh"))
        .otherwise(1.0 / pl.col("_n_gpu_rows"))
    )
    out = (
        board.join(decided.select("hour_at", "host", "_decision", "_node_kwh", "_gpu_sum_kwh", "_n_gpu_rows"),
                   on=["hour_at", "host"], how="left")
        .with_columns(
            pl.when(use_node).then(pl.col("_node_kwh") * share).otherwise(pl.col("gpu_energy_kwh")).alias("energy_kwh"),
            pl.when(use_node).then(pl.lit(NODE_BASIS)).otherwise(pl.lit(GPU_BASIS)).alias("it_energy_basis"),
        )
        .drop("_decision", "_node_kwh", "_gpu_sum_kwh", "_n_gpu_rows")
    )
    return out, counts


def basis_note(counts: dict[str, int], min_node_coverage_ratio: float) -> str:
    """One sentence for the summary's notes: how many host-hours used which basis and why."""
    gpu_only = {k: v for k, v in counts.items() if k != NODE_BASIS and v}
    text = f"IT energy: {counts.get(NODE_BASIS, 0)} host-hours at the server's BMC energy (node_ipmi, split by GPU share)"
    if gpu_only:
        why = {"gpu_only_no_node": "no BMC energy",
               "gpu_only_low_coverage": f"BMC coverage below {min_node_coverage_ratio}",
               "gpu_only_node_below_gpus": "BMC energy below its GPUs' energy",
               "gpu_only_gpu_unmeasured": "a GPU of the server without board energy"}
        text += "; GPU board energy only (gpu_only: CPUs, fans and PSU losses not counted) for " + ", ".join(
            f"{n} ({why[k]})" for k, n in sorted(gpu_only.items()))
    return text


BASIS_AMOUNTS = ["gpu_energy_kwh", "node_ipmi_energy_kwh"]


def with_basis_amounts(gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """Add the additive basis columns the accounts carry to the report rows: gpu_energy_kwh (kWh
    board; = energy_kwh where no basis was applied) and node_ipmi_energy_kwh (kWh of energy_kwh
    at the node_ipmi basis, else 0)."""
    frame = gpu_hours
    if "gpu_energy_kwh" not in frame.columns:
        frame = frame.with_columns(pl.col("energy_kwh").alias("gpu_energy_kwh"))
    if "it_energy_basis" not in frame.columns:
        frame = frame.with_columns(pl.lit(GPU_BASIS).alias("it_energy_basis"))
    return frame.with_columns(
        pl.when(pl.col("it_energy_basis") == NODE_BASIS).then(pl.col("energy_kwh")).otherwise(0.0).alias("node_ipmi_energy_kwh"))


def with_facility_energy(gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """GPU-hours (with `pue`) plus the basis amounts and facility_energy_kwh = IT energy x PUE, the
    energy at the meter both accounts start from."""
    return with_basis_amounts(gpu_hours).with_columns((pl.col("energy_kwh") * pl.col("pue")).alias("facility_energy_kwh"))


def label_basis(rows: pl.DataFrame) -> pl.DataFrame:
    """Add it_energy_basis to report rows from their node_ipmi_energy_kwh share of energy_kwh:
    'node_ipmi' (all of it), 'gpu_only' (none), 'mixed' (the row's GPU-hours used both)."""
    node = pl.col("node_ipmi_energy_kwh").fill_null(0.0)
    total = pl.col("energy_kwh").fill_null(0.0)
    return rows.with_columns(
        pl.when(node.abs() <= 1e-12).then(pl.lit(GPU_BASIS))
        .when((total - node).abs() <= 1e-9 * total.abs().clip(lower_bound=1.0)).then(pl.lit(NODE_BASIS))
        .otherwise(pl.lit("mixed")).alias("it_energy_basis"))
