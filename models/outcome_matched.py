"""The matched-jobs estimator of what a power setting saved, and the pieces both estimators share.

Matched jobs (models.outcome prefers it): in every multi-GPU job that ran on a treated GPU and at
least one control (a GPU of the same model whose limit did not change over those days; GPUs whose
SM clocks the agent locked, per raw_agent_audit, are never controls), the treated GPU's
    d = log(energy per unit of work) - mean over the job's controls of the same
(the same job, so the same work). Difference in differences: delta = mean(d after) -
mean(d before) removes the GPU's own offset and what changed for everyone. Saving =
1 - exp(delta), in %. 95% interval: Welch's t over the jobs before and after (per GPU its own
jobs; pooled, each job's mean d over its treated GPUs, the point being the mean of the GPUs'
own deltas). The realised slowdown is the same estimate on log(work per busy hour), over the
jobs whose GPUs do not run in step: where after the change a treated GPU did exactly the work of
its controls in the job (a synchronous job, or one whose work is split evenly over its GPUs), the
job's pace is theirs together and such a GPU and its controls slowed alike (a job 10% slower read
as 0%). With only such jobs the slowdown is unknown (NULL), and the row says that the saving is then
an upper bound: the controls wait on the capped GPU and draw more per unit of work. One control per
job is enough, which recommend.hold_out_controls keeps in every job group.

Shared with the GPU-day fallback (models.outcome): energy per unit of work before and after from
GPU-day rows (log_ratio), the 95% interval of a saving (saving_interval) and the saving that
fct_recommendation predicted (predicted_saving), on the measured basis: GPU energy only (neither
side counts the server's overhead), per unit of work, or per active hour the power saving it
implies (power_saving). Savings and slowdowns in %, energy in J per unit.
"""

from __future__ import annotations

import math
from collections import defaultdict

import duckdb
import numpy as np

from joulehouse.models.limit_change import Change
from joulehouse.models.sensitivity_fit import t95
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import records, relation_exists


def log_ratio(rows: list[dict], before: set, after: set, energy: str, work: str, hours: str | None):
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


def saving_interval(delta: float, se: float | None, df: float | None) -> tuple[float | None, float | None]:
    """(low, high) saving % of a log-ratio delta with standard error `se` (95%, t with `df`)."""
    if se is None or df is None or not np.isfinite(se) or df < 1:
        return None, None
    q = t95(df)
    return 100 * (1 - math.exp(delta + q * se)), 100 * (1 - math.exp(delta - q * se))


def recommendation_of(con: duckdb.DuckDBPyConnection, change: Change, limit_w: float) -> dict | None:
    """fct_recommendation's latest row for the GPU before the change that recommended `limit_w`
    (models/sql/outcome_recommendation.sql: its day, saving %, slowdown %, default limit W, clock
    lock MHz); None without one (or without the relation)."""
    if not relation_exists(con, "fct_recommendation"):
        return None
    rows = SQL.records(con, "outcome_recommendation", {"gpu_uuid": change.gpu_uuid,
                                                       "effective_day": change.effective_day, "limit_w": limit_w})
    return rows[0] if rows else None


def _recommended(con: duckdb.DuckDBPyConnection, change: Change, limit_w: float) -> tuple | None:
    """(saving %, slowdown %, default limit W) of recommendation_of's row; None without one."""
    row = recommendation_of(con, change, limit_w)
    return None if row is None else (row["expected_saving_pct"], row["expected_slowdown_pct"], row["default_limit_w"])


