"""Installed, the project is one package, `joulehouse`, and nothing else: built as a wheel and
installed outside the repository, its layers import under that name, the generic names
(`models`, `reports`, ...) stay free for other packages, the package data (SQL, docs, DAG files)
travels with it, and the node side runs without the analytics dependencies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER_FOLDERS = {"joulehouse": "joulehouse", "joulehouse.collectors": "collectors", "joulehouse.warehouse": "warehouse",
                 "joulehouse.models": "models", "joulehouse.reports": "reports", "joulehouse.dags": "dags"}
ANALYTICS = ["duckdb", "polars", "plotly", "great_expectations", "airflow", "scipy", "pandas"]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_under_its_joulehouse_name():
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"] == LAYER_FOLDERS
    found = set()
    for name, folder in LAYER_FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([name, *rel.parts]))
        # Folders of SQL files and templates (package data, no __init__.py) are listed too, so
        # setuptools installs them without a warning per folder.
        for data in (REPO / folder).rglob("*"):
            if data.is_dir() and not (data / "__init__.py").exists() and "__pycache__" not in data.parts \
                    and any(data.glob("*.sql")) | any(data.glob("*.j2")):
                found.add(".".join([name, *data.relative_to(REPO / folder).parts]))
    assert sorted(found) == sorted(setuptools["packages"]), "pyproject.toml [tool.setuptools] packages is not the tree"


def test_no_module_imports_a_layer_by_its_old_top_level_name():
    old = ("collectors", "warehouse", "models", "reports", "joulehouse_cli")
    offenders = []
    for path in REPO.rglob("*.py"):
        if {".venv", "var", "build"} & set(path.parts):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and words[1].split(".")[0] in old:
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project built as a wheel and installed into a folder of its own (no dependencies:
    they come from the test environment's site-packages, after this folder on sys.path)."""
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the files git would commit: a build in the checkout leaves build/lib
    # behind, whose stale modules setuptools would pack into the next wheel.
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.splitlines()
    source = out / "source"
    for name in listed:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out / "dist"), str(source)], check=True, capture_output=True, text=True)
    [wheel] = (out / "dist").glob("joulehouse-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        top = {name.split("/")[0] for name in zf.namelist()}
    assert {t for t in top if not t.endswith((".dist-info", ".data"))} == {"joulehouse"}, top
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(out / "site"),
                    str(wheel)], check=True, capture_output=True, text=True)
    return out / "site"


def _run(site: Path, cwd: Path, code: str, *args: str, blocked: list[str] = ()) -> subprocess.CompletedProcess:
    """Run `code` with the installed package first on sys.path, from `cwd` (outside the repository);
    modules in `blocked` fail to import, as on a node that never installed them."""
    guard = (
        "import sys\n"
        "class _Blocked:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {list(blocked)!r}: raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Blocked())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-c", guard + code, *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_the_installed_wheel_is_one_joulehouse_package(installed, tmp_path):
    probe = """
import importlib, json, joulehouse
found = {}
for name in ("models", "reports", "warehouse", "collectors", "joulehouse_cli"):
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ModuleNotFoundError:
        found[name] = "missing"
for name in ("joulehouse.collectors.agent", "joulehouse.warehouse.build", "joulehouse.models.power",
             "joulehouse.reports.accounts.carbon", "joulehouse.cli.main"):
    found[name] = importlib.import_module(name).__file__
print(json.dumps({"root": joulehouse.__file__, **found}))
"""
    out = _run(installed, tmp_path, probe)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["root"].startswith(str(installed))
    assert {k: found[k] for k in ("models", "reports", "warehouse", "collectors", "joulehouse_cli")} == dict.fromkeys(
        ("models", "reports", "warehouse", "collectors", "joulehouse_cli"), "missing")
    assert all(found[k].startswith(str(installed)) for k in found if k.startswith("joulehouse."))


@pytest.mark.slow
def test_the_installed_package_carries_its_sql_and_dag_files(installed, tmp_path):
    out = _run(installed, tmp_path, "from joulehouse.cli.main import app; app()", "sql", "--describe",
               "fct_gpu_energy_hourly")
    assert out.returncode == 0, out.stderr
    assert "energy_kwh" in out.stdout
    catalogue = _run(installed, tmp_path, "from joulehouse.models.gpu_catalogue import lookup; "
                                          "print(lookup('NVIDIA H200').tdp_w)")
    assert catalogue.returncode == 0 and catalogue.stdout.strip() == "700.0", catalogue.stderr
    dags = _run(installed, tmp_path, "from joulehouse.cli.dagrun import default_dags_folder; "
                                     "print(sorted(p.name for p in default_dags_folder().glob('*.py')))")
    assert dags.returncode == 0, dags.stderr
    assert {"joulehouse_daily.py", "joulehouse_publish.py"} <= set(eval(dags.stdout))
    assert str(installed) in _run(installed, tmp_path, "from joulehouse.cli.dagrun import default_dags_folder; "
                                                       "print(default_dags_folder())").stdout


@pytest.mark.slow
def test_the_node_commands_run_without_the_analytics_dependencies(installed, tmp_path):
    code = "import sys; sys.argv[0] = 'joulehouse'; from joulehouse.cli.main import app; app()"
    for command in (["agent", "apply", "--help"], ["collect", "--help"], ["ship", "--help"], ["keys", "generate", "--help"]):
        out = _run(installed, tmp_path, code, *command, blocked=ANALYTICS)
        assert out.returncode == 0, f"{command}: {out.stderr}"
    keys = _run(installed, tmp_path, code, "keys", "generate", "--out", str(tmp_path / "keys"), blocked=ANALYTICS)
    assert keys.returncode == 0, keys.stderr
    assert sorted(p.name for p in (tmp_path / "keys").iterdir())
