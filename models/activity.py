"""One activity stream per GPU and day, for every model that reads activity sample by sample.

A GPU read by NVML and by DCGM has two streams of readings; models that took each row's
coalesce(SM activity, utilisation) mixed the two measures and counted the GPU's time once per
stream. `create_activity_view` puts models/sql/gpu_activity_samples.sql (which stream, which
measure, and why) over a samples relation as the temporary view `gpu_activity_samples`.
"""

from __future__ import annotations

import duckdb

from models.power import quoted_relation
from models.sql import load_sql
from warehouse.db import relation_exists

ACTIVITY_VIEW = "gpu_activity_samples"
OPTIONAL_COLUMNS = (("source", "VARCHAR"), ("gpu_model", "VARCHAR"), ("sm_active_ratio", "FLOAT"),
                    ("dram_active_ratio", "FLOAT"), ("util_gpu_pct", "FLOAT"), ("util_mem_pct", "FLOAT"))


def create_activity_view(con: duckdb.DuckDBPyConnection, samples_relation: str = "stg_gpu_samples") -> str:
    """(Re)create the temporary view gpu_activity_samples over `samples_relation`; returns its name.

    Raises ValueError when the relation does not exist, naming it and what builds it."""
    quoted = quoted_relation(samples_relation)
    if not relation_exists(con, samples_relation):
        raise ValueError(f"relation {samples_relation!r} is missing; build the warehouse day first "
                         "(joulehouse warehouse build)")
    present = {row[0] for row in con.execute(f"DESCRIBE {quoted}").fetchall()}
    # A relation from elsewhere (an import, a test frame) may lack a source's columns: NULL, as the lake has them.
    absent = "".join(f", CAST(NULL AS {kind}) AS {name}" for name, kind in OPTIONAL_COLUMNS if name not in present)
    con.execute(f"CREATE OR REPLACE TEMP VIEW activity_input_samples AS SELECT *{absent} FROM {quoted}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {ACTIVITY_VIEW} AS {load_sql('gpu_activity_samples')}")
    return ACTIVITY_VIEW
