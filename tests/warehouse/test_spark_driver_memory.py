"""The Spark driver's heap is a setting: on a local[N] master the driver does all the work, and at
Spark's own 1 GB the demo's 32-GPU day stopped with SparkOutOfMemoryError; joulehouse set no
memory, so the DAG's Spark tasks could not be given more but through PYSPARK_SUBMIT_ARGS."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from contextlib import contextmanager

import pytest

from joulehouse.settings import SettingsError, load_settings


def test_the_dags_spark_tasks_start_their_driver_with_the_setting(monkeypatch, tmp_path):
    from joulehouse import daily
    from joulehouse.warehouse import spark_engine

    (tmp_path / "j.toml").write_text('[warehouse]\nengine = "spark"\nspark_driver_memory = "3g"\n')
    settings = load_settings(tmp_path / "j.toml", env={})
    started: list[dict] = []

    @contextmanager
    def session(master, app_name="joulehouse", driver_memory=None):
        started.append({"master": master, "driver_memory": driver_memory})
        yield object()

    monkeypatch.setattr(spark_engine, "spark_task_session", session)
    monkeypatch.setattr(spark_engine, "computed_relations", lambda *a, **k: {})
    monkeypatch.setattr(spark_engine, "fit_suffstats", lambda *a, **k: [])
    now = dt.datetime(2026, 3, 3, tzinfo=dt.timezone.utc)
    daily._spark_computed(dt.date(2026, 3, 2), settings, now)
    daily._spark_fit_suffstats(dt.date(2026, 3, 2), settings)
    assert started == [{"master": "local[2]", "driver_memory": "3g"}] * 2


@pytest.mark.parametrize("typo", ["4 GB", "4GB", "0g", "lots"])
def test_a_driver_memory_spark_cannot_read_is_refused_with_the_setting_named(tmp_path, typo):
    (tmp_path / "j.toml").write_text(f'[warehouse]\nspark_driver_memory = "{typo}"\n')
    with pytest.raises(SettingsError) as refused:
        load_settings(tmp_path / "j.toml", env={})
    assert str(refused.value).startswith(f"[warehouse].spark_driver_memory = '{typo}' (in ")
    assert "expected Spark's notation: a whole number and k, m, g or t (4g, 4096m)" in str(refused.value)


@pytest.mark.slow
@pytest.mark.integration
def test_the_session_gets_the_heap_it_was_given(tmp_path):
    """A real JVM, in a process of its own (a JVM's heap is set once, when it starts)."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on PATH")
    pytest.importorskip("pyspark")
    script = ("import json\n"
              "from joulehouse.warehouse.spark_session import spark_task_session\n"
              "with spark_task_session('local[1]', driver_memory='1536m') as spark:\n"
              "    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()\n"
              "    print(json.dumps({'max_heap_bytes': runtime.maxMemory(),\n"
              "                      'conf': spark.sparkContext.getConf().get('spark.driver.memory')}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["conf"] == "1536m"
    # the JVM reports a little less than -Xmx (a survivor space); Spark's own default is 1 GiB
    assert 1.3 * 2**30 < seen["max_heap_bytes"] <= 1.5 * 2**30
