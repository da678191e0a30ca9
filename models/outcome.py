"""What a power setting that took effect really saved: fct_recommendation_outcome.

`measure_outcomes(con, day)` finds every GPU whose power limit changed in the last
`max_after_days` days up to `day` (seen in stg_gpu_samples.power_limit_w; corroborated by an
'apply' row of raw_agent_audit when the agent's audit is in the lake) and compares, per GPU:

Matched jobs (preferred): in every multi-GPU job that ran on a treated GPU and at least one
control (a GPU of the same model whose limit did not change over those days; GPUs whose SM
clocks the agent locked, per raw_agent_audit, are never controls), the treated GPU's
    d = log(energy per unit of work) - mean over the job's controls of the same
(the same job, so the same work). Difference in differences: delta = mean(d after) -
mean(d before) removes the GPU's own offset and what changed for everyone. Saving =
1 - exp(delta), in %. 95% interval: Welch's t over the jobs before and after (per GPU its own
jobs; pooled, each job's mean d over its treated GPUs, the point being the mean of the GPUs'
own deltas). The realised slowdown is the same estimate on log(work per busy hour). One
control per job is enough, which recommend.hold_out_controls keeps in every job group.

GPU days (fallback, when no job spans treated and control GPUs before and after): r_g =
log(energy per unit after / before) per GPU, delta = r_treated - mean(r_controls), with a
prediction-style interval from the controls' spread. It refuses to report a saving when the
controls ran other kinds of work (stage, workload class) than the treated GPUs: energy per
unit of different work is the job mix, not the setting (+-100 points on the simulator).

Energy per unit of work: jobs' energy (fct_job_efficiency) per FLOP where every job reports
FLOPs, else per sample or request, else whole-day GPU energy per active hour (the slowdown is
then unknown). Predicted figures are fct_recommendation's latest row for the GPU before the
change with the limit that was applied.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import dataclass

import duckdb
import numpy as np
from scipy import stats

from models.sql import load_sql
from warehouse.db import relation_exists

LOOKBACK_DAYS = 7
MAX_AFTER_DAYS = 14
UNITS = (("flop", "job_energy_kwh", "flops_total", "n_jobs_without_flops"),
         ("sample", "job_energy_kwh", "samples_total", "n_jobs_without_samples_or_requests"),
         ("request", "job_energy_kwh", "requests_total", "n_jobs_without_samples_or_requests"))
EMPTY_JOBS = ("CREATE OR REPLACE TEMP TABLE outcome_input_jobs (day DATE, gpu_uuid VARCHAR, energy_kwh DOUBLE, "
              "busy_hours DOUBLE, flops_total DOUBLE, samples_total DOUBLE, requests_total DOUBLE, "
              "power_limit_changed BOOLEAN)")


@dataclass(frozen=True)
class Change:
    """A GPU's power limit change: `before_days` at `limit_before_w`, then `after_days` at `limit_after_w`."""

    gpu_uuid: str
    host: str
    gpu_model: str
    effective_day: dt.date
    limit_before_w: float
    limit_after_w: float
    before_days: tuple[dt.date, ...]
    after_days: tuple[dt.date, ...]


