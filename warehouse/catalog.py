"""The warehouse's relations: build order, kind, and the description of every public relation
and column, all read from the header comments of the SQL files (the one place they are written;
`joulehouse sql --describe` prints them and warehouse/RELATIONS.md lists them).

`warehouse/sql/*.sql` are the relations the build runs, in manifest order. Relations written by
later layers (models/sql, reports/accounts/sql) are read from folders the caller passes as `extra_dirs`:
the warehouse cannot import those packages, so the top layer (joulehouse.cli) names them. In an
extra folder a file is a public relation when its header has a `kind:` line; files without one
are internal helper queries and are skipped.

Header format (leading `--` lines of each file):
    -- <name>: <what it holds>            (more lines of text may follow)
    -- kind: view | temp | day | readings | table | results
    -- grain: <one row per ...>
    -- columns:  (or `columns: <text>` then the list)
    --   <column> [<unit>] <meaning>
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from joulehouse.warehouse.sqlio import used_parameters

SQL_DIR = Path(str(resources.files("joulehouse.warehouse") / "sql"))
QUERIES_DIR = Path(str(resources.files("joulehouse.warehouse") / "queries"))
KINDS = ("view", "temp", "day", "readings", "table", "results")
LAYERS = ("raw", "stg", "dim", "fct", "rpt")
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
    source: str = ""  # the file, as <package>/sql/<name>.sql

    @property
    def public(self) -> bool:
        return self.kind != "temp"

    @property
    def layer(self) -> str:
        """raw | stg | dim | fct | rpt (from the name's prefix; quarantine_* is the stg split's other half)."""
        prefix = self.name.split("_", 1)[0]
        return "stg" if prefix == "quarantine" else prefix


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
    params = tuple(used_parameters(text))
    return Relation(
        name=path.stem, kind=kind, grain=grain, summary=" ".join(summary_lines),
        columns=tuple(columns), notes="\n".join(notes), sql=text, parameters=params,
        source=_source(path),
    )


def _source(path: Path) -> str:
    """The file as the repository names it, `<layer>/[<subpackage>/]sql/<name>.sql`, whether the
    layer is a folder of the checkout or a subpackage of the installed `joulehouse`."""
    top = path.parent.parent  # the package that holds the SQL folder
    while (top.parent / "__init__.py").exists() and top.parent.name != "joulehouse":
        top = top.parent
    return path.relative_to(top.parent).as_posix()


def has_catalog_header(path: Path) -> bool:
    """Whether the file's leading comment block declares a `kind:` (then it is a described relation)."""
    for line in path.read_text().splitlines():
        if not line.startswith("--"):
            return False
        if line.removeprefix("--").strip().startswith("kind:"):
            return True
    return False


def relations(extra_dirs: Iterable[str | Path] = ()) -> tuple[Relation, ...]:
    """All relations: warehouse/sql in build order (warehouse/sql/manifest.txt), then the described
    relations of each folder in `extra_dirs` (sorted by name; files without a `kind:` are skipped).
    Raises CatalogError naming the file when a header is malformed or a name is defined twice."""
    return _relations(tuple(Path(d) for d in extra_dirs))


@cache
def _relations(extra_dirs: tuple[Path, ...]) -> tuple[Relation, ...]:
    manifest = SQL_DIR / "manifest.txt"
    names = [ln.strip() for ln in manifest.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    files = {p.stem for p in SQL_DIR.glob("*.sql")}
    if set(names) != files:
        raise CatalogError(
            f"{manifest} lists {sorted(set(names) - files)} without a .sql file and "
            f"misses {sorted(files - set(names))}"
        )
    found = [parse_relation(SQL_DIR / f"{n}.sql") for n in names]
    defined = {r.name: r.source for r in found}
    for folder in extra_dirs:
        if not folder.is_dir():
            raise CatalogError(f"SQL folder {folder} does not exist (expected a package's sql/ folder)")
        for path in sorted(folder.glob("*.sql")):
            if not has_catalog_header(path):
                continue
            r = parse_relation(path)
            if r.name in defined:
                raise CatalogError(f"{path}: relation {r.name} is already defined in {defined[r.name]}")
            defined[r.name] = r.source
            found.append(r)
    return tuple(found)


def relation(name: str, extra_dirs: Iterable[str | Path] = ()) -> Relation:
    """The relation called `name`; KeyError lists the public ones."""
    everything = relations(extra_dirs)
    for r in everything:
        if r.name == name:
            return r
    raise KeyError(f"no relation {name!r}; known: {', '.join(r.name for r in everything if r.public)}")


def public_by_layer(extra_dirs: Iterable[str | Path] = ()) -> dict[str, list[Relation]]:
    """Public relations grouped by layer, in LAYERS order (raw, stg, dim, fct, rpt), each group in
    catalog order (build order, then by name); a prefix outside LAYERS gets its own group at the end."""
    groups: dict[str, list[Relation]] = {layer: [] for layer in LAYERS}
    for r in relations(extra_dirs):
        if r.public:
            groups.setdefault(r.layer, []).append(r)
    return {layer: rs for layer, rs in groups.items() if rs}


def saved_queries() -> dict[str, Path]:
    """Saved queries by name (file stem with '_' shown as '-': top-energy-gpus)."""
    return {p.stem.replace("_", "-"): p for p in sorted(QUERIES_DIR.glob("*.sql"))}


LAYER_TITLES = {
    "raw": "raw: the lake as is",
    "stg": "stg: typed, deduplicated, quarantined",
    "dim": "dim: inventory",
    "fct": "fct: facts (grain in the name)",
    "rpt": "rpt: what the reports read",
}


def describe_markdown(extra_dirs: Iterable[str | Path] = (), preamble: str = "") -> str:
    """Every public relation and column as Markdown, grouped by layer (warehouse/RELATIONS.md)."""
    out = ["# Public relations", ""]
    if preamble:
        out += [preamble, ""]
    groups = public_by_layer(extra_dirs)
    for layer, rs in groups.items():
        out.append(f"- {LAYER_TITLES.get(layer, layer)}: " + ", ".join(f"[`{r.name}`](#{r.name})" for r in rs))
    out.append("")
    for layer, rs in groups.items():
        out += [f"## {LAYER_TITLES.get(layer, layer)}", ""]
        for r in rs:
            out += [f"### {r.name}", "", _text(r.summary), "", f"- kind: {r.kind}", f"- grain: {_text(r.grain)}",
                    f"- defined in: `{r.source}`"]
            out.append("")
            if r.notes:
                out += [_text(line.strip()) for line in r.notes.strip().splitlines()] + [""]
            if r.columns:
                out.append("| column | unit | meaning |\n|---|---|---|")
                out.extend(f"| `{c.name}` | {_cell(c.unit)} | {_cell(c.meaning)} |" for c in r.columns)
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def _text(text: str) -> str:
    """Header text as literal Markdown: `*_ratio` is not emphasis, `<site>` is not an HTML tag."""
    return text.replace("*", "\\*").replace("<", "&lt;")


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")
