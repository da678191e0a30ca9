"""The lake's datasets and their Arrow schemas: the contract between node and warehouse.

Every column carries its unit in its name. Timestamps are UTC (`timestamp[us, UTC]`). A reading
a source does not have is NULL, never 0. Extra columns are allowed in files (NVML adds running
PIDs and a read error); these are the ones the warehouse relies on, and
its raw_* views read exactly these, by name. The types follow what the sources give: NVML power is integer mW, so
`power_w` as float32 holds it to better than 0.1 mW; counters are int64.

Precision kept, gpu_samples (deliberate, for storage; see STORAGE_STEP_BY_DATASET):
- power_w: float32 W, NVML's integer mW (float32 is within 0.03 mW of it up to 700 W), unchanged.
- energy_mj_total, pcie_*_bytes_per_s, sm/mem_clock_mhz, mem_used_mib: integers as the source
  gives them, exact (NVML's PCIe throughput is KiB/s, so those are multiples of 1024 there).
- temp_c, mem_temp_c, util_*_pct: float32 holding the sources' whole C and whole %, exact.
- the four DCGM `*_ratio` columns: rounded to a multiple of 2**-16 (1.5e-5), i.e. within 7.6e-6
  of the source's double. They are estimates from sampled hardware counters: no model or
  report reads them to 1e-5. The step is a power of two, so the stored float32 is exact and its
  low 8+ mantissa bits are zero, which byte-stream-split + zstd then store almost for free.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

TS = pa.timestamp("us", tz="UTC")

GPU_SAMPLES = pa.schema(
    [
        pa.field("sampled_at", TS, nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_index", pa.int16(), nullable=False),
        pa.field("gpu_uuid", pa.string(), nullable=False),
        pa.field("gpu_model", pa.string()),
        pa.field("power_w", pa.float32()),
        pa.field("energy_mj_total", pa.int64()),
        pa.field("temp_c", pa.float32()),
        pa.field("mem_temp_c", pa.float32()),
        pa.field("sm_clock_mhz", pa.int32()),
        pa.field("mem_clock_mhz", pa.int32()),
        pa.field("util_gpu_pct", pa.float32()),
        pa.field("util_mem_pct", pa.float32()),
        pa.field("sm_active_ratio", pa.float32()),
        pa.field("sm_occupancy_ratio", pa.float32()),
        pa.field("tensor_active_ratio", pa.float32()),
        pa.field("dram_active_ratio", pa.float32()),
        pa.field("pcie_tx_bytes_per_s", pa.int64()),
        pa.field("pcie_rx_bytes_per_s", pa.int64()),
        pa.field("power_limit_w", pa.float32()),
        pa.field("mem_used_mib", pa.int32()),
        pa.field("pstate", pa.int8()),
        # NVML clocks-event (throttle) reasons bitmask, nvmlClocksEventReason* constants.
        pa.field("clock_event_reasons", pa.int64()),
        pa.field("source", pa.string(), nullable=False),
        # The device's own power-limit range and default, W (NVML's management-limit constraints and
        # default limit, read once per GPU): what a limit may be set to, whatever a cap holds now.
        # NULL where the source has none (DCGM, older files, nvidia-smi logs without
        # power.default_limit, power.min_limit and power.max_limit).
        pa.field("power_limit_min_w", pa.float32()),
        pa.field("power_limit_max_w", pa.float32()),
        pa.field("power_limit_default_w", pa.float32()),
    ]
)

NODE_SAMPLES = pa.schema(
    [
        pa.field("sampled_at", TS, nullable=False),
        pa.field("host", pa.string(), nullable=False),
        # DCMI "Instantaneous power reading" of the whole server, W.
        pa.field("power_w", pa.float32()),
        # The SDR's own total-power sensor where the BMC has one, W.
        pa.field("sdr_power_w", pa.float32()),
        pa.field("inlet_temp_c", pa.float32()),
        pa.field("exhaust_temp_c", pa.float32()),
        pa.field("fan_rpm_avg", pa.float32()),
        pa.field("source", pa.string(), nullable=False),
        # Why power_w is NULL ("dcmi deactivated: ...", "dcmi no answer: ..."; collectors/sources/ipmi.py);
        # NULL where power_w has a reading.
        pa.field("power_w_null_reason", pa.string()),
    ]
)

# One row per site and reading. Partitioned under host=<site> so the lake keeps one layout.
FACILITY_SAMPLES = pa.schema(
    [
        pa.field("sampled_at", TS, nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("facility_power_w", pa.float64()),
        pa.field("it_power_w", pa.float64()),
        pa.field("outdoor_temp_c", pa.float32()),
        pa.field("source", pa.string(), nullable=False),
    ]
)

# One row per job and GPU it held. Work counters, precision and batch size are optional (NULL when a
# job reports none).
JOBS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_uuid", pa.string(), nullable=False),
        pa.field("started_at", TS, nullable=False),
        pa.field("ended_at", TS, nullable=False),
        pa.field("user", pa.string()),
        pa.field("team", pa.string()),
        # data-preparation | training | inference | evaluation
        pa.field("stage", pa.string()),
        # latency-sensitive | throughput | background
        pa.field("workload_class", pa.string()),
        pa.field("deferrable", pa.bool_()),
        pa.field("requests_total", pa.int64()),
        pa.field("tokens_total", pa.int64()),
        pa.field("samples_total", pa.int64()),
        pa.field("flops_total", pa.float64()),
        # Where the scheduler or the job says: numeric precision (fp32, tf32, bf16, fp16, fp8,
        # int8, int4) and batch size (per step or per forward pass, samples or sequences).
        pa.field("precision", pa.string()),
        pa.field("batch_size", pa.int32()),
    ]
)
JOB_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")

# One row per (GPU, compute process) per poll of the NVML collector's process map
# (collectors/sources/gpu_processes.py): which scheduler's job each process belongs to, from the
# cgroup it runs in. Slurm: `job_id` (the numeric id of the cgroup's job_<id>); Kubernetes:
# `pod_uid` (with dashes) and `container_id`. Neither found: scheduler NULL.
GPU_PROCESSES = pa.schema(
    [
        pa.field("sampled_at", TS, nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_index", pa.int16()),
        pa.field("gpu_uuid", pa.string(), nullable=False),
        pa.field("pid", pa.int64(), nullable=False),
        # GPU memory the process holds, MiB (NULL where NVML cannot tell, e.g. under MIG or vGPU).
        pa.field("used_gpu_memory_mib", pa.int64()),
        # slurm | kubernetes | NULL (a process outside any scheduler's cgroup, or gone before it was read)
        pa.field("scheduler", pa.string()),
        pa.field("job_id", pa.string()),
        pa.field("pod_uid", pa.string()),
        pa.field("container_id", pa.string()),
        pa.field("source", pa.string(), nullable=False),
    ]
)

AGENT_AUDIT = pa.schema(
    [
        pa.field("audited_at", TS, nullable=False),
        pa.field("host", pa.string(), nullable=False),
        pa.field("gpu_uuid", pa.string()),
        # apply | refuse | rollback | dry-run | verify-failed | unchanged
        pa.field("action", pa.string(), nullable=False),
        pa.field("config_sha256", pa.string()),
        pa.field("power_limit_w_before", pa.float32()),
        pa.field("power_limit_w_requested", pa.float32()),
        pa.field("power_limit_w_after", pa.float32()),
        pa.field("reason", pa.string()),
    ]
)

# One row per link and reading: a GPU's NVLink (DCGM fields 1011/1012, or NVML's throughput
# counters), a node's InfiniBand or RoCE port (node_exporter's infiniband collector; `device` is
# "<hca>/<port>"). PCIe stays in gpu_samples. Rates are bytes per second in each direction;
# `capacity_bytes_per_s` is the link's own rate per direction where the source reads it (the IB
# port's rate, NVLink version x active links), else NULL and the warehouse takes it from the GPU
# model (models/gpu_catalogue.csv).
LINK_SAMPLES = pa.schema(
    [
        pa.field("sampled_at", TS, nullable=False),
        pa.field("host", pa.string(), nullable=False),
        # nvlink | infiniband (RoCE ports are listed by the same collector)
        pa.field("link_kind", pa.string(), nullable=False),
        # the GPU's UUID for nvlink, "<hca>/<port>" (mlx5_0/1) for a network port
        pa.field("device", pa.string(), nullable=False),
        pa.field("gpu_index", pa.int16()),
        pa.field("gpu_model", pa.string()),
        pa.field("tx_bytes_per_s", pa.float64()),
        pa.field("rx_bytes_per_s", pa.float64()),
        pa.field("capacity_bytes_per_s", pa.float64()),
        pa.field("source", pa.string(), nullable=False),
    ]
)

DATASETS: dict[str, pa.Schema] = {
    "gpu_samples": GPU_SAMPLES,
    "node_samples": NODE_SAMPLES,
    "facility_samples": FACILITY_SAMPLES,
    "jobs": JOBS,
    "gpu_processes": GPU_PROCESSES,
    "agent_audit": AGENT_AUDIT,
    "link_samples": LINK_SAMPLES,
}

# The lake contract (ARCHITECTURE.md, "The lake"): the columns the warehouse requires of every
# file of a dataset. Every other column of the schema is optional (NULL where a file lacks it) and
# a file may carry extra ones. The writer's schema marks these same columns non-nullable.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "gpu_samples": ("sampled_at", "host", "gpu_index", "gpu_uuid", "source"),
    "node_samples": ("sampled_at", "host", "source"),
    "facility_samples": ("sampled_at", "site", "source"),
    "jobs": ("job_id", "host", "gpu_uuid", "started_at", "ended_at"),
    "agent_audit": ("audited_at", "host", "action"),
    "gpu_processes": ("sampled_at", "host", "gpu_uuid", "pid", "source"),
    "link_samples": ("sampled_at", "host", "link_kind", "device", "source"),
}
# At least one column of each group: a GPU reading counts towards energy through power or the counter.
REQUIRED_ONE_OF: dict[str, tuple[tuple[str, ...], ...]] = {
    "gpu_samples": (("power_w", "energy_mj_total"),),
}

# The column each dataset's rows are dated by (picks the date= partition) and sorted by.
TIME_COLUMN = {
    "gpu_samples": "sampled_at",
    "node_samples": "sampled_at",
    "facility_samples": "sampled_at",
    "jobs": "started_at",
    "gpu_processes": "sampled_at",
    "agent_audit": "audited_at",
    "link_samples": "sampled_at",
}
PARTITION_HOST_COLUMN = {
    "gpu_samples": "host",
    "node_samples": "host",
    "facility_samples": "site",
    "jobs": "host",
    "gpu_processes": "host",
    "agent_audit": "host",
    "link_samples": "host",
}
SORT_KEYS = {
    "gpu_samples": [("gpu_uuid", "ascending"), ("sampled_at", "ascending")],
    "node_samples": [("host", "ascending"), ("sampled_at", "ascending")],
    "facility_samples": [("site", "ascending"), ("sampled_at", "ascending")],
    "jobs": [("started_at", "ascending"), ("job_id", "ascending")],
    "gpu_processes": [("gpu_uuid", "ascending"), ("sampled_at", "ascending"), ("pid", "ascending")],
    "agent_audit": [("audited_at", "ascending")],
    "link_samples": [("device", "ascending"), ("sampled_at", "ascending")],
}


# Columns stored rounded to a multiple of a power-of-two step (see the module docstring). Rounding
# is half-to-even, NULL stays NULL, and rounding an already rounded value changes nothing.
RATIO_STEP = 2.0**-16
STORAGE_STEP_BY_DATASET: dict[str, dict[str, float]] = {
    "gpu_samples": {name: RATIO_STEP for name in ("sm_active_ratio", "sm_occupancy_ratio",
                                                  "tensor_active_ratio", "dram_active_ratio")},
}


class SchemaError(ValueError):
    """A batch does not fit its dataset's schema."""


