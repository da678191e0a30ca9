"""What a power setting that took effect really saved: fct_recommendation_outcome.

`measure_outcomes(con, day)` finds every GPU whose power limit changed in the last
`max_after_days` days up to `day` (seen in stg_gpu_samples.power_limit_w; corroborated by an
'apply' row of raw_agent_audit when the agent's audit is in the lake) and compares, per GPU:

Matched jobs (preferred; models.outcome_matched): in every multi-GPU job that ran on a treated
GPU and at least one control (a GPU of the same model whose limit did not change; never one whose
SM clocks the agent locked), a difference in differences of log(energy per unit of work) between
the treated GPU and the job's controls, before and after, with Welch's t interval over the jobs
(the slowdown only over jobs whose GPUs do not run in step: models.outcome_matched).

A lower limit the GPU never drew up to before the change (the 99th percentile of each day's power)
saves nothing, and its row says so with no estimate: measured, a lighter job mix after it read as
a 40% saving.

GPU days (fallback, when no job spans treated and control GPUs before and after): r_g =
log(energy per unit after / before) per GPU, delta = r_treated - mean(r_controls), with a
prediction-style interval from the controls' spread. It refuses to report a saving when the
controls ran other kinds of work (stage, workload class) than the treated GPUs: energy per
unit of different work is the job mix, not the setting (+-100 points on the simulator).

Energy per unit of work: jobs' energy (fct_job_efficiency) per FLOP where every job reports
FLOPs, else per sample or request, else the busy hours' GPU energy per active hour (the slowdown is
then unknown; the whole day's energy, idle hours included, made a day of less work read as a loss).
Predicted figures are fct_recommendation's for the limit applied, rebased on the limit before the
change where that was not the default (models.outcome_matched.predicted_saving), on the measured
basis: GPU energy only on both sides (the recommender weighs the server's overhead to choose a
setting, but the saving it stores is the GPU's), per unit of work, or per active hour the power
saving the prediction implies (models.outcome_matched.power_saving).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

import duckdb
import numpy as np

from joulehouse.models.activity import create_activity_view
from joulehouse.models.limit_change import LOOKBACK_DAYS, MAX_AFTER_DAYS, Change, find_changes
from joulehouse.models.outcome_matched import (log_ratio, matched_differences, matched_rows, pooled_row, records,
                                    saving_interval, setting_of, split_by_side, treated_gpu_row)
from joulehouse.models.outcome_reprediction import add_repredictions
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.lake_contract import reading_partitions
from joulehouse.warehouse.sqlio import columns_of, ensure_columns, relation_exists, replace_day_rows

# A unit of work counts only where every job of every GPU-day reports it: a training job's samples
# and an inference job's requests summed as one count would charge the inference energy to samples.
UNITS = (("flop", "job_energy_kwh", "flops_total", "n_jobs_without_flops"),
         ("sample", "job_energy_kwh", "samples_total", "n_jobs_without_samples"),
         ("request", "job_energy_kwh", "requests_total", "n_jobs_without_requests"))
EMPTY_JOBS = ("CREATE OR REPLACE TEMP TABLE outcome_input_jobs (day DATE, gpu_uuid VARCHAR, energy_kwh DOUBLE, "
              "busy_hours DOUBLE, flops_total DOUBLE, samples_total DOUBLE, requests_total DOUBLE, "
              "power_limit_changed BOOLEAN)")


def _unit(rows: list[dict]) -> tuple[str, str, str, str | None]:
    """(unit, energy column, work column, hours column) valid for every GPU-day in `rows`."""
    with_jobs = [r for r in rows if r["n_jobs"]]
    for unit, energy, work, missing in UNITS:
        if with_jobs and all(r[missing] == 0 and (r[work] or 0) > 0 for r in with_jobs):
            return unit, energy, work, "job_hours"
    return "active_hour", "active_energy_kwh", "active_hours", None


def _audited(con: duckdb.DuckDBPyConnection, first: dt.date, day: dt.date,
             actions: tuple[str, ...] = ("apply",)) -> set[tuple[str, float]]:
    """(gpu_uuid, limit W) pairs the agent audited with one of `actions` between `first` and `day`."""
    if not relation_exists(con, "raw_agent_audit"):
        return set()
    rows = con.execute("SELECT gpu_uuid, power_limit_w_after FROM raw_agent_audit WHERE list_contains(?, action) "
                       "AND date BETWEEN ? AND ? AND gpu_uuid IS NOT NULL", [list(actions), first, day]).fetchall()
    return {(u, round(float(w), 1)) for u, w in rows if w is not None}


def _set_by_agent(con: duckdb.DuckDBPyConnection, first: dt.date, day: dt.date) -> set[tuple[str, float]]:
    """(gpu_uuid, limit W) pairs a GPU reached through the agent: its applies and rollbacks, and a
    'verify-failed' row's limit after (a rollback whose limit went back but whose clocks stayed
    locked; an apply that restored the limit before it): none of these is a setting lost."""
    return _audited(con, first, day, actions=("apply", "rollback", "verify-failed"))


# How the note of a (model, setting) whose every GPU lost the agent's setting begins (the report reads it).
LOST_SETTING_NOTE = "every GPU here lost a setting the agent applied"


def _reverted_note(row: dict, applied: set, by_agent: set) -> str | None:
    """A GPU's limit that left a setting the agent had `applied`, to one the agent never set
    (`by_agent`: its applies and rollbacks): the setting was lost (a reboot, a driver reload,
    someone's nvidia-smi), not a recommendation taken."""
    if row.get("scope") != "gpu" or row.get("evidence") != "samples":
        return None
    before, after = round(row["power_limit_w_before"], 1), round(row["power_limit_w_after"], 1)
    if (row["gpu_uuid"], before) in applied and (row["gpu_uuid"], after) not in by_agent:
        return (f"the {before:g} W the agent applied was undone outside it (no audit of this change): "
                "a lost setting, not a recommendation taken")
    return None


def _note_lost_settings(rows: list[dict], applied: set, by_agent: set) -> None:
    """Prefix the note of each GPU row whose change undid a setting the agent applied
    (_reverted_note), and of each (model, setting) row all of whose GPUs did (in place)."""
    def prefix(row: dict, note: str) -> None:
        row["note"] = note + (f"; {row['note']}" if row.get("note") else "")

    lost: dict[tuple, list[bool]] = defaultdict(list)
    for r in rows:
        note = _reverted_note(r, applied, by_agent)
        if note:
            prefix(r, note)
        if r["scope"] == "gpu":
            lost[setting_of(r)].append(note is not None)
    for r in rows:
        if r["scope"] == "model_setting" and all(lost.get(setting_of(r), [False])):
            prefix(r, f"{LOST_SETTING_NOTE} (undone outside it): not a recommendation taken")


def _note_rollbacks(rows: list[dict], rolled_back: set) -> None:
    """A GPU's change to a limit the agent's rollback set (its config expired or was withdrawn) is
    the agent's too, but no recommendation taken: said, where it read as a new '300 -> 400 W'
    setting not corroborated by the agent (in place)."""
    note = ("the agent rolled {} back to its default (its config expired or was withdrawn): not a recommendation "
            "taken")
    back: dict[tuple, list[bool]] = defaultdict(list)
    for r in rows:
        if r["scope"] == "gpu":
            rolled = (r["gpu_uuid"], round(r["power_limit_w_after"], 1)) in rolled_back
            back[setting_of(r)].append(rolled)
            if rolled:
                r["evidence"] = "agent_audit+samples"
                r["note"] = note.format("this GPU") + (f"; {r['note']}" if r.get("note") else "")
    for r in rows:
        if r["scope"] == "model_setting" and all(back.get(setting_of(r), [False])):
            r["evidence"] = "agent_audit+samples"
            r["note"] = note.format("every GPU here") + (f"; {r['note']}" if r.get("note") else "")


def _clock_locked(con: duckdb.DuckDBPyConnection, first: dt.date, day: dt.date) -> set[str]:
    """GPUs the agent locked SM clocks on between `first` and `day`: a lock does not show in
    power_limit_w, so such a GPU is no control (its limit looks unchanged, its work is not)."""
    if not relation_exists(con, "raw_agent_audit"):
        return set()
    # 'verify-failed': a setting the agent could not undo, its lock perhaps left on (the agent's own
    # lock record reads it as unknown); counted a control, it moved a saving by 3 points
    rows = con.execute("SELECT DISTINCT gpu_uuid FROM raw_agent_audit WHERE ((action IN ('apply', 'unchanged') "
                       "AND reason LIKE '%SM clocks locked%') OR action = 'verify-failed') "
                       "AND date BETWEEN ? AND ? AND gpu_uuid IS NOT NULL", [first, day]).fetchall()
    return {u for (u,) in rows}


def _work_kinds(con, gpus: list[str], days: set) -> dict[str, frozenset]:
    """{gpu: the (stage, workload class) pairs of its jobs on `days`}."""
    if not days or not relation_exists(con, "fct_job_efficiency"):
        return {}
    rows = con.execute("SELECT gpu_uuid, stage, workload_class FROM fct_job_efficiency WHERE day BETWEEN ? AND ? "
                       "AND list_contains(?, gpu_uuid)", [min(days), max(days), gpus]).fetchall()
    kinds: dict[str, set] = defaultdict(set)
    for g, stage, cls in rows:
        kinds[g].add((stage, cls))
    return {g: frozenset(k) for g, k in kinds.items()}


def _never_bound(rows: list[dict], c: Change) -> str | None:
    """Why a lower limit cannot have saved anything on this GPU (None: it may have): before the
    change the GPU never drew up to it (the 99th percentile of each day's power). Measured
    anyway, a lighter job mix after the change read as a 40% saving for a cap that never bit."""
    if c.limit_after_w >= c.limit_before_w:
        return None  # a raise: what it cost is measured as it is
    before = [r["p99_power_w"] for r in rows if r["day"] in set(c.before_days) and r.get("p99_power_w") is not None]
    if not before or max(before) >= c.limit_after_w:
        return None
    return (f"the new limit never bound: before it the GPU drew at most {max(before):.0f} W (99th percentile of a "
            f"day), under {c.limit_after_w:g} W: a change in energy per unit is the work's, not the setting's; "
            "not estimated")


def _rows_for_group(con, day: dt.date, group: list[Change], panel: dict[str, list[dict]], controls: list[str],
                    audited: set) -> list[dict]:
    """Per-GPU and pooled outcome rows of the changes of one model made effective on one day; a
    change whose limit never bound (_never_bound) gets its row without an estimate."""
    unbound = {c.gpu_uuid: why for c in group if (why := _never_bound(panel[c.gpu_uuid], c))}
    bound = [c for c in group if c.gpu_uuid not in unbound]
    estimated = _estimated_rows(con, day, bound, panel, controls, audited) if bound else []
    # the unbound GPUs' predictions on the basis of their setting's measured rows: per active hour
    # they stood as energy-per-work savings beside power savings, with no unit of their own
    unit = next((r["outcome_unit"] for r in estimated if r.get("outcome_unit")), None)
    rows = [treated_gpu_row(con, c, {"method": "gpu_day", "day": day, "gpu_model": c.gpu_model,
                                     "effective_day": c.effective_day, "power_limit_w_before": c.limit_before_w,
                                     "power_limit_w_after": c.limit_after_w, "n_control_gpus": len(controls),
                                     "outcome_unit": unit}, audited) | {"note": unbound[c.gpu_uuid]}
            for c in group if c.gpu_uuid in unbound] + estimated
    _note_pooled_coverage(rows)
    return rows


def _note_pooled_coverage(rows: list[dict]) -> None:
    """Say on the pooled row of one setting's `rows` which GPUs its realised and predicted savings
    are of, where not all of the setting's GPUs were estimated, and why it has no prediction where
    some estimated GPU had none (in place)."""
    gpus = [r for r in rows if r["scope"] == "gpu"]
    estimated = [r for r in gpus if r.get("realised_saving_pct") is not None]
    unpredicted = sum(r["predicted_saving_pct"] is None for r in estimated)
    said = []
    if len(estimated) < len(gpus):
        said.append(f"realised and predicted savings over the {len(estimated)} of the {len(gpus)} GPUs that were "
                    "estimated")
    if unpredicted:
        said.append(f"no recommendation predicted {unpredicted} of them: no prediction pooled")
    for r in rows:
        if r["scope"] == "model_setting" and said:
            r["note"] = "; ".join(said + ([r["note"]] if r.get("note") else []))


def _estimated_rows(con, day: dt.date, group: list[Change], panel: dict[str, list[dict]], controls: list[str],
                    audited: set) -> list[dict]:
    """_rows_for_group's estimates: matched jobs where they span treated and control GPUs, else GPU days."""
    first = group[0]
    before, after = set(), set()
    for c in group:
        before |= set(c.before_days)
        after |= set(c.after_days)
    ctrl_rows = {u: [r for r in panel[u] if r["day"] in before | after] for u in controls}
    # the treated GPUs' days in the window too: a job without FLOPs a week before it made the unit
    # active hours (a saving of 14.3% for 4.8%, the slowdown lost)
    unit, energy, work, hours = _unit([r for c in group for r in panel[c.gpu_uuid] if r["day"] in before | after]
                                      + [r for rows in ctrl_rows.values() for r in rows])
    per_gpu = {c.gpu_uuid: log_ratio(panel[c.gpu_uuid], set(c.before_days), set(c.after_days), energy, work, hours)
               for c in group}
    ctrl = {u: log_ratio(rows, before, after, energy, work, hours) for u, rows in ctrl_rows.items()}
    base = {"day": day, "gpu_model": first.gpu_model, "effective_day": first.effective_day, "outcome_unit": unit,
            "power_limit_w_before": first.limit_before_w, "power_limit_w_after": first.limit_after_w}
    if hours is not None:
        matched_e, matched_s, n_matched = matched_differences(con, group, controls, before, after, work)
        if all(split_by_side(matched_e, None)):
            return matched_rows(con, group, audited, base | {"method": "matched_jobs", "n_control_gpus": n_matched},
                                matched_e, matched_s, panel, (energy, work, hours))
    r_map = {u: x[0] for u, x in (per_gpu | ctrl).items() if x}
    s_map = {u: x[1] for u, x in (per_gpu | ctrl).items() if x and x[1] is not None}
    method = "gpu_day"
    # whatever the unit: energy per active hour of other work is no baseline either (controls
    # serving inference against a treated GPU training read a 25% rise as a 20% saving)
    kinds = _work_kinds(con, [c.gpu_uuid for c in group] + list(controls), before | after)
    treated_kinds = frozenset().union(*(kinds.get(c.gpu_uuid, frozenset()) for c in group))
    differ = sorted(u for u in controls if u in r_map and kinds.get(u, frozenset()) != treated_kinds)
    r_c = np.array([r_map[u] for u in controls if u in r_map])
    s_c = np.array([s_map[u] for u in controls if u in s_map])
    n_c = len(r_c)
    out, deltas, speeds = [], [], []
    base = {"method": method, "day": day, "gpu_model": first.gpu_model, "effective_day": first.effective_day, "outcome_unit": unit,
            "power_limit_w_before": first.limit_before_w, "power_limit_w_after": first.limit_after_w,
            "n_control_gpus": n_c}
    note_ctrl = "" if n_c >= 2 else f"only {n_c} control GPU(s) of {first.gpu_model}: no interval"
    for c in group:
        x = per_gpu[c.gpu_uuid]
        row = treated_gpu_row(con, c, base, audited)
        if x is None or c.gpu_uuid not in r_map or n_c == 0:
            out.append(row | {"note": "no work measured before or after, or no control GPU: not estimated"})
            continue
        if differ:
            # Energy per unit of different work is no baseline: the difference would be the job
            # mix, not the setting (intervals of +-100 points on the simulator).
            out.append(row | {"note": f"no job shared with a control GPU, and {len(differ)} of {n_c} control GPUs ran "
                                      "other kinds of work (stage, workload class): realised saving not reported"})
            continue
        delta = r_map[c.gpu_uuid] - float(r_c.mean())
        deltas.append(r_map[c.gpu_uuid])
        se = float(r_c.std(ddof=1) * math.sqrt(1 + 1 / n_c)) if n_c >= 2 else None
        low, high = saving_interval(delta, se, n_c - 1 if n_c >= 2 else None)
        slow = None
        if c.gpu_uuid in s_map and len(s_c):
            speeds.append(s_map[c.gpu_uuid])
            slow = 100 * (math.exp(-(s_map[c.gpu_uuid] - float(s_c.mean()))) - 1)
        out.append(row | {"energy_j_per_unit_before": x[2], "energy_j_per_unit_after": x[3],
                          "realised_saving_pct": 100 * (1 - math.exp(delta)), "saving_ci_low_pct": low,
                          "saving_ci_high_pct": high, "realised_slowdown_pct": slow, "note": note_ctrl or None})
    if deltas and n_c:
        r_t = np.array(deltas)
        delta = float(r_t.mean() - r_c.mean())
        se, df = None, None
        if n_c >= 2:
            v_t = r_t.var(ddof=1) / len(r_t) if len(r_t) >= 2 else 0.0
            v_c = r_c.var(ddof=1) / n_c
            se = math.sqrt(v_t + v_c)
            # Welch-Satterthwaite; with one treated GPU only the controls' spread is known.
            parts = [(v_c, n_c - 1)] + ([(v_t, len(r_t) - 1)] if len(r_t) >= 2 else [])
            df = se**4 / sum(v**2 / k for v, k in parts if k > 0) if se > 0 else None
            if len(r_t) < 2:
                se = float(r_c.std(ddof=1) * math.sqrt(1 + 1 / n_c))
        low, high = saving_interval(delta, se, df)
        slow = (100 * (math.exp(-(float(np.mean(speeds)) - float(s_c.mean()))) - 1)) if speeds and len(s_c) else None
        ok = [r for r in out if r.get("realised_saving_pct") is not None]
        out.append(pooled_row(base, out, ok) | {
            "realised_saving_pct": 100 * (1 - math.exp(delta)), "saving_ci_low_pct": low, "saving_ci_high_pct": high,
            "realised_slowdown_pct": slow, "note": note_ctrl or None})
    return out


def measure_outcomes(con: duckdb.DuckDBPyConnection, day: dt.date, *, lookback_days: int = LOOKBACK_DAYS,
                     max_after_days: int = MAX_AFTER_DAYS) -> int:
    """Write `day`'s rows of fct_recommendation_outcome (delete-then-insert); returns the rows written.

    Needs the warehouse days from `day - max_after_days - lookback_days` to `day` and, for
    energy per unit of work, models.efficiency.build_efficiency for those days."""
    first = day - dt.timedelta(days=max_after_days + lookback_days)
    # weeks of the agent's audit, past the days the build checked: those partitions only, checked
    with reading_partitions(con, "agent_audit", first, day):
        return _measure(con, day, first, lookback_days, max_after_days)


def _measure(con: duckdb.DuckDBPyConnection, day: dt.date, first: dt.date, lookback_days: int,
             max_after_days: int) -> int:
    if relation_exists(con, "fct_job_efficiency"):
        # a table from before measured_hours (or made by hand) counts every job whole
        body = (load_sql("outcome_input_jobs") if "measured_hours" in columns_of(con, "fct_job_efficiency")
                else "SELECT * FROM fct_job_efficiency")
        con.execute(f"CREATE OR REPLACE TEMP VIEW outcome_input_jobs AS {body}")
    else:
        con.execute(EMPTY_JOBS)
    panel: dict[str, list[dict]] = defaultdict(list)
    create_activity_view(con, first, day)
    for r in records(con.execute(load_sql("outcome_gpu_day"), {"first_day": first, "day": day})):
        panel[r["gpu_uuid"]].append(r)
    changes = find_changes(panel, day, lookback_days=lookback_days, max_after_days=max_after_days)
    changed = {c.gpu_uuid for c in changes} | _clock_locked(con, first, day)
    audited = _audited(con, first, day)
    groups: dict[tuple, list[Change]] = defaultdict(list)
    for c in changes:
        if c.before_days:
            groups[(c.gpu_model, c.effective_day, c.limit_before_w, c.limit_after_w)].append(c)
    rows = []
    for (model, effective, _, _), group in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        window = set().union(*(set(c.before_days) | set(c.after_days) for c in group))
        controls = [u for u, rs in panel.items()
                    if u not in changed and rs[0]["gpu_model"] == model
                    and len({r["power_limit_w"] for r in rs if r["day"] >= min(window)}) == 1
                    and all(r["n_power_limits"] == 1 for r in rs if r["day"] >= min(window))]
        rows += _rows_for_group(con, day, group, panel, controls, audited)
    _note_lost_settings(rows, audited, _set_by_agent(con, first, day))
    # a rollback whose clocks would not unlock is audited 'verify-failed': the agent's, as _set_by_agent reads it
    _note_rollbacks(rows, _audited(con, first, day, actions=("rollback", "verify-failed")))
    # last: the after days' profiles replace the temp views the estimates above read
    add_repredictions(con, rows, changes)
    con.execute(load_sql("fct_recommendation_outcome"))
    ensure_columns(con, "fct_recommendation_outcome",  # a table from before the re-prediction
                   {"predicted_on_mix_saving_pct": "DOUBLE", "predicted_on_mix_slowdown_pct": "DOUBLE"})
    replace_day_rows(con, day, {"fct_recommendation_outcome": [
        {k: float(v) if isinstance(v, np.floating) else v for k, v in r.items()} for r in rows]})
    return len(rows)
