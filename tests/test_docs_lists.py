"""The lists the docs give a user to act on name what the code has: the metrics a process exports
(what to scrape and chart), what `pip install .[node]` brings onto a node, the `raw_*` views over
the lake's datasets, and every file a deployment finds under infra/."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from joulehouse.collectors import metrics as node_metrics
from joulehouse.collectors.schema import DATASETS
from joulehouse.reports.export import headline_metrics

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
TICKED = re.compile(r"`([^`]+)`")


def _table_rows(text: str, first_cell_prefix: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith(f"| {first_cell_prefix}")]


def test_the_readme_metrics_table_names_every_metric_the_processes_export():
    # A row names its first metric in full and the rest by suffix (`_polls_total`).
    documented = set()
    for row in _table_rows(README, "`collect`") + _table_rows(README, "`ship`") + \
            _table_rows(README, "`agent run`") + _table_rows(README, "the daily run"):
        names = [re.sub(r"\{.*\}$", "", name) for name in TICKED.findall(row[-1])]
        prefix = re.match(r"joulehouse_[a-z]+", names[0]).group(0)
        documented |= {prefix + name if name.startswith("_") else name for name in names}
    exported = node_metrics.METRIC_NAMES | headline_metrics.METRIC_NAMES
    assert sorted(exported - documented) == [], "exported but not in README's metrics table"
    assert sorted(documented - exported) == [], "in README's metrics table but exported by no process"


def test_the_readme_names_every_package_the_node_install_brings():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["node"]
    packages = {re.match(r"[A-Za-z0-9_.-]+", requirement).group(0) for requirement in requirements}
    sentence = README.split("`.[node]` installs", 1)[1].split("\n\n", 1)[0]
    missing = sorted(name for name in packages
                     if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", sentence, re.IGNORECASE))
    assert missing == [], "installed by .[node] but not named in README's Install step"


def test_the_readme_relation_table_lists_a_raw_view_for_every_lake_dataset():
    (raw_row,) = _table_rows(README, "`raw_gpu_samples`")
    listed = set(TICKED.findall(raw_row[0]))
    assert sorted(f"raw_{dataset}" for dataset in DATASETS if f"raw_{dataset}" not in listed) == []


def test_infra_readme_covers_every_file_under_infra():
    infra = REPO / "infra"
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "."], cwd=infra,
                             capture_output=True, text=True, check=True).stdout.split()
    covered: list[str] = []
    for row in _table_rows((infra / "README.md").read_text(encoding="utf-8"), "`"):
        for name in TICKED.findall(row[0]):
            # `systemd/joulehouse-ship.service`, `.timer`: a bare suffix is the file before it with that suffix
            covered.append(str(Path(covered[-1]).with_suffix(name)) if name.startswith(".") else name)
    uncovered = [path for path in tracked if path != "README.md" and not any(
        path == name or (name.endswith("/") and path.startswith(name)) for name in covered)]
    assert uncovered == [], "under infra/ but in no row of infra/README.md"
