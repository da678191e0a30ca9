"""The repository explains itself: every document the code or the docs cite is in the repository,
and every section of ARCHITECTURE.md cited by name exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CITED_FILE = re.compile(r"\b((?:[\w.-]+/)*[A-Z][A-Z0-9_]*\.md)\b")
CITED_SECTION = re.compile(r'ARCHITECTURE\.md, "([^"]+)"')


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split()
    return [REPO / p for p in out if p.endswith((".py", ".sql", ".md", ".toml", ".txt")) and (REPO / p).is_file()]


def test_every_cited_document_is_in_the_repository():
    files = _tracked()
    names = {p.name for p in files} | {str(p.relative_to(REPO)) for p in files}
    missing = sorted({f"{p.relative_to(REPO)}: {m}" for p in files for m in CITED_FILE.findall(p.read_text(encoding="utf-8"))
                      if m not in names and Path(m).name not in names})
    assert not missing, "\n".join(missing)


def test_every_cited_section_of_architecture_md_exists():
    headings = {line.lstrip("#").strip() for line in (REPO / "ARCHITECTURE.md").read_text().splitlines()
                if line.startswith("#")}
    cited = {(p.relative_to(REPO), s) for p in _tracked() for s in CITED_SECTION.findall(p.read_text(encoding="utf-8"))}
    assert cited, "the code cites ARCHITECTURE.md's sections by name"
    assert not sorted(f"{p}: {s}" for p, s in cited if s not in headings)
