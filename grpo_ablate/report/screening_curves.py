"""A screening design's effects on the learning curve: each factor's (and each modelled
interaction's) effect on the ceiling A and on log10 C_mid, from every run's fitted curve
(stats/curves.py), with the screening's own model and error rule (stats/screening.py) and
Holm across the terms of both. Only where every run of the design shows its ceiling: the runs
whose curves bent are a selection (a factor that slows learning leaves its runs unread), and
dropping the others would bias the effects and unbalance the design; otherwise the section
says how many runs show their ceiling and why the others do not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_ablate.report.curves import UNREAD, metric_bounds
from grpo_ablate.results.curves import curve_table
from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.curve_verdicts import SPEED_MARGIN, run_fits
from grpo_ablate.stats.screening import Term, screen, term_verdict
from grpo_ablate.stats.verdicts import verdict

KEY = ["model", "task", "arm", "seed"]


def screening_curves(used: pd.DataFrame, levels: np.ndarray, blocks: np.ndarray,
                     columns: list[Term], term_names: list[str], metric: str, alpha: float,
                     margin: float, direction: str) -> dict | None:
    """report.json's `curves` of a screening: None where no run has a curve; else the runs
    that show their ceiling and, where all do, each term's effect on A and on log10 C_mid."""
    if "sweep_dir" not in used or used["sweep_dir"].isna().all():
        return None
    curves = curve_table(used, metric)
    if curves.empty or curves.groupby(KEY).size().max() < 3:
        return None
    fits = run_fits(curves, metric_bounds(metric)).set_index(KEY)
    per_run = fits.reindex(pd.MultiIndex.from_frame(used[KEY]))
    readable = per_run["identifiable"].eq(True)
    out = {"unit": curves.attrs["compute_unit"], "runs": len(used),
           "readable": int(readable.sum()),
           "unread": {str(k): int(v) for k, v in
                      per_run.loc[~readable, "why"].fillna("short").value_counts().items()},
           "effects": None}
    if not readable.all():
        return out
    tests = []
    for param, col, m, way in (("ceiling", "asymptote", margin, direction),
                               ("speed", "log10_midpoint", SPEED_MARGIN, "lower")):
        fitted, rows = screen(per_run[col].to_numpy(float), levels, blocks, columns, alpha,
                              m, way)
        tests += [(param, m, way, fitted.method, r, t) for r, t in zip(rows, columns,
                                                                          strict=True)]
    # Holm across the terms of both parameters, as the one-at-a-time curves are across
    # arms and both.
    p_adj = holm_adjust([r["p"] for *_, r, _ in tests])
    tost_adj = holm_adjust([r["tost_p"] for *_, r, _ in tests])
    effects: dict[str, dict] = {}
    for (param, m, way, method, r, term), p, tp in zip(tests, p_adj, tost_adj, strict=True):
        word = verdict(p, r["ci"][0], r["ci"][1], tp, alpha, m,
                       way if term.is_main else "higher", mde=r["mde"],
                       exact_zero=method == "none" and r["effect"] == 0.0)
        name = term_names[columns.index(term)]
        effects.setdefault(name, {"name": name, "kind": "main" if term.is_main
                                  else "interaction"})[param] = {
            "effect": r["effect"], "ci": list(r["ci"]), "p_adjusted": p,
            "tost_p_adjusted": tp, "verdict": term_verdict(word, term)}
    out["effects"] = list(effects.values())
    return out


def render_screening_curves(curves: dict | None) -> list[str]:
    """The markdown section."""
    if not curves:
        return []
    lines = ["", "## Ceiling or speed, per factor", ""]
    if curves["effects"] is None:
        why = "; ".join(f"{n} ({UNREAD.get(k, k)})" for k, n in curves["unread"].items())
        return lines + [
            f"{curves['readable']} of {curves['runs']} runs show their ceiling; not read: "
            f"{why}. Effects on A and C_mid need every run's: the runs whose curves bent "
            "are a selection, and the rest of the design would be unbalanced. Not "
            "identifiable at this budget (evaluate more often, or train longer)."]
    lines += [f"Every run's curve fitted (compute in {curves['unit']}); each term's effect "
              "on the ceiling A and on log10 C_mid (below 0: faster) with the design's model "
              "and error rule, Holm across the terms of both.", "",
              "| effect | on A [95% CI] | verdict | on C_mid: ratio [95% CI] | verdict |",
              "|---|---|---|---|---|"]
    for e in curves["effects"]:
        a, s = e["ceiling"], e["speed"]
        lines.append(f"| {e['name']} | {a['effect']:+.3f} [{a['ci'][0]:+.3f}, "
                     f"{a['ci'][1]:+.3f}] | {a['verdict']} | x{_ratio(s['effect'])} "
                     f"[x{_ratio(s['ci'][0])}, x{_ratio(s['ci'][1])}] | {s['verdict']} |")
    return lines


def _ratio(log10_value: float) -> str:
    return f"{10 ** log10_value:.2f}" if math.isfinite(log10_value) else "-"