def predicted_saving(con: duckdb.DuckDBPyConnection, change: Change) -> tuple[float | None, float | None]:
    """(saving %, slowdown %) fct_recommendation predicted for going from the limit before the
    change to the one after; (None, None) where it predicted neither.

    A recommendation's figures are against the GPU's default limit, the realised saving against
    the limit before the change. So a change from another limit (a cap raised back to the default,
    one cap for another) is rebased on what was predicted at that limit: a revert from a cap that
    was to save 11.6% is predicted to cost 13.1% more. A change to the default needs no row for
    it: the default saves 0% against itself. A change from a limit nothing recommended (one set by
    hand) has no prediction."""
    if not relation_exists(con, "fct_recommendation"):
        return None, None
    after = _recommended(con, change, change.limit_after_w)
    before = _recommended(con, change, change.limit_before_w)
    default_w = next((r[2] for r in (after, before) if r is not None and r[2] is not None), None)
    if after is None and default_w is not None and abs(change.limit_after_w - default_w) < 0.5:
        after = (0.0, 0.0, default_w)
    if after is None:
        return None, None
    from_default = default_w is not None and abs(change.limit_before_w - default_w) < 0.5
    if from_default or (before is None and default_w is None):
        return after[0], after[1]  # from the baseline the recommendation itself is against
    if before is None:
        return None, None  # from a limit no recommendation gave (set by hand): no baseline to rebase on
    (s_after, slow_after, _), (s_before, slow_before, _) = after, before
    if s_after is None or s_before is None or s_before >= 100:
        return None, None
    saving = 100 * (1 - (1 - s_after / 100) / (1 - s_before / 100))
    slowdown = (None if slow_after is None or slow_before is None or slow_before <= -100
                else 100 * ((1 + slow_after / 100) / (1 + slow_before / 100) - 1))
    return saving, slowdown


def _matched_differences(jobs: list[dict], sides: dict[str, tuple[set, set]], controls: set[str],
                         value, own_offsets: bool = True) -> dict[tuple, dict[str, float]]:
    """{(job_id, day, side): {treated gpu: log(value) - mean log(value) of the job's control GPUs}}
    for every job that ran on a treated GPU and at least one control (the same job, so the same
    kind of work), on a day that is before or after the change by that GPU's own days (`sides`:
    {gpu: (before days, after days)}): another treated GPU's earlier before-window is not this
    one's, which may have run at another limit then. Each control's offset from the treated GPU,
    read before the change, is taken out (`own_offsets`, below)."""
    by_job: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in jobs:
        v = value(r) if r["gpu_uuid"] in sides or r["gpu_uuid"] in controls else None
        if v is not None and v > 0:
            by_job[(r["job_id"], r["day"])][r["gpu_uuid"]] = math.log(v)

    def side_of(g: str, job_day) -> str | None:
        own = sides.get(g)
        return None if own is None else "before" if job_day in own[0] else "after" if job_day in own[1] else None

    # Each control's own steady offset from the treated GPU, read from the jobs they shared before
    # the change, is taken out of every job it is a control of: the controls' mix then may change
    # across the change. Without it a job that moved from one control to another (or a control
    # replaced overnight) set the treated GPU against a board 15% hungrier after than before: 25.0%
    # read for 14.3%. A control it shared no job with before cannot be put on that footing.
    before_gaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (_, job_day), ys in by_job.items():
        for g, v in ys.items():
            if side_of(g, job_day) == "before":
                for c, w in ys.items():
                    if c in controls:
                        before_gaps[(g, c)].append(w - v)
    offset = {key: sum(gaps) / len(gaps) for key, gaps in before_gaps.items()}
    if not own_offsets:  # `own_offsets` False: the job's controls as they came (did its GPUs do the same work?)
        offset = {(g, c): 0.0 for g in sides for c in controls}
    out: dict[tuple, dict[str, float]] = defaultdict(dict)
    for (job, job_day), ys in by_job.items():
        for g, v in ys.items():
            side = side_of(g, job_day)
            base = [w - offset[(g, c)] for c, w in ys.items() if (g, c) in offset]
            if side and base:
                out[(job, job_day, side)][g] = v - sum(base) / len(base)
    return dict(out)


