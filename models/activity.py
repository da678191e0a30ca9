"""One stream of readings per GPU and day, for the power fit and every model that reads activity.

A GPU read by NVML and by DCGM has two streams; taken together they mix two measures of activity,
count the GPU's time twice and, in the fit's feature choice, let NVML's 1 Hz rows outvote DCGM's.
models/sql/gpu_activity_streams.sql chooses one stream per GPU and day (and says why);
`create_activity_view` puts models/sql/gpu_activity_samples.sql (the readings of those streams,
with activity and memory activity as ratios) over a samples relation as a temporary view.

Which measure a reading's activity is read in is written once, as two SQL macros that
`create_activity_macros` creates: activity_of_kind.sql (the ratio of a kind: DCGM's SM / DRAM
activity or NVML's utilisations / 100) and fit_activity_kind.sql (the kind a GPU model's power fit
reads, else the stream's). The view and every file that scores activity with a fit
(power_interval_profiles.sql, recommend_gpu_profile.sql) call them, and the fit's own features
(power_feature_rows.sql, fct_power_fit_sums_hourly.sql) call activity_of_kind in the kind of the
feature set they chose, so none can read another measure. Spark has no macros:
warehouse.spark_engine names these files among those it inlines.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.sql import SQL, load_sql
from joulehouse.warehouse.sqlio import quoted_relation, relation_exists

ACTIVITY_VIEW = "gpu_activity_samples"
STREAMS_TABLE = "gpu_activity_streams"
ACTIVITY_MACROS = ("activity_of_kind", "fit_activity_kind")
# A relation from elsewhere (an import, a test frame) may lack a source's columns: NULL, as the lake has them.
OPTIONAL_COLUMNS = (("host", "VARCHAR"), ("source", "VARCHAR"), ("gpu_model", "VARCHAR"), ("sm_active_ratio", "FLOAT"),
                    ("dram_active_ratio", "FLOAT"), ("util_gpu_pct", "FLOAT"), ("util_mem_pct", "FLOAT"))


def choose_streams(con: duckdb.DuckDBPyConnection, samples_relation: str, first_day: dt.date, last_day: dt.date,
                   *, table: str = STREAMS_TABLE) -> int:
    """(Re)create the temp table `table` (gpu_activity_streams.sql) for days first_day..last_day of
    `samples_relation`; returns how many of those GPU-days had more than one stream.

    Raises ValueError when the relation does not exist, naming it and what builds it."""
    quoted = quoted_relation(samples_relation)
    if not relation_exists(con, samples_relation):
        raise ValueError(f"relation {samples_relation!r} is missing; build the warehouse day first "
                         "(joulehouse warehouse build)")
    samples_view(con, "stream_input_samples", quoted)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {quoted_relation(table)} AS {load_sql('gpu_activity_streams')}",
                {"first_day": first_day, "last_day": last_day})
    (several,) = con.execute(f"SELECT count(*) FROM {quoted_relation(table)} WHERE n_streams > 1").fetchone()
    return several


def samples_view(con: duckdb.DuckDBPyConnection, name: str, quoted: str) -> None:
    """Temp view `name` over the quoted relation, with NULL for the optional columns it lacks.
    Apart for the fit and the activity view: a view over another's input would follow its redefinition."""
    present = {row[0] for row in con.execute(f"DESCRIBE {quoted}").fetchall()}
    absent = "".join(f", CAST(NULL AS {kind}) AS {column}" for column, kind in OPTIONAL_COLUMNS if column not in present)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT *{absent} FROM {quoted}")


def create_activity_view(con: duckdb.DuckDBPyConnection, first_day: dt.date, last_day: dt.date | None = None,
                         samples_relation: str = "stg_gpu_samples") -> str:
    """(Re)create the temp view gpu_activity_samples over days first_day..last_day (default: the
    one day) of `samples_relation`; returns its name. Other days' readings are not in it."""
    choose_streams(con, samples_relation, first_day, last_day or first_day)
    samples_view(con, "activity_input_samples", quoted_relation(samples_relation))
    create_activity_macros(con)  # before the view: DuckDB binds a view's macros when it is created
    con.execute(f"CREATE OR REPLACE TEMP VIEW {ACTIVITY_VIEW} AS {load_sql('gpu_activity_samples')}")
    return ACTIVITY_VIEW


def create_activity_macros(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the temp macros activity_of_kind and fit_activity_kind (models/sql) on `con`:
    create_activity_view does; a query that reads these files over a relation of its own calls it."""
    for macro in ACTIVITY_MACROS:
        SQL.execute(con, macro)