def signed_integer_bounds(schema: pa.Schema) -> dict[str, tuple[int, int]]:
    """{column: (lowest, highest)} of each signed integer column of `schema`: what it can hold. A
    reading past them made pyarrow refuse the whole table it was in."""
    return {f.name: (-(2 ** (f.type.bit_width - 1)), 2 ** (f.type.bit_width - 1) - 1)
            for f in schema if pa.types.is_signed_integer(f.type)}


def round_to_step(column: pa.ChunkedArray | pa.Array, step: float) -> pa.ChunkedArray | pa.Array:
    """`column` (floating) rounded half-to-even to a multiple of the power-of-two `step`, same type."""
    wide = pc.cast(column, pa.float64())
    # Scaling by a power of two is exact in float64, so only the rounding changes the value.
    return pc.cast(pc.multiply(pc.round(pc.multiply(wide, 1.0 / step)), step), column.type)


def conform(dataset: str, table: pa.Table) -> pa.Table:
    """Return `table` with the dataset's columns in order and types, rounded to their storage
    step (STORAGE_STEP_BY_DATASET); missing nullable columns become NULL, extra columns are kept
    after them. Raises SchemaError naming the column."""
    try:
        schema = DATASETS[dataset]
    except KeyError:
        raise SchemaError(f"unknown dataset {dataset!r}; expected one of {sorted(DATASETS)}") from None
    twice = sorted({n for n in table.column_names if table.column_names.count(n) > 1})
    if twice:  # table.column(name) raised KeyError for them, which no caller expects of a schema
        raise SchemaError(f"{dataset}: column(s) {', '.join(twice)} named more than once")
    steps = STORAGE_STEP_BY_DATASET.get(dataset, {})
    columns, fields = [], []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            try:
                col = col.cast(f.type) if col.type != f.type else col
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(f"{dataset}.{f.name}: cannot store {col.type} as {f.type}: {exc}") from None
            if not f.nullable and col.null_count:
                raise SchemaError(f"{dataset}.{f.name}: {col.null_count} NULL values in a required column")
            if f.name in steps:
                col = round_to_step(col, steps[f.name])
        elif f.nullable:
            col = pa.nulls(table.num_rows, f.type)
        else:
            raise SchemaError(f"{dataset}: required column {f.name!r} is missing")
        columns.append(col)
        fields.append(f)
    for name in table.column_names:
        if name not in schema.names:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))