# A treated GPU whose work after the change is its controls' to the last digits runs in step with
# them (or its job's work was split evenly over its GPUs): either way the job's pace is not its own.
# Only so exact a match: a looser one (1%) also dropped the jobs a cap did not slow, and the
# slowdown of the rest read high (7.0% for the simulator's 4.1%).
IN_STEP_LOG_WORK = 1e-9


class Speeds(dict):
    """The matched speed differences (as _matched_differences gives them), and whether some jobs ran
    their GPUs in step after the change and were left out of them (matched_rows notes it)."""

    in_step = False

IN_STEP_NOTE = ("after the change its jobs ran their GPUs in step (the same work each): the slowdown is the job's "
                "and is not measured within it, and the saving is an upper bound (the controls wait on the capped GPU)")


def _did(before: list[float], after: list[float]) -> tuple[float, float | None, float | None]:
    """(mean(after) - mean(before), Welch standard error, Welch-Satterthwaite df) over jobs."""
    delta = float(np.mean(after) - np.mean(before))
    if len(before) < 2 or len(after) < 2:
        return delta, None, None
    va, vb = np.var(after, ddof=1) / len(after), np.var(before, ddof=1) / len(before)
    se = math.sqrt(va + vb)
    df = se**4 / (va**2 / (len(after) - 1) + vb**2 / (len(before) - 1)) if se > 0 else None
    return delta, se, df


def matched_differences(con, group: list[Change], controls: list[str], before: set, after: set, work: str):
    """Matched-job differences (see _matched_differences) of log energy per unit of work and of
    log work per hour, and how many control GPUs they involve."""
    days = sorted(before | after)
    jobs = records(con.execute(
        "SELECT job_id, day, gpu_uuid, energy_kwh, busy_hours, flops_total, samples_total, requests_total "
        "FROM outcome_input_jobs "
        "WHERE day BETWEEN ? AND ? AND energy_kwh IS NOT NULL AND NOT coalesce(power_limit_changed, false)",
        [days[0], days[-1]]))
    sides, ctrl = {c.gpu_uuid: (set(c.before_days), set(c.after_days)) for c in group}, set(controls)
    energy = _matched_differences(jobs, sides, ctrl,
                                  lambda r: r["energy_kwh"] / r[work] if (r[work] or 0) > 0 else None)
    # The pace against the job's controls as they came: with each control's offset taken out the
    # simulator's A100 slowdown read 6.6% for a true 4.1%, without 6.4% (a job's GPUs partly wait
    # on each other, so a control's pace is not its own as its energy is)
    speed = _matched_differences(jobs, sides, ctrl,
                                 lambda r: r[work] / r["busy_hours"] if (r[work] or 0) > 0 and r["busy_hours"] else None,
                                 own_offsets=False)
    # after the change, a treated GPU doing its controls' work runs in step with them: no pace of its own
    # (the work itself, no control's offset taken out: an offset moved exactly equal work off 0)
    in_step = {(key, g) for key, d in _matched_differences(jobs, sides, ctrl, lambda r: r[work] or None,
                                                            own_offsets=False).items()
               if key[2] == "after" for g, v in d.items() if abs(v) < IN_STEP_LOG_WORK}
    speed = Speeds({key: kept for key, d in speed.items()
                    if (kept := {g: v for g, v in d.items() if (key, g) not in in_step})})
    speed.in_step = bool(in_step)
    used = {r["gpu_uuid"] for r in jobs if r["gpu_uuid"] in ctrl
            and any((r["job_id"], r["day"], side) in energy for side in ("before", "after"))}
    return energy, speed, len(used)


def split_by_side(diffs: dict[tuple, dict[str, float]], gpu: str | None) -> tuple[list[float], list[float]]:
    """(before, after) job-level differences of one treated GPU, or of the job's treated mean (None)."""
    sides: dict[str, list[float]] = {"before": [], "after": []}
    for (_, _, side), d in diffs.items():
        if gpu is None:
            sides[side].append(float(np.mean(list(d.values()))))
        elif gpu in d:
            sides[side].append(d[gpu])
    return sides["before"], sides["after"]


