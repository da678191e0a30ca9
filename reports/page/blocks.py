"""HTML building blocks of the daily report: page shell, cards, tables, figures, "not computed".

The HTML comes from the Jinja2 templates beside this module (templates/page.html.j2 and the
macros of templates/blocks.html.j2) with autoescape on: every value is escaped, and only
fragments built here (Markup) and plotly's own divs go in as they are. Plotly.js is loaded once
per page, from the reports folder's shared copy or inlined (render.py decides); figures are
written as divs with fixed ids (fig-01, fig-02...) so the same data renders to the same page.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jinja2
import polars as pl
from markupsafe import Markup

MAX_TABLE_ROWS = 15

# Column-name suffix -> unit shown in the header; longest suffix first (so _c_per_w beats _w).
UNIT_SUFFIXES = (
    ("_gco2e_per_kwh", "gCO2e/kWh"), ("_usd_per_mwh", "USD/MWh"), ("_kwh_per_day", "kWh/day"),
    ("_requests_per_kwh", "requests/kWh"), ("_j_per_token", "J/token"), ("_j_per_sample", "J/sample"),
    ("_flops_per_w", "FLOP/s per W"), ("_j_per_unit", "J/unit of work"), ("_c_per_w", "°C/W"), ("_w_per_c", "W/°C"), ("_pct_per_10c", "% per 10 °C"),
    ("_kgco2e", "kgCO2e"), ("_gco2e", "gCO2e"), ("_kwh", "kWh"), ("_usd", "USD"), ("_mhz", "MHz"), ("_pct", "%"),
    ("_ratio", "0-1"), ("_share", "0-1"), ("_hours", "h"), ("_at", "UTC"), ("_w", "W"), ("_c", "°C"), ("_s", "s"),
)
WHOLE_NAME_LABELS = {"requests_per_kwh": "EPOE (requests/kWh)", "j_per_token": "energy per token (J/token)",
                     "j_per_sample": "energy per sample (J/sample)", "flops_per_w": "FLOPs per watt (FLOP/s per W)",
                     "pue": "PUE (facility/IT, ratio)", "r2": "R² (0-1)"}
# A qualifier after the unit (best_limit_w_low, power_limit_w_before) moves in front of it.
QUALIFIERS = ("low", "high", "before", "after", "min", "max")
COUNT_PREFIXES = ("n_", "rows")



@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("joulehouse.reports.page", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)


def _macro(name: str):
    return getattr(_templates().get_template("blocks.html.j2").module, name)


def plural(n: int, word: str) -> str:
    """'1 GPU', '1,200 GPUs'."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def fmt_number(value: object, digits: int = 2) -> str:
    """Readable numbers: thousands separators, `digits` decimals, '-' for NULL/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e9 or abs(value) < 0.5 * 10 ** -digits):
            return f"{value:.3g}"  # a tiny elasticity or 1e19 FLOPs keeps its significant digits
        return f"{value:,.{digits}f}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def column_label(name: str) -> str:
    """A header a person reads, unit in parentheses: power_limit_w -> 'power limit (W)',
    n_samples -> 'samples (count)'. Names without a unit (gpu_model, reason) just lose underscores."""
    if name in WHOLE_NAME_LABELS:
        return WHOLE_NAME_LABELS[name]
    for qualifier in QUALIFIERS:
        stem = name.removesuffix(f"_{qualifier}")
        if stem != name and any(stem.endswith(suffix) for suffix, _ in UNIT_SUFFIXES):
            base = column_label(stem)
            return base.replace(" (", f", {qualifier} (", 1) if " (" in base else f"{base} {qualifier}"
    if name.startswith(COUNT_PREFIXES):
        return f"{name.removeprefix('n_').replace('_', ' ')} (count)"
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return f"{name[: -len(suffix)].replace('_', ' ')} ({unit})"
    return name.replace("_", " ")


def _unknown(value: float | None) -> bool:
    return value is None or math.isnan(value)


def fmt_kwh(kwh: float | None) -> str:
    """Energy for people: '251.4 kWh', '1.1 Wh', '2.35 MWh'; '-' when unknown. Each step is taken
    by the value as it would be printed: 999.96 kWh is '1.00 MWh', never '1,000.0 kWh'."""
    if _unknown(kwh):
        return "-"
    if abs(round(kwh, 1)) >= 1000:
        return f"{kwh / 1000:,.2f} MWh"
    wh = kwh * 1000
    if kwh == 0 or abs(round(wh, 1)) >= 1000:
        return f"{kwh:,.1f} kWh"
    return f"{wh:,.1f} Wh" if abs(wh) >= 1 else f"{wh:.2g} Wh"


def fmt_usd(usd: float | None) -> str:
    """Money for people: '943 USD', '17.40 USD', 'under 0.01 USD'; '-' when unknown."""
    if usd is None or math.isnan(usd):
        return "-"
    if usd != 0 and abs(usd) < 0.01:
        return "under 0.01 USD" if usd > 0 else "-under 0.01 USD"
    return f"{usd:,.0f} USD" if abs(usd) >= 100 else f"{usd:,.2f} USD"


def fmt_kg(grams: float | None) -> str:
    """A carbon mass given in gCO2e, for people: '28.6 kgCO2e', '1.20 tCO2e', '99.5 gCO2e',
    '0.4 gCO2e'; '-' when unknown. As fmt_kwh, each step by the value as printed (99.96 g is
    '0.1 kgCO2e': the two significant digits below 100 g printed it '1e+02 gCO2e')."""
    if _unknown(grams):
        return "-"
    kg = grams / 1000
    if abs(round(kg, 1)) >= 1000:
        return f"{grams / 1e6:,.2f} tCO2e"
    if grams == 0 or abs(round(grams, 1)) >= 100:
        return f"{kg:,.1f} kgCO2e"
    return f"{grams:,.1f} gCO2e" if abs(grams) >= 1 else f"{grams:.2g} gCO2e"


@dataclass
class Section:
    """One titled part of the report; `blocks` are HTML fragments (Markup) in order."""

    anchor: str
    title: str
    blocks: list[Markup] = field(default_factory=list)
    not_computed: list[str] = field(default_factory=list)

    def add(self, fragment: Markup | str) -> None:
        """Add a fragment built here (Markup); plain text is escaped and shown as a paragraph."""
        self.blocks.append(fragment if isinstance(fragment, Markup) else paragraph("plain", fragment))

    def heading(self, text: str) -> None:
        self.blocks.append(_macro("heading")(text))

    def missing(self, message: str) -> None:
        """Say plainly what could not be computed and why (the summary lists these too)."""
        self.not_computed.append(message)
        self.blocks.append(paragraph("missing", f"Not computed: {message}"))

    def note(self, message: str, lead: str = "") -> None:
        self.blocks.append(paragraph("note", message, lead))

    def warn(self, message: str, lead: str = "") -> None:
        self.blocks.append(paragraph("missing", message, lead))

    def bullets(self, items: list[str]) -> None:
        self.blocks.append(bullets([("", "", i) for i in items]))


# Colours of the GPU models, assigned in the order the report first meets each model (FigureWriter),
# so one model keeps one colour in every figure of the page.
MODEL_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#eeca3b",
                 "#ff9da6", "#bab0ac")


class FigureWriter:
    """Turns figures into divs with sequential ids (the page loads plotly.js once) and gives every
    trace named after a GPU model that model's one colour (`gpu_models`, in a stable order)."""

    def __init__(self, gpu_models: list[str] | tuple[str, ...] = ()) -> None:
        self.count = 0
        self.colours = {m: MODEL_PALETTE[i % len(MODEL_PALETTE)] for i, m in enumerate(gpu_models)}

    def colour_of(self, model: str) -> str | None:
        return self.colours.get(model)

    def div(self, fig) -> Markup:
        self.count += 1
        for trace in fig.data:
            _plain_text_in(trace)
            colour = self.colours.get(getattr(trace, "name", None))
            if colour is None:
                continue
            if trace.type == "bar":
                trace.marker.color = colour
            elif trace.type == "scatter":
                trace.marker.color = colour
                trace.line.color = colour
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{self.count:02d}",
                           config={"displaylogo": False, "responsive": True})
        return _macro("figure")(Markup(body))  # plotly's own div and script: trusted, not data


