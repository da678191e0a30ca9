"""warehouse.catalog: the described relations of warehouse/sql and of later layers' SQL folders.

What a user relies on: `joulehouse sql --describe` lists exactly the relations whose files say
what they hold (kind, grain, every column with its unit); helper queries stay out of the list;
a malformed header or a name defined twice fails loudly, naming the file; and the build still
sees only warehouse/sql.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joulehouse.warehouse.catalog import (
    LAYERS,
    SQL_DIR,
    CatalogError,
    describe_markdown,
    parse_relation,
    public_by_layer,
    relation,
    relations,
)

DESCRIBED = """\
-- fct_widget_daily: widgets made per day.
-- kind: day
-- grain: one row per (day, widget_id)
-- Written by a test; this line is a note.
-- columns:
--   day [DATE] UTC day
--   widget_id [text] the widget
--   energy_kwh [kWh] energy it took; a meaning that goes on
--     over a second line
SELECT 1
"""
HELPER = """\
-- widget_suffstats: sums the fit needs (an internal helper, no catalog header).
-- Grain: widget_id.
SELECT 2
"""


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "widgets" / "sql"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.sql").write_text(text)
    return folder


def test_without_extra_folders_the_catalog_is_the_build_manifest():
    names = [r.name for r in relations()]
    manifest = [ln.strip() for ln in (SQL_DIR / "manifest.txt").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    assert names == manifest
    assert all(r.source.startswith("warehouse/sql/") for r in relations())


def test_extra_folder_adds_described_relations_and_skips_helpers(tmp_path):
    folder = _folder(tmp_path, {"fct_widget_daily": DESCRIBED, "widget_suffstats": HELPER})
    extra = relations([folder])
    assert len(extra) == len(relations()) + 1
    widget = relation("fct_widget_daily", [folder])
    assert widget.public and widget.layer == "fct" and widget.source == "widgets/sql/fct_widget_daily.sql"
    assert [(c.name, c.unit) for c in widget.columns] == [("day", "DATE"), ("widget_id", "text"), ("energy_kwh", "kWh")]
    assert widget.columns[2].meaning.endswith("over a second line")
    assert "this line is a note" in widget.notes
    with pytest.raises(KeyError, match="fct_widget_daily"):
        relation("widget_suffstats", [folder])  # the message lists the public relations
    assert "fct_widget_daily" not in [r.name for r in relations()]  # default catalog untouched


def test_a_temp_relation_in_an_extra_folder_is_not_public(tmp_path):
    folder = _folder(tmp_path, {"int_widget": DESCRIBED.replace("fct_widget_daily", "int_widget").replace("kind: day", "kind: temp")})
    assert not relation("int_widget", [folder]).public
    assert "int_widget" not in describe_markdown([folder])


@pytest.mark.parametrize("text, expected", [
    (DESCRIBED.replace("kind: day", "kind: daily"), "kind 'daily' is not one of"),
    (DESCRIBED.replace("-- fct_widget_daily:", "-- fct_widgets:"), "the first line must be '-- fct_widget_daily:"),
])
def test_a_malformed_header_names_its_file(tmp_path, text, expected):
    folder = _folder(tmp_path, {"fct_widget_daily": text})
    with pytest.raises(CatalogError, match=expected) as err:
        relations([folder])
    assert "fct_widget_daily.sql" in str(err.value)


def test_a_name_defined_twice_is_refused(tmp_path):
    folder = _folder(tmp_path, {"dim_gpu": DESCRIBED.replace("fct_widget_daily", "dim_gpu")})
    with pytest.raises(CatalogError, match="dim_gpu is already defined in warehouse/sql/dim_gpu.sql"):
        relations([folder])


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(CatalogError, match="no_such_dir"):
        relations([tmp_path / "no_such_dir"])


def test_public_relations_are_grouped_by_layer_in_pipeline_order(tmp_path):
    folder = _folder(tmp_path, {"fct_widget_daily": DESCRIBED, "rpt_widget_daily": DESCRIBED.replace("fct_widget_daily", "rpt_widget_daily")})
    groups = public_by_layer([folder])
    assert list(groups) == [layer for layer in LAYERS if layer in groups]
    assert "quarantine_gpu_samples" in [r.name for r in groups["stg"]]
    assert [r.name for r in groups["rpt"]] == ["rpt_widget_daily"]
    markdown = describe_markdown([folder])
    assert markdown.index("## fct") < markdown.index("### fct_widget_daily") < markdown.index("## rpt")
    assert "| `energy_kwh` | kWh |" in markdown


_names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=12).filter(lambda s: s[0] != "_")
_units = st.text(string.ascii_letters + string.digits + "/%.,- ", min_size=1, max_size=12).map(str.strip).filter(bool)
_meanings = st.text(string.ascii_letters + string.digits + " ,.()'=|-", max_size=40).map(str.strip)


@given(st.lists(st.tuples(_names, _units, _meanings), min_size=1, max_size=8, unique_by=lambda c: c[0]))
def test_every_column_line_reads_back_as_written(tmp_path_factory, columns):
    folder = tmp_path_factory.mktemp("hyp")
    lines = ["-- fct_x: x.", "-- kind: day", "-- grain: one row per x", "-- columns:"]
    lines += [f"--   {name} [{unit}] {meaning}".rstrip() for name, unit, meaning in columns]
    (folder / "fct_x.sql").write_text("\n".join(lines) + "\nSELECT 1\n")
    parsed = parse_relation(folder / "fct_x.sql")
    assert [(c.name, c.unit, c.meaning) for c in parsed.columns] == columns