def power_saving(saving_pct: float | None, slowdown_pct: float | None) -> float | None:
    """The saving in mean busy power (%) implied by a saving in energy per unit of work and a
    slowdown (%): energy per work is power x run time, so power after/before = (1 - saving) / (1 +
    slowdown); None where either is unknown."""
    if saving_pct is None or slowdown_pct is None or slowdown_pct <= -100:
        return None
    return 100 * (1 - (1 - saving_pct / 100) / (1 + slowdown_pct / 100))


def treated_gpu_row(con, c: Change, base: dict, audited: set) -> dict:
    """The start of a treated GPU's outcome row (identity, evidence, what was predicted: saving %,
    slowdown %), which both estimators fill in; the prediction is on the basis of the row's
    outcome_unit: per active hour, the power saving the prediction implies."""
    pred = predicted_saving(con, c)
    if base.get("outcome_unit") == "active_hour":
        # measured per active hour, the realised saving is one of mean busy power: set beside the
        # energy-per-work prediction, a 300 W cap predicted exactly (350 -> 300 W, 10% slower)
        # read 14.3% realised for 5.7% predicted
        pred = (power_saving(*pred), pred[1])
    row = base | {"scope": "gpu", "host": c.host, "gpu_uuid": c.gpu_uuid, "n_treated_gpus": 1,
                  "evidence": "agent_audit+samples" if (c.gpu_uuid, round(c.limit_after_w, 1)) in audited else "samples",
                  "n_days_before": len(c.before_days), "n_days_after": len(c.after_days),
                  "predicted_saving_pct": pred[0], "predicted_slowdown_pct": pred[1]}
    return row


def pooled_row(base: dict, out: list[dict], ok: list[dict]) -> dict:
    """The start of the pooled (model, setting) row both estimators fill in: evidence, days,
    energy per unit before and after, and what was predicted, each over the estimated GPUs `ok`
    (those its realised saving is the mean of), the prediction NULL unless each of them has one."""
    # Over every treated GPU (those not estimated too), a setting measured on one GPU at 4.76%
    # read "where 12.4% was predicted": the other GPU's 20% was in the mean, its saving was not.
    return base | {
        "scope": "model_setting", "host": None, "gpu_uuid": None, "n_treated_gpus": len(ok),
        "evidence": "agent_audit+samples" if all(r["evidence"] != "samples" for r in out) else "samples",
        "n_days_before": max(r["n_days_before"] for r in ok), "n_days_after": max(r["n_days_after"] for r in ok),
        "energy_j_per_unit_before": _mean_known([r["energy_j_per_unit_before"] for r in ok]),
        "energy_j_per_unit_after": _mean_known([r["energy_j_per_unit_after"] for r in ok]),
        "predicted_saving_pct": mean_of_all([r["predicted_saving_pct"] for r in ok]),
        "predicted_slowdown_pct": mean_of_all([r["predicted_slowdown_pct"] for r in ok])}


def setting_of(row: dict) -> tuple:
    """The (model, setting) an outcome row is of: its pooled row's key."""
    return row["gpu_model"], row["effective_day"], row["power_limit_w_before"], row["power_limit_w_after"]


def mean_of_all(values: list[float | None]) -> float | None:
    """The mean where every value is known, else None: a mean over the known part would stand for
    GPUs other than those the row measured."""
    return float(np.mean(values)) if values and all(v is not None for v in values) else None


