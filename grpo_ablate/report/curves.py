"""The report's learning-curve section: each run's held-out metric against compute, fitted
(stats/curves.py), each arm's ceiling and speed against the baseline, and its effect at
every evaluated budget with a simultaneous band (stats/curve_verdicts.py). Runs whose
histories hold fewer than two evaluations after the start (a CSV of final numbers, runs with
evaluation off) give no section."""

from __future__ import annotations

import math

import pandas as pd

from grpo_ablate.results.curves import curve_table
from grpo_ablate.stats.curve_verdicts import budget_band, ceiling_or_speed, run_fits

INERT_WORDS = "inert (not tested): the trick hardly acted"
BOUNDED = ("accuracy", "pass", "reward_mean", "exact", "acc")  # metrics in 0..1


def metric_bounds(metric: str) -> tuple[float, float]:
    """The range an asymptote may take: 0..1 for a rate, else unbounded."""
    name = metric.rsplit("/", 1)[-1]
    return (0.0, 1.0) if any(k in name for k in BOUNDED) else (-math.inf, math.inf)


def has_curves(df: pd.DataFrame) -> bool:
    """Whether the runs say where their curves are (a sweep folder, a curve source)."""
    return any(c in df and df[c].notna().any() for c in ("sweep_dir", "curve_source"))


def curves_of(df: pd.DataFrame, report: dict, curves: pd.DataFrame | None = None
              ) -> dict | None:
    """report.json's `curves`: the compute unit, each run's fit, and per stratum each arm's
    ceiling and speed verdicts and its band over budgets; None where no run has a curve.
    `curves`: the runs' curve table (results/curves.py) where the caller has read it."""
    if not has_curves(df):
        return None
    metric, baseline = report["metric"], report["baseline"]
    matched = (report.get("design") or {}).get("runs", "matched") == "matched"
    if curves is None:
        curves = curve_table(df[df["status"] != "failed"], metric)
    if curves.empty or curves.groupby(["model", "task", "arm", "seed"]).size().max() < 3:
        return None
    fits = run_fits(curves, metric_bounds(metric))
    strata = []
    for st in report["strata"]:
        mine = (fits["model"] == st["model"]) & (fits["task"] == st["task"])
        cur = curves[(curves["model"] == st["model"]) & (curves["task"] == st["task"])]
        margin = st.get("min_effect") or report["min_effect"]
        # An arm the main table calls inert (its trick hardly acted) is not tested here
        # either, and takes no share of the Holm family.
        inert = [a["arm"] for a in st["arms"] if a["verdict"] == "inert"]
        rows = ceiling_or_speed(fits[mine & ~fits["arm"].isin(inert)], baseline,
                                report["alpha"], margin, report["direction"], matched)
        # Simultaneous over the budgets and, by Bonferroni, over the arms: a band decides
        # at the family-wise level the verdicts keep, never more often than they do.
        for row in rows:
            row["band"] = budget_band(cur, row["arm"], baseline,
                                      report["alpha"] / max(1, len(rows)), matched=matched)
        rows += [{"arm": a, "ceiling": {"n": 0, "verdict": "inert"},
                  "speed": {"n": 0, "verdict": "inert"}, "words": INERT_WORDS,
                  "band": {"arm": a, "steps": [], "n": 0, "method": "none"}} for a in inert]
        strata.append({"model": st["model"], "task": st["task"], "arms": rows})
    return {"unit": curves.attrs["compute_unit"], "metric": metric, "paired": matched,
            "runs": fits.to_dict("records"), "strata": strata}


def render_curves(curves: dict | None) -> list[str]:
    """The markdown section."""
    if not curves:
        return []
    unit = curves["unit"]
    runs = curves["runs"]
    readable = sum(bool(r["identifiable"]) for r in runs)
    lines = ["", "## Ceiling or speed: the learning curves", "",
             f"Each run's `{curves['metric']}` against its compute ({unit}) fitted as "
             "R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (ScaleRL's form): A the ceiling, "
             "C_mid the compute to half the gain. A run's A is read only where its curve "
             "has bent within the budget and A's standard error is at most 0.05 "
             f"(docs/verdicts.md); {readable} of {len(runs)} runs here. Per arm, "
             + ("on the seeds readable in both arms: a paired t" if curves.get("paired", True)
                else "on each arm's readable runs (independent runs): Welch's t")
             + " on A and on log10 C_mid, Holm across the arms "
             "and both, TOST for \"same\" (the report's margin for A; 20% of compute for "
             "C_mid). The band: the effect at each evaluation, simultaneous over them and (by "
             "Bonferroni) over the arms.", "",
             "| arm | ceiling: A diff [95% CI] | verdict | speed: C_mid ratio [95% CI] | "
             "verdict | in words | at every budget |", "|---|---|---|---|---|---|---|"]
    for st in curves["strata"]:
        for row in st["arms"]:
            c, s = row["ceiling"], row["speed"]
            ceiling = (f"{c['diff']:+.3f} {interval(c['ci'], '{:+.3f}', c['diff'])} (n={c['n']})"
                       if "diff" in c else f"- (n={c['n']})")
            speed = (f"x{10 ** s['diff']:.2f} "
                     + interval([10 ** v for v in s["ci"]], "x{:.2f}", s["diff"]) if "diff" in s else "-")
            lines.append(f"| {row['arm']} | {ceiling} | {c['verdict']} | {speed} | "
                         f"{s['verdict']} | {row['words']} | {band_text(row['band'])} |")
    unread = pd.Series([r["why"] for r in runs if not r["identifiable"]])
    if len(unread):
        lines += ["", "Runs whose ceiling is not read: " + "; ".join(
            f"{n} ({UNREAD[why]})" for why, n in unread.value_counts().items()) + "."]
    return lines


UNREAD = {"short": "too few evaluations: a curve needs 4 after the start",
          "flat": "the metric did not move from its start beyond its noise",
          "straight": "a straight rise fits as well as a curve: not bent within the budget",
          "beyond": "the fitted midpoint lies beyond the budget",
          "uncertain": "the asymptote's standard error above 0.05"}


def interval(ci: list[float], form: str, diff: float) -> str:
    """A 95% interval, or why there is none: the difference has no spread across seeds."""
    if not all(math.isfinite(v) for v in ci):
        return "[identical on every seed]" if diff == 0 else "[no spread across seeds]"
    return "[" + ", ".join(form.format(v) for v in ci) + "]"


def band_text(band: dict) -> str:
    """Where the effect is decided along the budget, and a flip."""
    if band.get("method", "none") == "none":
        return "-"
    decided = [(s, d) for s, d, lo, hi in zip(band["steps"], band["diff"], band["low"],
                                               band["high"], strict=True) if lo > 0 or hi < 0]
    if not decided:
        return f"open at every budget ({band['method']})"
    text = ", ".join(f"step {s}: {d:+.3f}" for s, d in decided[:4])
    return ("**sign flips with the budget**: " if band["sign_flips"] else "decided at ") + text