def _records(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def find_changes(panel: dict[str, list[dict]], day: dt.date, *, lookback_days: int = LOOKBACK_DAYS,
                 max_after_days: int = MAX_AFTER_DAYS) -> list[Change]:
    """The latest limit change of each GPU whose new limit took effect within `max_after_days`
    up to `day`. Transition days (two limits read) belong to neither side."""
    changes = []
    for uuid, rows in panel.items():
        clean = [r for r in rows if r["n_power_limits"] == 1 and r["power_limit_w"] is not None]
        if len(clean) < 2:
            continue
        last = clean[-1]["power_limit_w"]
        after = [r for r in reversed(clean) if r["power_limit_w"] == last]
        after_days = []
        for r in reversed(clean):
            if r["power_limit_w"] != last:
                break
            after_days.append(r["day"])
        idx = len(clean) - len(after_days)
        if idx == 0:
            continue  # no change in the window
        before_limit = clean[idx - 1]["power_limit_w"]
        effective = min(after_days)
        if (day - effective).days >= max_after_days:
            continue
        before_days = []
        for r in reversed(clean[:idx]):
            if r["power_limit_w"] != before_limit or (effective - r["day"]).days > lookback_days:
                break
            before_days.append(r["day"])
        changes.append(Change(uuid, after[0]["host"], after[0]["gpu_model"], effective, float(before_limit),
                              float(last), tuple(sorted(before_days)), tuple(sorted(after_days))))
    return changes


def _unit(rows: list[dict]) -> tuple[str, str, str, str | None]:
    """(unit, energy column, work column, hours column) valid for every GPU-day in `rows`."""
    with_jobs = [r for r in rows if r["n_jobs"]]
    for unit, energy, work, missing in UNITS:
        if with_jobs and all(r[missing] == 0 and (r[work] or 0) > 0 for r in with_jobs):
            return unit, energy, work, "job_hours"
    return "active_hour", "energy_kwh", "active_hours", None


def _log_ratio(rows: list[dict], before: set, after: set, energy: str, work: str, hours: str | None):
    """(log energy-per-work ratio after/before, log work-per-hour ratio, J/unit before, J/unit after)."""
    def sums(days: set) -> tuple[float, float, float]:
        chosen = [r for r in rows if r["day"] in days and (r[work] or 0) > 0 and r[energy] is not None]
        return (sum(r[energy] for r in chosen), sum(r[work] for r in chosen),
                sum(r[hours] or 0.0 for r in chosen) if hours else 0.0)

    (eb, wb, hb), (ea, wa, ha) = sums(before), sums(after)
    if min(eb, wb, ea, wa) <= 0:
        return None
    speed = math.log((wa / ha) / (wb / hb)) if hours and ha > 0 and hb > 0 else None
    return math.log((ea / wa) / (eb / wb)), speed, eb * 3.6e6 / wb, ea * 3.6e6 / wa


def _interval(delta: float, se: float | None, df: float | None) -> tuple[float | None, float | None]:
    """(low, high) saving % of a log-ratio delta with standard error `se` (95%, t with `df`)."""
    if se is None or df is None or not np.isfinite(se) or df < 1:
        return None, None
    q = float(stats.t.ppf(0.975, df))
    return 100 * (1 - math.exp(delta + q * se)), 100 * (1 - math.exp(delta - q * se))


def _predicted(con: duckdb.DuckDBPyConnection, change: Change) -> tuple[float | None, float | None]:
    if not relation_exists(con, "fct_recommendation"):
        return None, None
    row = con.execute(
        "SELECT expected_saving_pct, expected_slowdown_pct FROM fct_recommendation WHERE gpu_uuid = ? AND day < ? "
        "AND abs(power_limit_w - ?) < 0.5 ORDER BY day DESC LIMIT 1",
        [change.gpu_uuid, change.effective_day, change.limit_after_w]).fetchone()
    return (row[0], row[1]) if row else (None, None)


def _audited(con: duckdb.DuckDBPyConnection, first: dt.date, day: dt.date) -> set[tuple[str, float]]:
    """(gpu_uuid, limit W) pairs the agent audited as applied between `first` and `day`."""
    if not relation_exists(con, "raw_agent_audit"):
        return set()
    rows = con.execute("SELECT gpu_uuid, power_limit_w_after FROM raw_agent_audit WHERE action = 'apply' "
                       "AND date BETWEEN ? AND ? AND gpu_uuid IS NOT NULL", [first, day]).fetchall()
    return {(u, round(float(w), 1)) for u, w in rows if w is not None}


def _clock_locked(con: duckdb.DuckDBPyConnection, first: dt.date, day: dt.date) -> set[str]:
    """GPUs the agent locked SM clocks on between `first` and `day`: a lock does not show in
    power_limit_w, so such a GPU is no control (its limit looks unchanged, its work is not)."""
    if not relation_exists(con, "raw_agent_audit"):
        return set()
    rows = con.execute("SELECT DISTINCT gpu_uuid FROM raw_agent_audit WHERE action IN ('apply', 'unchanged') "
                       "AND reason LIKE '%SM clocks locked%' AND date BETWEEN ? AND ? AND gpu_uuid IS NOT NULL",
                       [first, day]).fetchall()
    return {u for (u,) in rows}


def _matched_differences(jobs: list[dict], treated: set[str], controls: set[str], before: set, after: set,
                         value) -> dict[tuple, dict[str, float]]:
    """{(job_id, day, side): {treated gpu: log(value) - mean log(value) of the job's control GPUs}}
    for every job on a before or after day that ran on a treated GPU and at least one control
    (the same job, so the same kind of work)."""
    by_job: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in jobs:
        v = value(r) if r["gpu_uuid"] in treated | controls else None
        if v is not None and v > 0:
            by_job[(r["job_id"], r["day"])][r["gpu_uuid"]] = math.log(v)
    out: dict[tuple, dict[str, float]] = {}
    for (job, job_day), ys in by_job.items():
        side = "before" if job_day in before else "after" if job_day in after else None
        base = [v for g, v in ys.items() if g in controls]
        diffs = {g: v - sum(base) / len(base) for g, v in ys.items() if g in treated} if base else {}
        if side and diffs:
            out[(job, job_day, side)] = diffs
    return out


def _did(before: list[float], after: list[float]) -> tuple[float, float | None, float | None]:
    """(mean(after) - mean(before), Welch standard error, Welch-Satterthwaite df) over jobs."""
    delta = float(np.mean(after) - np.mean(before))
    if len(before) < 2 or len(after) < 2:
        return delta, None, None
    va, vb = np.var(after, ddof=1) / len(after), np.var(before, ddof=1) / len(before)
    se = math.sqrt(va + vb)
    df = se**4 / (va**2 / (len(after) - 1) + vb**2 / (len(before) - 1)) if se > 0 else None
    return delta, se, df


def _matched(con, group: list[Change], controls: list[str], before: set, after: set, work: str):
    """Matched-job differences (see _matched_differences) of log energy per unit of work and of
    log work per hour, and how many control GPUs they involve."""
    days = sorted(before | after)
    jobs = _records(con.execute(
        "SELECT job_id, day, gpu_uuid, energy_kwh, busy_hours, flops_total, samples_total, requests_total "
        "FROM outcome_input_jobs "
        "WHERE day BETWEEN ? AND ? AND energy_kwh IS NOT NULL AND NOT coalesce(power_limit_changed, false)",
        [days[0], days[-1]]))
    treated, ctrl = {c.gpu_uuid for c in group}, set(controls)
    energy = _matched_differences(jobs, treated, ctrl, before, after,
                                  lambda r: r["energy_kwh"] / r[work] if (r[work] or 0) > 0 else None)
    speed = _matched_differences(jobs, treated, ctrl, before, after,
                                 lambda r: r[work] / r["busy_hours"] if (r[work] or 0) > 0 and r["busy_hours"] else None)
    used = {r["gpu_uuid"] for r in jobs if r["gpu_uuid"] in ctrl
            and any((r["job_id"], r["day"], side) in energy for side in ("before", "after"))}
    return energy, speed, len(used)


def _split(diffs: dict[tuple, dict[str, float]], gpu: str | None) -> tuple[list[float], list[float]]:
    """(before, after) job-level differences of one treated GPU, or of the job's treated mean (None)."""
    sides: dict[str, list[float]] = {"before": [], "after": []}
    for (_, _, side), d in diffs.items():
        if gpu is None:
            sides[side].append(float(np.mean(list(d.values()))))
        elif gpu in d:
            sides[side].append(d[gpu])
    return sides["before"], sides["after"]


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


def _matched_rows(con, group: list[Change], audited: set, base: dict, energy: dict, speed: dict, panel: dict,
                  columns: tuple) -> list[dict]:
    """Outcome rows from matched jobs: per treated GPU and pooled (jobs as the units)."""
    out, predicted = [], []
    for c in group:
        pred = _predicted(con, c)
        predicted.append(pred)
        row = base | {"scope": "gpu", "host": c.host, "gpu_uuid": c.gpu_uuid, "n_treated_gpus": 1,
                      "evidence": "agent_audit+samples" if (c.gpu_uuid, round(c.limit_after_w, 1)) in audited else "samples",
                      "n_days_before": len(c.before_days), "n_days_after": len(c.after_days),
                      "predicted_saving_pct": pred[0], "predicted_slowdown_pct": pred[1]}
        b, a = _split(energy, c.gpu_uuid)
        if not b or not a:
            out.append(row | {"note": "no job shared with a control GPU before and after the change: not estimated"})
            continue
        out.append(row | _estimate(b, a, *_split(speed, c.gpu_uuid), panel[c.gpu_uuid], c, columns))
    b, a = _split(energy, None)
    ok = [r for r in out if r.get("realised_saving_pct") is not None]
    # The pooled figure is the mean of the treated GPUs' own estimates (each GPU counts once,
    # however many jobs it ran); its interval comes from the jobs' spread.
    per_gpu = ([_did(*_split(energy, r["gpu_uuid"]))[0] for r in ok],
               [_did(*_split(speed, r["gpu_uuid"]))[0] for r in ok if all(_split(speed, r["gpu_uuid"]))])
    if b and a and ok:
        known = [p for p in predicted if p[0] is not None]
        out.append(base | {
            "scope": "model_setting", "host": None, "gpu_uuid": None, "n_treated_gpus": len(ok),
            "evidence": "agent_audit+samples" if all(r["evidence"] != "samples" for r in out) else "samples",
            "n_days_before": max(r["n_days_before"] for r in ok), "n_days_after": max(r["n_days_after"] for r in ok),
            "energy_j_per_unit_before": float(np.mean([r["energy_j_per_unit_before"] for r in ok])),
            "energy_j_per_unit_after": float(np.mean([r["energy_j_per_unit_after"] for r in ok])),
            "predicted_saving_pct": float(np.mean([p[0] for p in known])) if known else None,
            "predicted_slowdown_pct": float(np.mean([p[1] for p in known if p[1] is not None]))
            if any(p[1] is not None for p in known) else None}
            | {k: v for k, v in _estimate(b, a, *_split(speed, None), None, None, columns, per_gpu).items()
               if not k.startswith("energy_j")})
    return out


def _estimate(b: list[float], a: list[float], sb: list[float], sa: list[float], rows, change, columns,
              per_gpu: tuple[list[float], list[float]] | None = None) -> dict:
    """Saving and slowdown from job-level differences before (b, sb) and after (a, sa); with
    `per_gpu` (GPUs' own log deltas of energy and of speed) the point is their mean."""
    delta, se, df = _did(b, a)
    speed = _did(sb, sa)[0] if sb and sa else None
    if per_gpu:
        delta = float(np.mean(per_gpu[0]))
        speed = float(np.mean(per_gpu[1])) if per_gpu[1] else speed
    low, high = _interval(delta, se, df)
    slow = 100 * (math.exp(-speed) - 1) if speed is not None else None
    x = _log_ratio(rows, set(change.before_days), set(change.after_days), *columns) if rows else None
    return {"realised_saving_pct": 100 * (1 - math.exp(delta)), "saving_ci_low_pct": low, "saving_ci_high_pct": high,
            "realised_slowdown_pct": slow,
            "energy_j_per_unit_before": x[2] if x else None, "energy_j_per_unit_after": x[3] if x else None,
            "note": None if se is not None else "fewer than two matched jobs on a side: no interval"}


def _rows_for_group(con, day: dt.date, group: list[Change], panel: dict[str, list[dict]], controls: list[str],
                    audited: set) -> list[dict]:
    """Per-GPU and pooled outcome rows of the changes of one model made effective on one day."""
    first = group[0]
    before, after = set(), set()
    for c in group:
        before |= set(c.before_days)
        after |= set(c.after_days)
    ctrl_rows = {u: [r for r in panel[u] if r["day"] in before | after] for u in controls}
    unit, energy, work, hours = _unit([r for c in group for r in panel[c.gpu_uuid]]
                                      + [r for rows in ctrl_rows.values() for r in rows])
    per_gpu = {c.gpu_uuid: _log_ratio(panel[c.gpu_uuid], set(c.before_days), set(c.after_days), energy, work, hours)
               for c in group}
    ctrl = {u: _log_ratio(rows, before, after, energy, work, hours) for u, rows in ctrl_rows.items()}
    base = {"day": day, "gpu_model": first.gpu_model, "effective_day": first.effective_day, "outcome_unit": unit,
            "power_limit_w_before": first.limit_before_w, "power_limit_w_after": first.limit_after_w}
    if hours is not None:
        matched_e, matched_s, n_matched = _matched(con, group, controls, before, after, work)
        if all(_split(matched_e, None)):
            return _matched_rows(con, group, audited, base | {"method": "matched_jobs", "n_control_gpus": n_matched},
                                 matched_e, matched_s, panel, (energy, work, hours))
    r_map = {u: x[0] for u, x in (per_gpu | ctrl).items() if x}
    s_map = {u: x[1] for u, x in (per_gpu | ctrl).items() if x and x[1] is not None}
    method = "gpu_day"
    kinds = _work_kinds(con, [c.gpu_uuid for c in group] + list(controls), before | after) if hours is not None else {}
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
    predicted = []
    for c in group:
        x = per_gpu[c.gpu_uuid]
        pred = _predicted(con, c)
        predicted.append(pred)
        row = base | {"scope": "gpu", "host": c.host, "gpu_uuid": c.gpu_uuid, "n_treated_gpus": 1,
                      "evidence": "agent_audit+samples" if (c.gpu_uuid, round(c.limit_after_w, 1)) in audited else "samples",
                      "n_days_before": len(c.before_days), "n_days_after": len(c.after_days),
                      "predicted_saving_pct": pred[0], "predicted_slowdown_pct": pred[1]}
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
        low, high = _interval(delta, se, n_c - 1 if n_c >= 2 else None)
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
        low, high = _interval(delta, se, df)
        known = [p for p in predicted if p[0] is not None]
        slow = (100 * (math.exp(-(float(np.mean(speeds)) - float(s_c.mean()))) - 1)) if speeds and len(s_c) else None
        ok = [r for r in out if r.get("realised_saving_pct") is not None]
        out.append(base | {
            "scope": "model_setting", "host": None, "gpu_uuid": None, "n_treated_gpus": len(deltas),
            "evidence": "agent_audit+samples" if all(r["evidence"] != "samples" for r in out) else "samples",
            "n_days_before": max(r["n_days_before"] for r in ok), "n_days_after": max(r["n_days_after"] for r in ok),
            "energy_j_per_unit_before": float(np.mean([r["energy_j_per_unit_before"] for r in ok])),
            "energy_j_per_unit_after": float(np.mean([r["energy_j_per_unit_after"] for r in ok])),
            "realised_saving_pct": 100 * (1 - math.exp(delta)), "saving_ci_low_pct": low, "saving_ci_high_pct": high,
            "predicted_saving_pct": float(np.mean([p[0] for p in known])) if known else None,
            "predicted_slowdown_pct": float(np.mean([p[1] for p in known if p[1] is not None]))
            if any(p[1] is not None for p in known) else None,
            "realised_slowdown_pct": slow, "note": note_ctrl or None})
    return out


def measure_outcomes(con: duckdb.DuckDBPyConnection, day: dt.date, *, lookback_days: int = LOOKBACK_DAYS,
                     max_after_days: int = MAX_AFTER_DAYS) -> int:
    """Write `day`'s rows of fct_recommendation_outcome (delete-then-insert); returns the rows written.

    Needs the warehouse days from `day - max_after_days - lookback_days` to `day` and, for
    energy per unit of work, models.efficiency.build_efficiency for those days."""
    first = day - dt.timedelta(days=max_after_days + lookback_days)
    if relation_exists(con, "fct_job_efficiency"):
        con.execute("CREATE OR REPLACE TEMP VIEW outcome_input_jobs AS SELECT * FROM fct_job_efficiency")
    else:
        con.execute(EMPTY_JOBS)
    panel: dict[str, list[dict]] = defaultdict(list)
    for r in _records(con.execute(load_sql("outcome_gpu_day"), {"first_day": first, "day": day})):
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
    con.execute(load_sql("fct_recommendation_outcome"))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM fct_recommendation_outcome WHERE day = ?", [day])
        for r in rows:
            names = list(r)
            con.execute(f"INSERT INTO fct_recommendation_outcome ({', '.join(names)}) "
                        f"VALUES ({', '.join('?' * len(names))})", [float(v) if isinstance(v, np.floating) else v
                                                                    for v in r.values()])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return len(rows)
