"""HTML building blocks of the daily report: page shell, cards, tables, figures, "not computed".

Plotly.js is embedded once in the page head, so the file opens offline; figures are written as
divs with fixed ids (fig-01, fig-02...) so the same data renders to the same page.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from dataclasses import dataclass, field

import polars as pl

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

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c8ced8;font-size:13px}
main{max-width:1200px;margin:0 auto;padding:16px 32px 48px;box-sizing:border-box}
section{min-width:0;overflow:hidden}
nav{font-size:13px;margin:8px 0 16px}nav a{margin-right:14px;color:#2b6cb0;text-decoration:none}
section{background:#fff;border:1px solid #e2e6ec;border-radius:8px;padding:12px 22px 18px;margin:0 0 18px}
h2{font-size:18px;margin:8px 0 10px}h3{font-size:15px;margin:16px 0 6px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:6px 0 8px}
.card{flex:1 1 200px;border:1px solid #e2e6ec;border-radius:8px;padding:10px 14px;background:#fbfcfd}
.card .v{font-size:26px;font-weight:600}.card .k{font-size:12px;color:#5a6472;text-transform:uppercase}
.card .s{font-size:12px;color:#5a6472}
.todo{background:#eef7ee;border-left:4px solid #38a169;padding:8px 12px;margin:10px 0}
.missing{background:#fff8e6;border-left:4px solid #d69e2e;padding:6px 12px;margin:6px 0;font-size:13px}
.tbl{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:12.5px;margin:6px 0;width:100%}
th,td{border-bottom:1px solid #e2e6ec;padding:4px 8px;text-align:left;white-space:nowrap}
th{background:#f1f3f6;white-space:normal;vertical-align:bottom;min-width:56px}
td.n{text-align:right;font-variant-numeric:tabular-nums}tr.bad td{background:#fdecec}
.fig{margin:8px 0}.note{font-size:12.5px;color:#5a6472}
ol.todo{background:#eef7ee;border-left:4px solid #38a169;margin:10px 0;padding:8px 12px 8px 34px}ol.todo li{margin:3px 0}
ul.gaps{font-size:13px;margin:4px 0;padding-left:22px}ul.gaps li{margin:2px 0}
details{margin:6px 0}summary{cursor:pointer;font-size:13px;color:#2b6cb0}
td.wrap{white-space:normal;min-width:260px}
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


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


@dataclass
class Section:
    """One titled part of the report; `blocks` are HTML fragments in order."""

    anchor: str
    title: str
    blocks: list[str] = field(default_factory=list)
    not_computed: list[str] = field(default_factory=list)

    def add(self, fragment: str) -> None:
        self.blocks.append(fragment)

    def missing(self, message: str) -> None:
        """Say plainly what could not be computed and why (the summary lists these too)."""
        self.not_computed.append(message)
        self.blocks.append(f'<p class="missing">Not computed: {esc(message)}</p>')

    def note(self, message: str) -> None:
        self.blocks.append(f'<p class="note">{esc(message)}</p>')


class FigureWriter:
    """Turns figures into divs with sequential ids (the page loads plotly.js once)."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, fig) -> str:
        self.count += 1
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fig-{self.count:02d}",
                           config={"displaylogo": False, "responsive": True})
        return f'<div class="fig">{body}</div>'


def card(label: str, value: str, sub: str = "") -> str:
    return (f'<div class="card"><div class="k">{esc(label)}</div><div class="v">{esc(value)}</div>'
            f'<div class="s">{esc(sub)}</div></div>')


def table(frame: pl.DataFrame, *, digits: dict[str, int] | None = None, bad: str | None = None,
          max_rows: int = MAX_TABLE_ROWS, source: str | None = None) -> str:
    """An HTML table of `frame` (at most `max_rows`, saying how many are hidden and, with
    `source`, which relation holds them all); rows where boolean column `bad` is true are
    highlighted. Headers read as words with the unit (column_label); the column's own name is
    the header's tooltip, for SQL."""
    digits = digits or {}
    shown = frame.head(max_rows)
    head = "".join(f'<th title="{esc(c)}">{esc(column_label(c))}</th>' for c in shown.columns if c != bad)
    rows = []
    for row in shown.iter_rows(named=True):
        cls = ' class="bad"' if bad and row.get(bad) else ""
        cells = []
        for col, value in row.items():
            if col == bad:
                continue
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            cls_name = "n" if numeric else ("wrap" if isinstance(value, str) and len(value) > 60 else "")
            cells.append(f'<td{f" class={cls_name}" if cls_name else ""}>{esc(fmt_number(value, digits.get(col, 2)))}</td>')
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    where = f"SELECT * FROM {source}" if source else "the warehouse"
    more = (f'<p class="note">{frame.height - max_rows:,} more rows hidden ({frame.height:,} in all; query {esc(where)} '
            f'for every row).</p>' if frame.height > max_rows else "")
    return f'<div class="tbl"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{more}'


def details(summary: str, fragment: str) -> str:
    """A collapsed block (click to open): long lists a person rarely needs in full."""
    return f"<details><summary>{esc(summary)}</summary>{fragment}</details>"


def todo_list(items: list[str]) -> str:
    """The summary's numbered list of things to do (items are plain text)."""
    return '<ol class="todo">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ol>"


def page(title: str, subtitle: str, sections: list[Section], plotly_js: str) -> str:
    nav = "".join(f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(
        f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{"".join(s.blocks)}</section>' for s in sections
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
        f"<style>{CSS}</style><script type=\"text/javascript\">{plotly_js}</script></head>"
        f"<body><header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>"
        f"<main><nav>{nav}</nav>{body}</main></body></html>\n"
    )