# plotly.js reads a small HTML in text (<a href>, <span style>, <b>, <br>): a host named with a link
# drew a working link to anywhere inside a figure. Its entity for '<' it shows as the character.
_DATA_TEXT_KEYS = ("name", "x", "y", "text", "hovertext", "labels", "legendgroup")


def _plain_text_in(trace) -> None:
    """Make the data strings of `trace` (names, categories, labels) plain text to plotly.js."""
    for key in _DATA_TEXT_KEYS:
        value = getattr(trace, key, None) if key in trace else None
        if isinstance(value, str):
            trace[key] = value.replace("<", "&lt;")
        elif isinstance(value, (tuple, list)) and any(isinstance(v, str) and "<" in v for v in value):
            trace[key] = [v.replace("<", "&lt;") if isinstance(v, str) else v for v in value]


def card(label: str, value: str, sub: str = "", parts: list[tuple[str, str]] | None = None) -> Markup:
    """A headline number; `parts` lists what it is made of, [(name, formatted amount)]."""
    return _macro("card")(label, value, sub, parts or [])


def cards(items: list[Markup]) -> Markup:
    return _macro("cards")(items)


def paragraph(cls: str, text: str, lead: str = "") -> Markup:
    return _macro("paragraph")(cls, text, lead)


def bullets(items: list[tuple[str, str, str]]) -> Markup:
    """A list of (anchor or '', link title, text): a linked item reads 'title: text'."""
    return _macro("bullets")(items)


