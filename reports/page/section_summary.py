"""The report's summary: the day's energy (kWh), carbon (kgCO2e, location- and market-based) and
cost (USD), the top things to do with their expected saving, and what could not be computed.

Actions are ranked by the energy they save (kWh/day). Time-shifting saves carbon and money, not
energy, so it ranks after every action that saves energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from joulehouse.models.outcome import LOST_SETTING_NOTE
from joulehouse.reports.page.relations import ReportData, has, saving_basis, total
from markupsafe import Markup

from joulehouse.reports.page.blocks import (Section, bullets, card, cards, paragraph, plural, fmt_kg, fmt_kwh, fmt_number, fmt_usd,
                                            todo_list)

TOP_ACTIONS = 3


@dataclass(frozen=True)
class Action:
    """One thing to do: `text` for a person, `saving_kwh_per_day` to rank it (0 when it saves no energy)."""

    text: str
    saving_kwh_per_day: float


def setting_actions(data: ReportData) -> list[Action]:
    """Power caps and clock locks, one action per GPU model x workload class x kind of setting."""
    recs = data.to_apply
    if recs is None or recs.height == 0:
        return []
    has_default = has(recs, "power_limit_w", "default_limit_w")
    kind = (pl.when(pl.col("power_limit_w") < pl.col("default_limit_w")).then(pl.lit("cap")).otherwise(pl.lit("clock"))
            if has_default else pl.lit("cap"))
    clock_col = "locked_sm_clock_max_mhz" if "locked_sm_clock_max_mhz" in recs.columns else None
    workload = pl.col("workload_class") if "workload_class" in recs.columns else pl.lit("any")
    slowdown = pl.col("expected_slowdown_pct") if "expected_slowdown_pct" in recs.columns else pl.lit(None, pl.Float64)
    grouped = (recs.with_columns(kind.alias("kind"), workload.alias("workload"), slowdown.alias("slowdown"))
               .group_by("gpu_model", "workload", "kind")
               .agg(pl.len().alias("n"), pl.col("saving_kwh_per_day").sum(), pl.col("slowdown").max(),
                    pl.col("power_limit_w").min().alias("limit_min"), pl.col("power_limit_w").max().alias("limit_max"),
                    (pl.col(clock_col).max() if clock_col else pl.lit(None)).alias("clock_max"),
                    (pl.col("default_limit_w").max() if has_default else pl.lit(None)).alias("default_w"))
               .sort("saving_kwh_per_day", "gpu_model", descending=[True, False], nulls_last=True))
    actions = []
    for g in grouped.iter_rows(named=True):
        gpus = f"{plural(g['n'], g['gpu_model'] + ' GPU')} running {g['workload']} work"
        if g["kind"] == "clock" and g["clock_max"] is not None:
            what = f"Lock SM clocks at or below {fmt_number(float(g['clock_max']), 0)} MHz on {gpus}"
        else:
            limits = (f"{fmt_number(g['limit_min'], 0)} W" if g["limit_min"] == g["limit_max"]
                      else f"{fmt_number(g['limit_min'], 0)}-{fmt_number(g['limit_max'], 0)} W")
            default = f" (default {fmt_number(g['default_w'], 0)} W)" if g["default_w"] is not None else ""
            what = f"Cap {gpus} at {limits}{default}"
        kwh = g["saving_kwh_per_day"]
        saving = f"saves about {fmt_number(kwh, 1)} kWh/day" if kwh is not None else "saving not estimated (no energy)"
        slow = f", at most {fmt_number(g['slowdown'], 1)}% slower" if g["slowdown"] is not None else ""
        actions.append(Action(f"{what}: {saving}{slow}.", kwh or 0.0))
    return actions


def placement_actions(data: ReportData) -> list[Action]:
    """Consolidation and thermal placement, one action per kind."""
    if not has(data.placement, "kind", "expected_saving_kwh_per_day"):
        return []
    actions = []
    for g in (data.placement.group_by("kind").agg(pl.len().alias("n"), pl.col("host").n_unique().alias("hosts"),
                                               pl.col("expected_saving_kwh_per_day").sum().alias("kwh"))
              .sort("kwh", descending=True).iter_rows(named=True)):
        kwh = g["kwh"] or 0.0
        if kwh <= 0:
            continue
        if g["kind"] == "consolidation":
            text = (f"Consolidate: free {plural(g['n'], 'mostly idle GPU')} on {plural(g['hosts'], 'host')} by moving their "
                    f"light work onto the hosts' other idle GPUs: saves about {fmt_number(kwh, 1)} kWh/day of idle power.")
        elif g["kind"] == "thermal_placement":
            text = (f"Thermal placement: give the hottest work to the best-cooled GPUs ({plural(g['n'], 'GPU')} on "
                    f"{plural(g['hosts'], 'host')}): saves about {fmt_number(kwh, 1)} kWh/day of leakage power.")
        else:
            text = f"{g['kind']} ({plural(g['n'], 'GPU')}): saves about {fmt_number(kwh, 1)} kWh/day."
        actions.append(Action(text, kwh))
    return actions


def shift_action(data: ReportData) -> list[Action]:
    carbon_g, cost = total(data.shift, "carbon_saving_gco2e"), total(data.shift, "cost_saving_usd")
    if data.shift is None or not ((carbon_g or 0) > 0 or (cost or 0) > 0):
        return []
    carbon = f"{fmt_kg(carbon_g)} (or {fmt_usd(cost)} in the cheapest hours)" if carbon_g is not None else \
        f"{fmt_usd(cost)} in the cheapest hours (carbon not computed)"
    return [Action(f"Run the {data.shift.height} deferrable jobs in the day's cleanest hours: saves about "
                   f"{carbon} per day like this one; same energy.", 0.0)]


def actions(data: ReportData) -> list[Action]:
    """Every action with a saving, best first (kWh/day; ties keep the order above)."""
    found = setting_actions(data) + placement_actions(data)
    found = sorted((a for a in found if a.saving_kwh_per_day > 0), key=lambda a: -a.saving_kwh_per_day)
    return found + shift_action(data)


# What the day's cost is made of (rpt_tco_daily), in the order the cost card lists it.
COST_PARTS = (("energy", "energy_cost_usd"), ("demand charge", "demand_charge_usd"),
              ("green premium", "green_premium_usd"), ("density surcharge", "density_surcharge_usd"),
              ("capital (depreciation)", "capital_usd"), ("operations", "operations_usd"))


def cost_label(amounts_usd: dict[str, float | None]) -> str:
    """'cost (energy, green premium, capital, operations)': the components (COST_PARTS, by column)
    that add to the day's total, so the label does not name a demand charge the day was not billed
    or leave out a premium it was; 'cost of the day (TCO)' where none is known."""
    named = [name.split(" (")[0] for name, col in COST_PARTS if amounts_usd.get(col)]
    return f"cost ({', '.join(named)})" if named else "cost of the day (TCO)"


def _demand_charge_at_zero(data: ReportData) -> str | None:
    """The cost card's demand-charge line on a day that added nothing to its month's peak (dropped,
    it read as if the site paid none); None where no site's month was billed one (a fleet without a
    demand charge read "0 today, the month's peak was set on 06-01" every day)."""
    sites = data.demand_peak_set_on
    if sites and not any(r["billed"] for r in sites):
        return None
    set_on = sorted({(r["site"], f"{r['peak_day']:%m-%d}") for r in sites if r["billed"] and r["peak_day"] is not None})
    if not set_on:
        return "0"
    days = [day if len({s for s, _ in set_on}) == 1 else f"{site} {day}" for site, day in set_on]
    return f"0 today, the month's peak was set on {', '.join(days)}"


def _energy_card(data: ReportData) -> Markup:
    energy = total(data.energy, "energy_kwh")
    if energy is None:
        return card("fleet GPU energy", "-", data.energy_why)
    n_gpus = data.energy["gpu_uuid"].n_unique()
    it_kwh, meter_kwh = total(data.carbon, "energy_kwh"), total(data.carbon, "facility_energy_kwh")
    parts = [(f"{plural(n_gpus, 'GPU')}, board energy", fmt_kwh(energy))]
    if it_kwh is not None:
        parts.append(("IT (servers)", fmt_kwh(it_kwh)))
    if meter_kwh is not None:
        # IT x PUE, the site meter's only through a measured PUE: "at the site meter" was printed
        # for a fleet with no facility meter, beside the page's own "no PUE" note
        measured = data.pue is not None and data.pue.height > 0
        parts.append((f"facility (IT x {'measured' if measured else 'default'} PUE)", fmt_kwh(meter_kwh)))
    return card("fleet GPU energy", fmt_kwh(energy), "", parts)


# The carbon cards' labels, the same on the daily report and the dashboard (reports.dashboard): the
# headline is operational (scope 2) + embodied, and its parts say which is which, so that one label
# never stands for two numbers.
LOCATION_TOTAL = "carbon, location-based (operational + embodied)"
MARKET_TOTAL = "carbon, market-based (operational + embodied)"
LOCATION_OPERATIONAL = "operational, location-based (grid)"
MARKET_OPERATIONAL = "operational, market-based (contracts, residual mix)"
EMBODIED = "embodied (manufacturing)"


def carbon_total_cards(location_g: float | None, market_g: float | None, embodied_g: float | None,
                       location_sub: str, market_sub: str) -> list[Markup]:
    """The two carbon cards from totals in gCO2e (operational + embodied) and the embodied part."""
    def parts(total_g: float | None, operational: str) -> list[tuple[str, str]]:
        if total_g is None or embodied_g is None:
            return []
        return [(operational, fmt_kg(total_g - embodied_g)), (EMBODIED, fmt_kg(embodied_g))]

    return [card(LOCATION_TOTAL, fmt_kg(location_g) if location_g is not None else "-", location_sub,
                 parts(location_g, LOCATION_OPERATIONAL)),
            card(MARKET_TOTAL, fmt_kg(market_g) if market_g is not None else "-", market_sub,
                 parts(market_g, MARKET_OPERATIONAL))]


def _carbon_cards(data: ReportData) -> list[Markup]:
    location, market = total(data.carbon, "total_gco2e"), total(data.carbon, "total_market_gco2e")
    embodied = total(data.carbon, "embodied_gco2e")
    low, high = total(data.carbon, "total_low_gco2e"), total(data.carbon, "total_high_gco2e")
    if location is None:
        # rows, every one NULL: carbon_why is "" then, and the cards said "-" with no reason
        why = data.carbon_why or "no job's carbon could be computed (its energy or the grid's intensity unknown)"
        return carbon_total_cards(None, None, None, why, why)
    rng = f"range {fmt_kg(low)} to {fmt_kg(high)}" if low is not None and high is not None else ""
    rng = (unread_sentence(data.carbon, "embodied carbon") + rng).strip("; ")
    # What the market-based figure rests on (the region's residual mix, contracts), or why there is none.
    basis = (data.carbon["market_basis"].drop_nulls().unique().sort().to_list()
             if data.carbon is not None and "market_basis" in data.carbon.columns else [])
    market_sub = (("; ".join(basis) if basis else "after energy contracts (PPA/REC)") if market is not None else
                  ("not available: " + "; ".join(basis) if basis else "rpt_carbon_daily has no total_market_gco2e column"))
    return carbon_total_cards(location, market, embodied, rng, market_sub)


def _cost_card(data: ReportData) -> Markup:
    cost = total(data.tco, "total_cost_usd")
    if cost is None:
        return card("cost", "-", data.tco_why)
    zero_demand = _demand_charge_at_zero(data)
    parts = [(name, fmt_usd(amount) if amount != 0 or col == "energy_cost_usd" else zero_demand)
             for name, col in COST_PARTS if (amount := total(data.tco, col)) is not None
             and (amount != 0 or col == "energy_cost_usd" or (col == "demand_charge_usd" and zero_demand is not None))]
    low, high = total(data.tco, "total_cost_low_usd"), total(data.tco, "total_cost_high_usd")
    energy = total(data.tco, "energy_cost_usd")  # None when unknown: no share ("0% of it" said it was free)
    share = f"energy is {energy / cost:.0%} of it; " if cost > 0 and energy is not None else ""
    rng = f"range {fmt_usd(low)} to {fmt_usd(high)}" if low is not None and high is not None else ""
    premium_hours = (data.context["green_premium_applies"].fill_null(False).sum()
                     if data.context is not None and "green_premium_applies" in data.context.columns else None)
    premium = (f"green premium in the {premium_hours} of {data.context.height} site-hours its rule selects "
               "(renewable share below the threshold); " if premium_hours is not None else "")
    return card("cost of the day (TCO)", fmt_usd(cost), (share + premium + unread_sentence(data.tco, "capital and operations")
                                                         + rng).strip("; "), parts)


def unread_sentence(account, what: str) -> str:
    """'<what> include N GPU-hours without measured energy; ', or '' when every GPU-hour's energy
    was measured: the fleet's hours are charged their calendar costs read or not
    (reports.accounts.fleet_hours), and the page says how many so that the charge is not hidden."""
    unread = total(account, "unmetered_gpu_hours")
    if not unread:
        return ""
    return (f"{what} include {fmt_number(unread, 1)} GPU-hours of GPUs in the fleet without measured energy "
            "(no reading, or too few to measure it); ")


def _cards(data: ReportData) -> Markup:
    return cards([_energy_card(data), *_carbon_cards(data), _cost_card(data)])


def realised_sentence(data: ReportData) -> str:
    """The settings that took effect, realised against predicted saving (GPU-weighted means over
    the pooled model x setting rows), or '' before any did."""
    rows = data.outcome
    if not has(rows, "realised_saving_pct", "predicted_saving_pct"):
        return ""
    pooled = rows.filter(pl.col("scope") != "gpu") if "scope" in rows.columns else rows
    measured = pooled.filter(pl.col("realised_saving_pct").is_not_null())
    pooled = measured.filter(pl.col("predicted_saving_pct").is_not_null())
    if pooled.height == 0:
        return ""
    # the terminal's table lists every measured setting: say how many the means leave out
    unpredicted = measured.height - pooled.height
    left_out = f" ({plural(unpredicted, 'more setting')} measured with no prediction)" if unpredicted else ""
    weighted = "n_treated_gpus" in pooled.columns and pooled["n_treated_gpus"].drop_nulls().len() == pooled.height
    columns = ("realised_saving_pct", "predicted_saving_pct")
    if weighted:
        weight = pl.col("n_treated_gpus")
        means = pooled.select(((pl.col(c) * weight).sum() / weight.sum()).alias(c) for c in columns).row(0, named=True)
    else:
        means = pooled.select(pl.col(c).mean() for c in columns).row(0, named=True)
    # say which mean: the GPU-weighted one differs from the plain mean of the rows a reader sees
    gpus = f" on {plural(int(pooled['n_treated_gpus'].sum()), 'GPU')}" if weighted else ""
    how = " (weighted by GPUs)" if weighted and pooled.height > 1 else ""
    lost = (pooled.filter(pl.col("note").fill_null("").str.starts_with(LOST_SETTING_NOTE)).height
            if "note" in pooled.columns else 0)
    which = "It was a setting" if pooled.height == 1 else ("1 of them was a setting" if lost == 1
                                                            else f"{lost} of them were settings")
    lost_words = (f" {which} the agent applied and that went back without it, not a recommendation taken."
                  if lost else "")
    return (f"{plural(pooled.height, 'setting')} measured{gpus}, {_less_or_more(means['realised_saving_pct'])} "
            f"{saving_basis(pooled)} on average{how}, where {_less_or_more(means['predicted_saving_pct'])} was "
            f"predicted{left_out} (each with its 95% interval under Recommendations).{lost_words}")


def _less_or_more(saving_pct: float) -> str:
    """A saving in words: "12.0% less", and a negative one "17.4% more", not "-17.4% less"."""
    return f"{fmt_number(abs(saving_pct), 1)}% {'less' if saving_pct >= 0 else 'more'}"


def summary_section(data: ReportData, sections: list[Section], notes: dict[str, Any]) -> Section:
    """The summary; `sections` are the report's other sections, whose "not computed" lines it gathers."""
    s = Section("summary", "Summary")
    s.add(_cards(data))
    found = actions(data)
    if found:
        s.heading(f"What to do (top {min(TOP_ACTIONS, len(found))} of {len(found)}, by energy saved)")
        s.add(todo_list([a.text for a in found[:TOP_ACTIONS]]))
    elif data.recs is None:
        s.warn(f"Nothing to apply today: no recommendations ({data.recs_why}).")
    else:
        s.add(paragraph("todo", " nothing: no setting, consolidation or shift saves anything today; every GPU keeps its "
                                "settings (see Recommendations for why).", "What to do:"))
    realised = realised_sentence(data)
    if realised:
        s.note(realised, lead="What the applied settings saved: ")
    held = data.held_back
    if held:
        s.note("Held back (the export leaves them out; a node agent returns their GPUs to their defaults): "
               + "; ".join(f"{model}: {why}" for model, why in held.items()) + ".")
    gaps = [(sec, msg) for sec in sections for msg in dict.fromkeys(sec.not_computed)]
    if gaps:
        s.heading(f"Not computed ({len(gaps)})")
        s.add(bullets([(sec.anchor, sec.title, msg) for sec, msg in gaps]))
    for key, value in sorted(notes.items()):
        if isinstance(value, str):
            s.note(f"{key}: {value}")
    return s