def _mean_known(values: list[float | None]) -> float | None:
    """The mean of the values that are known (a GPU whose own days give no ratio has None)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def matched_rows(con, group: list[Change], audited: set, base: dict, energy: dict, speed: dict, panel: dict,
                  columns: tuple) -> list[dict]:
    """Outcome rows from matched jobs: per treated GPU and pooled (jobs as the units)."""
    out = []
    for c in group:
        row = treated_gpu_row(con, c, base, audited)
        b, a = split_by_side(energy, c.gpu_uuid)
        if not b or not a:
            out.append(row | {"note": "no job shared with a control GPU before and after the change: not estimated"})
            continue
        out.append(row | _estimate(b, a, *split_by_side(speed, c.gpu_uuid), panel[c.gpu_uuid], c, columns))
    b, a = split_by_side(energy, None)
    ok = [r for r in out if r.get("realised_saving_pct") is not None]
    # The pooled figure is the mean of the treated GPUs' own estimates (each GPU counts once,
    # however many jobs it ran), and its interval is that mean's (pool_estimates).
    per_gpu = ([_did(*split_by_side(energy, r["gpu_uuid"])) for r in ok],
               [_did(*split_by_side(speed, r["gpu_uuid"]))[0] for r in ok if all(split_by_side(speed, r["gpu_uuid"]))])
    if b and a and ok:
        out.append(pooled_row(base, out, ok)
            | {k: v for k, v in _estimate(b, a, *split_by_side(speed, None), None, None, columns, per_gpu).items()
               if not k.startswith("energy_j")})
    if isinstance(speed, Speeds) and speed.in_step:
        for r in out:
            if r.get("realised_saving_pct") is not None and r.get("realised_slowdown_pct") is None:
                r["note"] = IN_STEP_NOTE + (f"; {r['note']}" if r.get("note") else "")
    return out


def pool_estimates(dids: list[tuple[float, float | None, float | None]]) -> tuple[float, float | None, float | None]:
    """(mean, standard error, degrees of freedom) of the mean of n GPUs' own estimates (delta, se,
    df): the larger of the error their own noise carries (sqrt(sum se^2) / n) and their spread
    around each other (sd / sqrt(n), n - 1 degrees of freedom), so neither many jobs on one GPU
    nor a few quiet GPUs make the interval narrower than the GPUs' disagreement."""
    deltas = [d for d, _, _ in dids]
    n = len(deltas)
    mean = float(np.mean(deltas))
    if n == 1:
        return dids[0]
    ses = [se for _, se, _ in dids]
    within = math.sqrt(sum(se * se for se in ses)) / n if all(se is not None for se in ses) else 0.0
    between = float(np.std(deltas, ddof=1)) / math.sqrt(n)
    se = max(within, between)
    return mean, (se if se > 0 else None), float(n - 1)


def _estimate(b: list[float], a: list[float], sb: list[float], sa: list[float], rows, change, columns,
              per_gpu: tuple[list[tuple], list[float]] | None = None) -> dict:
    """Saving and slowdown from job-level differences before (b, sb) and after (a, sa); with
    `per_gpu` (GPUs' own (delta, se, df) of log energy, and log deltas of speed) the point and
    its interval are those of their mean (pool_estimates)."""
    delta, se, df = _did(b, a)
    speed = _did(sb, sa)[0] if sb and sa else None
    if per_gpu:
        delta, se, df = pool_estimates(per_gpu[0])
        # the pace of the same GPUs as the saving, or none: the jobs' pooled pace fell back to a GPU
        # not estimated after the change against another before it (25% read, the true one unknown)
        speed = float(np.mean(per_gpu[1])) if per_gpu[1] else None
    low, high = saving_interval(delta, se, df)
    slow = 100 * (math.exp(-speed) - 1) if speed is not None else None
    x = log_ratio(rows, set(change.before_days), set(change.after_days), *columns) if rows else None
    return {"realised_saving_pct": 100 * (1 - math.exp(delta)), "saving_ci_low_pct": low, "saving_ci_high_pct": high,
            "realised_slowdown_pct": slow,
            "energy_j_per_unit_before": x[2] if x else None, "energy_j_per_unit_after": x[3] if x else None,
            "note": None if se is not None else "fewer than two matched jobs on a side: no interval"}
