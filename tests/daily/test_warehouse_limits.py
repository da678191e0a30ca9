"""[warehouse] threads and memory_limit hold for the daily run's steps, not only for the bench: an
operator's trial set memory_limit = "1MB" and threads = 1 and the run went on at DuckDB's defaults
(every core, 80% of the machine's memory); "lots" and "1KB" passed the settings check as well."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from joulehouse import daily
from joulehouse.settings import LakeSettings, Settings, WarehouseSettings


def _limits(con) -> tuple[str, int]:
    return con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchone()


def test_each_step_of_the_run_works_within_the_configured_limits(tmp_path):
    settings = Settings(lake=LakeSettings(path=str(tmp_path / "lake")),
                        warehouse=WarehouseSettings(db_path=str(tmp_path / "warehouse.duckdb"), threads=1,
                                                    memory_limit="300MB"))
    with daily._warehouse(settings) as con:  # a writing step, on its copy
        assert _limits(con) == ("286.1 MiB", 1)
        con.execute("CREATE TABLE t AS SELECT 1 AS n")
    with daily._warehouse(settings, read_only=True) as con:
        assert _limits(con) == ("286.1 MiB", 1)


@pytest.mark.parametrize("value, why", [
    ("lots", "not a size in DuckDB's notation"),
    ("1KB", "too little for DuckDB to work in"),
    ("0%", "1% to 100%"),
    ("512", "not a size in DuckDB's notation"),
])
def test_a_memory_size_duckdb_cannot_work_in_is_refused_when_read(value, why):
    for field in ("memory_limit", "query_memory_limit", "query_spill_limit"):
        if field == "query_spill_limit" and value == "1KB":
            continue  # disk: a small spill limit is a choice (the sandbox's tests use 32MB)
        with pytest.raises(ValidationError, match=why):
            WarehouseSettings(**{field: value})
    assert WarehouseSettings(query_spill_limit="32MB").query_spill_limit == "32MB"
    with pytest.raises(ValidationError, match="too little"):
        WarehouseSettings(query_spill_limit="10KB")
    assert WarehouseSettings(memory_limit="1.5GiB", query_memory_limit="80%").memory_limit == "1.5GiB"
    with pytest.raises(ValidationError):
        WarehouseSettings(threads=100_000)


def test_the_jobs_shares_weigh_readings_by_the_gaps_the_day_was_built_with(tmp_path, monkeypatch):
    """The energy step bridges gaps up to [warehouse] max_gap_s; the jobs' shares weigh a reading
    where it did. The run called build_efficiency without the settings: a site with max_gap_s = 60
    split its GPU-hours by the 10 s default (a 30 s reading weighed nothing)."""
    import joulehouse.models.efficiency as efficiency
    import joulehouse.models.efficiency_precision as precision
    import joulehouse.models.outcome as outcome

    seen = {}
    monkeypatch.setattr(efficiency, "build_efficiency", lambda con, day, **kw: seen.update(kw) or {})
    monkeypatch.setattr(precision, "precision_efficiency_day", lambda con, day, **kw: {})
    monkeypatch.setattr(outcome, "measure_outcomes", lambda con, day: 0)
    config = tmp_path / "site.toml"
    config.write_text(f'[lake]\npath = "{tmp_path / "lake"}"\n[warehouse]\ndb_path = "{tmp_path / "w.duckdb"}"\n'
                      "max_gap_s = 60\n")
    daily.measure_efficiency_and_outcomes("2026-06-12", str(config))
    assert seen["warehouse"].max_gap_s == 60


def test_consolidation_weighs_readings_by_the_gaps_the_day_was_built_with(tmp_path, monkeypatch):
    """Consolidation counts a reading for the time the warehouse bridged after it ([warehouse]
    max_gap_s); the run called recommend_placement without the settings, so a site importing logs
    read every 300 s with max_gap_s = 300 had its light GPUs judged by the 10 s default."""
    import joulehouse.models.placement as placement
    import joulehouse.models.recommend as recommend

    seen = {}
    monkeypatch.setattr(recommend, "recommend_day", lambda con, day, settings, **kw: 0)
    monkeypatch.setattr(placement, "recommend_placement", lambda con, day, **kw: seen.update(kw) or 0)
    config = tmp_path / "site.toml"
    config.write_text(f'[lake]\npath = "{tmp_path / "lake"}"\n[warehouse]\ndb_path = "{tmp_path / "w.duckdb"}"\n'
                      "max_gap_s = 300\n")
    daily.recommend_power_limits("2026-06-12", str(config))
    assert seen["warehouse"].max_gap_s == 300
