"""What the demo and `joulehouse run` print: words, not Python reprs; the running DAG task read
from Airflow's own metadata database."""

from __future__ import annotations

import sqlite3
import threading
import time

from joulehouse.cli.dagrun import DAG_ID, watch_tasks
from joulehouse.cli.demo_run import describe_rows
from joulehouse.cli.headline import plural


def test_rows_and_counts_read_as_words():
    assert plural(1, "GPU") == "1 GPU" and plural(32, "GPU") == "32 GPUs" and plural(1200, "row") == "1,200 rows"
    text = describe_rows({"gpu_samples": 5_529_600, "node_samples": 1, "jobs": 359})
    assert text == "5,529,600 GPU readings, 1 server (BMC) reading, 359 job-on-GPU rows"
    assert "{" not in text and "'" not in text


def test_every_dataset_has_words_for_its_rows():
    """Before: '691,200 link_sampless' (a dataset added without its words)."""
    from joulehouse.cli.demo_run import ROW_WORDS
    from joulehouse.collectors.schema import DATASETS

    assert set(DATASETS) <= set(ROW_WORDS)


def _metadata(path):
    """The two tables of Airflow's metadata schema the watcher reads, as Airflow 3 names them."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE dag_run (id INTEGER PRIMARY KEY, dag_id TEXT, run_id TEXT);
        CREATE TABLE task_instance (task_id TEXT, dag_id TEXT, run_id TEXT, map_index INTEGER, state TEXT,
                                    start_date TIMESTAMP);
        INSERT INTO dag_run VALUES (1, 'joulehouse_daily', 'manual__old'), (2, 'joulehouse_daily', 'manual__new');
        INSERT INTO task_instance VALUES ('build_warehouse', 'joulehouse_daily', 'manual__old', -1, 'running', '2026-01-01');
    """)
    for i, task in enumerate(("list_lake_hosts", "build_warehouse", "check_data", "render_report")):
        con.execute("INSERT INTO task_instance VALUES (?, ?, 'manual__new', -1, NULL, NULL)", [task, DAG_ID])
    con.commit()
    return con


def test_the_watcher_names_the_running_task_of_the_newest_run(tmp_path):
    db = tmp_path / "airflow.db"
    con = _metadata(db)
    heard: list[tuple[str, int, int]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_tasks, args=(db, lambda *a: heard.append(a), stop, 0.02))
    watcher.start()
    try:
        for done, task in enumerate(("list_lake_hosts", "build_warehouse", "check_data")):
            con.execute("UPDATE task_instance SET state = 'success' WHERE run_id = 'manual__new' AND state = 'running'")
            con.execute("UPDATE task_instance SET state = 'running', start_date = CURRENT_TIMESTAMP "
                        "WHERE run_id = 'manual__new' AND task_id = ?", [task])
            con.commit()
            deadline = time.monotonic() + 5
            while (task, done, 4) not in heard and time.monotonic() < deadline:
                time.sleep(0.02)
    finally:
        stop.set()
        watcher.join()
    assert heard == [("list_lake_hosts", 0, 4), ("build_warehouse", 1, 4), ("check_data", 2, 4)]


def test_the_headline_counts_a_failed_warning_apart_from_a_blocking_failure(tmp_path):
    """Before: the demo's headline read 'data checks failed 1' on every day, for a warning (GPUs
    of the real traces not in the inventory) that does not stop the run."""
    import datetime as dt

    import duckdb
    from rich.console import Console

    from joulehouse.cli.headline import day_headline, headline_table

    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE fct_check_results (day DATE, suite VARCHAR, expectation VARCHAR, severity VARCHAR, "
                "success BOOLEAN, observed_value VARCHAR, details VARCHAR, checked_at TIMESTAMPTZ)")
    day = dt.date(2026, 6, 11)
    con.executemany("INSERT INTO fct_check_results VALUES (?, 's', ?, ?, ?, NULL, NULL, now())",
                    [(day, "a", "warning", False), (day, "b", "warning", False), (day, "c", "blocking", True),
                     (day - dt.timedelta(days=1), "d", "blocking", False)])
    con.close()
    numbers, _ = day_headline(str(db), str(tmp_path / "lake"), day)
    assert numbers["checks_failed"] == 0 and numbers["checks_warned"] == 2
    assert numbers["energy_kwh"] is None  # no hourly facts built: not computed, never 0
    console = Console(width=120, record=True)
    console.print(headline_table(day, numbers, "t"))
    text = console.export_text()
    assert "data checks failed (blocking)" in text and "data checks warned (the run goes on)" in text
    assert "GPU energy" in text and "not computed" in text


def test_the_headline_counts_the_gpus_the_export_caps_and_prints_small_amounts_as_the_page_does(tmp_path):
    """A model whose power model failed its gate has its settings held back by the export: the
    headline printed all 3 recommended GPUs as capped where the export and the page said 1. And a
    fixed one decimal printed 1.1 Wh as "0.0 kWh" and 3.5e-5 USD as "0.00 USD"."""
    import datetime as dt

    import duckdb
    from rich.console import Console

    from joulehouse.cli.headline import day_headline, headline_table

    day = dt.date(2026, 6, 11)
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE fct_recommendation (day DATE, gpu_uuid VARCHAR, gpu_model VARCHAR, power_limit_w DOUBLE, "
                "default_limit_w DOUBLE)")
    con.executemany("INSERT INTO fct_recommendation VALUES (?, ?, ?, ?, 700)",
                    [(day, "GPU-a", "A100", 300.0), (day, "GPU-h1", "H100", 500.0), (day, "GPU-h2", "H100", 500.0)])
    con.execute("CREATE TABLE fct_power_model (day DATE, gpu_model VARCHAR, passed_gate BOOLEAN, gate_reason VARCHAR)")
    con.execute("INSERT INTO fct_power_model VALUES (?, 'A100', true, NULL), (?, 'H100', false, 'MAPE 13% > 10%')",
                [day, day])
    con.execute("CREATE TABLE fct_gpu_energy_hourly AS SELECT ?::DATE AS day, 'GPU-a' AS gpu_uuid, 0.0011 AS energy_kwh",
                [day])
    con.execute("CREATE TABLE rpt_tco_daily AS SELECT ?::DATE AS day, 0.5 AS total_cost_usd, 3.5e-5 AS energy_cost_usd",
                [day])
    con.close()
    numbers, _ = day_headline(str(db), str(tmp_path / "lake"), day)
    assert numbers["gpus_to_cap"] == 1
    console = Console(width=120, record=True)
    console.print(headline_table(day, numbers, "t"))
    text = console.export_text()
    assert "1.1 Wh" in text and "under 0.01 USD" in text and "0.50 USD" in text


def test_a_relation_an_older_version_wrote_without_a_column_is_not_computed_not_a_crash(tmp_path):
    import datetime as dt

    import duckdb

    from joulehouse.cli.headline import day_headline

    day = dt.date(2026, 6, 11)
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("CREATE TABLE rpt_carbon_daily AS SELECT ?::DATE AS day, 1000.0 AS total_gco2e", [day])
    con.close()
    numbers, _ = day_headline(str(tmp_path / "w.duckdb"), str(tmp_path / "lake"), day)
    assert numbers["carbon_kgco2e"] == 1.0 and numbers["embodied_kgco2e"] is None