# Columns shown as identifiers (monospace, may break anywhere).
ID_COLUMNS = ("gpu_uuid", "config_sha256")


def table(frame: pl.DataFrame, *, digits: dict[str, int] | None = None, bad: str | None = None,
          max_rows: int = MAX_TABLE_ROWS, source: str | None = None) -> Markup:
    """An HTML table of `frame` (at most `max_rows`, saying how many are hidden and, with
    `source`, which relation holds them all); rows where boolean column `bad` is true are
    highlighted. Headers read as words with the unit (column_label); the column's own name is
    the header's tooltip, for SQL. Long text wraps inside the card; wide tables scroll in it."""
    digits = digits or {}
    shown = frame.head(max_rows)
    head = [(c, column_label(c)) for c in shown.columns if c != bad]
    rows = []
    for row in shown.iter_rows(named=True):
        cells = []
        for col, value in row.items():
            if col == bad:
                continue
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            cls = ("n" if numeric else "id" if col in ID_COLUMNS
                   else "wrap" if isinstance(value, str) and len(value) > 60 else "")
            cells.append((cls, fmt_number(value, digits.get(col, 2))))
        rows.append((bool(bad and row.get(bad)), cells))
    where = f"SELECT * FROM {source}" if source else "the warehouse"
    more = (f"{frame.height - max_rows:,} more rows hidden ({frame.height:,} in all; query {where} for every row)."
            if frame.height > max_rows else "")
    return _macro("table")(head, rows, more)


def details(summary: str, fragment: Markup) -> Markup:
    """A collapsed block (click to open): long lists and statistics a person rarely needs."""
    return _macro("details")(summary, fragment)


def todo_list(items: list[str]) -> Markup:
    """The summary's numbered list of things to do (items are plain text)."""
    return _macro("todo_list")(items)


def page(title: str, subtitle: str, sections: list[Section], *, plotly_js: str = "", plotly_src: str = "") -> str:
    """The whole page: plotly.js from `plotly_src` (a file beside the report) or inlined `plotly_js`."""
    return _templates().get_template("page.html.j2").render(title=title, subtitle=subtitle, sections=sections,
                                                            plotly_js=plotly_js, plotly_src=plotly_src) + "\n"


def plotly_file_name() -> str:
    """The shared plotly.js file's name, after plotly.js's own version (the Python package's
    differs: plotly 7.1 bundles plotly.js 4.1.1)."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly.js-{get_plotlyjs_version()}.min.js"


def shared_plotly(folder: Path) -> str:
    """Write plotly.js once into `folder` (every page there, the daily reports and the dashboard,
    loads it) and return its name."""
    from plotly.offline import get_plotlyjs

    target = Path(folder) / plotly_file_name()
    bundle = get_plotlyjs()
    if not target.exists() or target.stat().st_size != len(bundle.encode("utf-8")):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(bundle, encoding="utf-8")
        os.replace(tmp, target)
    return target.name
