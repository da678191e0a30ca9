"""daily.TASK_MODULES, which dagrun's child imports ahead of the tasks, names modules that exist:
import_task_modules skips one that fails (the task reports it), so a misspelt name would only
make the runs slower, silently."""

from __future__ import annotations

import importlib
import subprocess
import sys


def test_every_task_module_imports():
    from joulehouse.daily import TASK_MODULES

    for name in TASK_MODULES:
        importlib.import_module(name)


def test_the_dag_file_still_imports_none_of_them_at_parse_time():
    from joulehouse.daily import TASK_MODULES

    code = ("import runpy, sys; from joulehouse.cli.dagrun import default_dags_folder; "
            "runpy.run_path(str(default_dags_folder() / 'joulehouse_daily.py')); "
            "print(','.join(sorted(m for m in sys.modules if m.startswith(('joulehouse.models', 'joulehouse.reports', "
            "'great_expectations', 'joulehouse.warehouse')))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert not set(loaded.split(",")) & set(TASK_MODULES), loaded
