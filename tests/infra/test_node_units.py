"""The node's systemd files as README.md, "Deploy on a node", writes them: read the way systemd reads them.

Two ways a copy-paste of the README failed on a real node, checked here without systemd:
- an EnvironmentFile keeps a `# comment` written after a value as part of the value (systemd's
  env-file parser: '#' starts a comment only at the start of a line), so
  `JOULEHOUSE_COLLECTOR__IPMI_HOST=10.0.0.17   # this server's BMC` asked ipmitool for a host of
  that name and `JOULEHOUSE_SHIP_TO=s3://energy-lake/lake   # or a folder` shipped to that key;
- a ReadWritePaths= path that does not exist fails the unit before it runs (226/NAMESPACE) unless
  it is written with a leading '-'; the ship unit named node_exporter's textfile folder, which the
  README never makes (node_exporter is optional)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "infra" / "systemd"
HEREDOC = re.compile(r"(/etc/joulehouse/[\w-]+\.env) <<'EOF'\n(.*?)\nEOF\n", re.S)
ECHOED = re.compile(r"echo '([^']*)' \| sudo tee (/etc/joulehouse/[\w-]+\.env)")


def systemd_environment_file(text: str) -> dict[str, str]:
    """KEY=VALUE pairs as systemd's EnvironmentFile= reads them (src/basic/env-file.c): a line whose
    first non-blank is '#' or ';' is a comment; an unquoted value runs to the end of its line, a
    '#' in it included, less its trailing blanks; a quoted one to its closing quote."""
    pairs = {}
    for line in text.splitlines():
        line = line.lstrip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.lstrip()
        if value[:1] in ("'", '"'):
            value = value[1:value.index(value[0], 1)]
        pairs[key.rstrip()] = value.rstrip()
    return pairs


def readme_environment_files() -> dict[str, dict[str, str]]:
    """{path: its variables} for every environment file README.md tells the operator to write."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    files = {path: systemd_environment_file(body) for path, body in HEREDOC.findall(readme)}
    for body, path in ECHOED.findall(readme):
        files[path] = systemd_environment_file(body)
    return files


def test_the_parser_keeps_a_trailing_comment_as_systemd_does():
    parsed = systemd_environment_file("# a comment\nA=10.0.0.17   # the BMC\n  B = 'x # y'\n;C=1\n")
    assert parsed == {"A": "10.0.0.17   # the BMC", "B": "x # y"}


def test_every_environment_file_of_the_readme_reads_as_its_values_alone():
    files = readme_environment_files()
    assert {"/etc/joulehouse/collect.env", "/etc/joulehouse/ship.env", "/etc/joulehouse/agent.env"} <= set(files)
    collect_env = files["/etc/joulehouse/collect.env"]
    assert {"JOULEHOUSE_COLLECTOR__IPMI_HOST", "JOULEHOUSE_COLLECTOR__IPMI_USER"} <= set(collect_env)
    assert "JOULEHOUSE_SHIP_TO" in files["/etc/joulehouse/ship.env"]
    # a host, a user name, a URL, a key: none of them holds a blank or a comment
    carried = {f"{path}: {key}": value for path, variables in files.items() for key, value in variables.items()
               if re.search(r"\s|#", value)}
    assert carried == {}, "a value systemd would read with the comment after it"


def _unit_values(unit: Path, key: str) -> list[str]:
    values = []
    for line in unit.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{key}="):
            values += line.split("=", 1)[1].split()
    return values


@pytest.mark.parametrize("unit", sorted(UNITS.glob("*.service")), ids=lambda p: p.name)
def test_a_writable_path_a_node_may_lack_does_not_stop_the_unit(unit):
    # the collector's unit makes /var/lib/joulehouse (StateDirectory), and README enables it first
    made = {f"/var/lib/{name}" for service in UNITS.glob("*.service")
            for name in _unit_values(service, "StateDirectory")}
    required = [path for path in _unit_values(unit, "ReadWritePaths") if not path.startswith("-")]
    assert [path for path in required if path not in made] == []
