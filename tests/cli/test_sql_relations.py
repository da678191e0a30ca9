"""The public SQL of every layer: `joulehouse sql --describe`, warehouse/RELATIONS.md, and a
warehouse built by the pipeline against both.

What a user relies on: every relation they can query is described (grain, each column with its
unit), the description matches what the warehouse really holds, column for column, and the
Markdown list in the repo is the one the code generates.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

import joulehouse.collectors.schema as lake_schema
from joulehouse.settings import settings_to_toml
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.cli.demo_run import demo_settings
from joulehouse.cli.sql import RELATIONS_MD, REGENERATE_RELATIONS, public_sql_dirs, register, relations_markdown
from joulehouse.warehouse.catalog import LAYERS, relations

DAY = dt.date(2026, 6, 10)
# Tables the pipeline keeps that are not relations for users, and why.
KNOWN_INTERNAL = {
    "jh_meta": "warehouse.db: the lake path of the last build, so read-only sessions find the lake",
    "stg_gpu_samples_files": "warehouse.readings: the Parquet files the view stg_gpu_samples reads",
    **{f"jh_contract_{d}": "warehouse.lake_contract: typed, empty stand-in of the dataset's documented columns"
       for d in lake_schema.DATASETS},
    **{f"jh_lake_{d}": "warehouse.lake_contract: the dataset's files read by the contract (its raw_ view's source)"
       for d in lake_schema.DATASETS},
}
# Relations whose header documents the lake dataset's columns by reference (collectors/schema.py).
LAKE_COLUMNS = {
    # every dataset's raw view (a new dataset is covered the day it is declared)
    **{f"raw_{dataset}": schema for dataset, schema in lake_schema.DATASETS.items()},
    "stg_gpu_samples": lake_schema.GPU_SAMPLES,
    "quarantine_gpu_samples": lake_schema.GPU_SAMPLES,
}
HIVE_PARTITION_COLUMNS = {"date", "host"}


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """joulehouse"""

    return app


def run(*args: str):
    return CliRunner().invoke(_app(), ["sql", *args])


def _public() -> dict:
    return {r.name: r for r in relations(public_sql_dirs()) if r.public}


def test_relations_md_is_up_to_date():
    assert RELATIONS_MD.read_text() == relations_markdown(), (
        f"{RELATIONS_MD} is out of date with the SQL headers; regenerate it: {REGENERATE_RELATIONS}"
    )


def test_describe_lists_every_layer_including_models_and_reports():
    listing = run("--describe")
    assert listing.exit_code == 0, listing.output
    text = listing.output
    headings = [next(line for line in text.splitlines() if line.startswith(layer + ":")) for layer in LAYERS]
    assert [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
    for name in ("raw_gpu_samples", "fct_power_model", "fct_recommendation_outcome", "rpt_carbon_daily",
                 "rpt_shift_opportunity_daily"):
        assert f"  {name} " in text, name
    for helper in ("power_suffstats", "acct_gpu_hours", "recommend_gpu_profile"):
        assert helper not in text, helper
    # Each relation sits under its own layer's heading.
    assert text.index("fct:") < text.index("fct_power_model") < text.index("rpt:") < text.index("rpt_tco_monthly")


def test_describe_one_relation_of_a_later_layer_gives_units():
    one = run("--describe", "rpt_tco_daily")
    assert one.exit_code == 0, one.output
    assert "reports/accounts/sql/rpt_tco_daily.sql" in one.output
    assert "capital_usd" in one.output and "[USD]" in one.output
    helper = run("--describe", "power_suffstats")
    assert helper.exit_code != 0 and "no relation 'power_suffstats'" in helper.output


def test_markdown_needs_describe_without_a_name():
    assert run("--markdown").exit_code != 0
    assert run("--describe", "dim_gpu", "--markdown").exit_code != 0


def test_every_public_relation_gives_each_column_a_unit():
    for r in _public().values():
        assert r.grain, r.name
        if r.name not in LAKE_COLUMNS:
            assert r.columns, f"{r.source}: no '--   column [unit] meaning' lines"
        for c in r.columns:
            assert c.unit.strip() and c.meaning.strip(), (r.source, c.name)


@pytest.fixture(scope="module")
def pipeline_warehouse(tmp_path_factory) -> Path:
    """One simulated day (16 GPUs on 2 hosts, one sample a minute) through the daily steps the DAG
    runs, except the GX checks (their table is created by the build) and the report/export."""
    from joulehouse import daily

    out = tmp_path_factory.mktemp("site")
    settings = demo_settings(out, out / "no-shared-data")  # built-in grid/price defaults
    config = out / "joulehouse.toml"
    config.write_text(settings_to_toml(settings))
    simulate_fleet(Path(settings.lake.path), gpus=16, days=1, start=DAY, seed=3, interval_s=60.0)
    for step in (daily.build_warehouse, daily.fit_power_models, daily.measure_efficiency_and_outcomes,
                 daily.account_carbon_and_cost, daily.recommend_power_limits):
        step(str(DAY), str(config))
    return Path(settings.warehouse.db_path)


def _warehouse_columns(db: Path) -> dict[str, list[str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


@pytest.mark.slow
def test_every_relation_the_pipeline_builds_is_described_or_known_internal(pipeline_warehouse):
    built = _warehouse_columns(pipeline_warehouse)
    public = _public()
    undescribed = sorted(set(built) - set(public) - set(KNOWN_INTERNAL))
    assert not undescribed, (
        f"tables/views {undescribed} are in the warehouse but neither described (a '-- kind:' header "
        "in their .sql file) nor listed in KNOWN_INTERNAL"
    )
    assert not sorted(set(public) - set(built)), "the catalog describes relations the pipeline never builds"


@pytest.mark.slow  # a simulated day through the DAG's daily steps (pipeline_warehouse), as its neighbour above
def test_described_columns_are_the_warehouse_columns(pipeline_warehouse):
    built = _warehouse_columns(pipeline_warehouse)
    for name, r in _public().items():
        documented = [c.name for c in r.columns]
        if name in LAKE_COLUMNS:
            inherited = set(pa.schema(LAKE_COLUMNS[name]).names) | HIVE_PARTITION_COLUMNS
            assert set(built[name]) <= set(documented) | inherited, (r.source, set(built[name]) - set(documented) - inherited)
            assert set(documented) <= set(built[name]), (r.source, set(documented) - set(built[name]))
        else:
            assert documented == built[name], (
                f"{r.source}: header lists {documented}, the warehouse has {built[name]}"
            )
