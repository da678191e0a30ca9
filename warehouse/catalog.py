"""The warehouse's relations: build order, kind, and the description of every public relation
and column, all read from the header comments of `warehouse/sql/*.sql` (the one place they are
written; `joulehouse sql --describe` prints them and the README lists them).

Header format (leading `--` lines of each file):
    -- <name>: <what it holds>            (more lines of text may follow)
    -- kind: view | temp | day | table | results
    -- grain: <one row per ...>
    -- columns:  (or `columns: <text>` then the list)
    --   <column> [<unit>] <meaning>
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

SQL_DIR = Path(str(resources.files("warehouse") / "sql"))
QUERIES_DIR = Path(str(resources.files("warehouse") / "queries"))
KINDS = ("view", "temp", "day", "table", "results")
_COLUMN = re.compile(r"^\s{2,}([a-z_][a-z0-9_]*) \[([^\]]+)\]\s*(.*)$")


class CatalogError(ValueError):
    """A SQL file's header does not follow the documented format."""


@dataclass(frozen=True)
class Column:
    name: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class Relation:
    """One relation: its SQL body, kind, grain and documented columns."""

    name: str
    kind: str
    grain: str
    summary: str
    columns: tuple[Column, ...]
    notes: str
    sql: str
    parameters: tuple[str, ...] = field(default=())

    @property
    def public(self) -> bool:
        return self.kind != "temp"


def parse_relation(path: Path) -> Relation:
    """Read one `.sql` file and its header. Raises CatalogError naming the file."""
    text = path.read_text()
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].removeprefix(" ") if line.startswith("-- ") else line[2:])
    if not header or not header[0].startswith(f"{path.stem}:"):
        raise CatalogError(f"{path}: the first line must be '-- {path.stem}: <what it holds>'")
    summary_lines, kind, grain, columns, notes = [header[0].split(":", 1)[1].strip()], "", "", [], []
    section = "summary"
    for line in header[1:]:
        if line.startswith("kind:"):
            kind, section = line.split(":", 1)[1].strip(), "kind"
        elif line.startswith("grain:"):
            grain, section = line.split(":", 1)[1].strip(), "grain"
        elif line.startswith("columns:"):
            section = "columns"
            rest = line.split(":", 1)[1].strip()
            if rest:
                notes.append(rest)
        elif section == "columns" and (m := _COLUMN.match(line)):
            columns.append(Column(m.group(1), m.group(2), m.group(3).strip()))
        elif section == "columns" and columns and line.startswith("    "):
            last = columns[-1]
            columns[-1] = Column(last.name, last.unit, f"{last.meaning} {line.strip()}")
        elif section == "grain" and line.startswith("  "):
            grain = f"{grain} {line.strip()}"
        elif section == "summary":
            summary_lines.append(line.strip())
        else:
            section = "notes"
            notes.append(line.rstrip())
    if kind not in KINDS:
        raise CatalogError(f"{path}: kind {kind!r} is not one of {KINDS}")
    params = tuple(dict.fromkeys(re.findall(r"\$([a-z_][a-z0-9_]*)", _strip_comments(text))))
    return Relation(
        name=path.stem, kind=kind, grain=grain, summary=" ".join(summary_lines),
        columns=tuple(columns), notes="\n".join(notes), sql=text, parameters=params,
    )


def _strip_comments(sql: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in sql.splitlines())


@cache
def relations() -> tuple[Relation, ...]:
    """All relations in build order (warehouse/sql/manifest.txt)."""
    manifest = SQL_DIR / "manifest.txt"
    names = [ln.strip() for ln in manifest.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    files = {p.stem for p in SQL_DIR.glob("*.sql")}
    if set(names) != files:
        raise CatalogError(
            f"{manifest} lists {sorted(set(names) - files)} without a .sql file and "
            f"misses {sorted(files - set(names))}"
        )
    return tuple(parse_relation(SQL_DIR / f"{n}.sql") for n in names)


def relation(name: str) -> Relation:
    """The relation called `name`; KeyError lists the known ones."""
    for r in relations():
        if r.name == name:
            return r
    raise KeyError(f"no relation {name!r}; known: {', '.join(r.name for r in relations() if r.public)}")


def saved_queries() -> dict[str, Path]:
    """Saved queries by name (file stem with '_' shown as '-': top-energy-gpus)."""
    return {p.stem.replace("_", "-"): p for p in sorted(QUERIES_DIR.glob("*.sql"))}


def describe_markdown() -> str:
    """Every public relation and column as Markdown (for the README)."""
    out = []
    for r in relations():
        if not r.public:
            continue
        out.append(f"### `{r.name}` ({r.kind})\n\n{r.summary}\n\nGrain: {r.grain}\n")
        if r.notes:
            out.append(r.notes + "\n")
        if r.columns:
            out.append("| column | unit | meaning |\n|---|---|---|")
            out.extend(f"| `{c.name}` | {c.unit} | {c.meaning} |" for c in r.columns)
            out.append("")
    return "\n".join(out)
