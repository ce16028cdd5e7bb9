"""Ceiling or speed: each arm's fitted learning curves against the baseline's, and its effect
at every evaluated budget (pure functions over tables of runs and curves).

- Per run, the saturating fit (stats/curves.py): asymptote A, midpoint C_mid, area.
- Per arm, on the matched seeds whose fits are identifiable in both arms (independent runs:
  every identifiable run of each, Welch's t in place of the paired t): a paired t on A
  (higher is a higher ceiling) and on log10 C_mid (lower is faster: less compute to half
  the gain), Holm across every arm and both parameters, TOST against the report's margin
  for A and against SPEED_MARGIN (20% of compute) for C_mid. Fewer than two such seeds: not
  identifiable at this budget, never a number.
- The words: raises (lowers) the ceiling, learns faster (slower), both, neither, or not
  identifiable at this budget.
- At every budget: the paired effect at each evaluation with a band simultaneous over the
  evaluations (max-t over their estimated correlation where the seeds outnumber the
  evaluations, else Bonferroni-t, which is conservative; independent runs: Bonferroni over
  Welch intervals), and a flag where a decided effect changes sign with the budget."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.curves import fit_curve
from grpo_ablate.stats.significance import paired_compare, welch_compare
from grpo_ablate.stats.verdicts import verdict

KEY = ["model", "task", "arm", "seed"]
SPEED_MARGIN = math.log10(1.2)  # midpoints within 20% of each other: the same speed
BAND_SIMS = 20_000


def run_fits(curves: pd.DataFrame, bounds: tuple[float, float] = (0.0, 1.0)) -> pd.DataFrame:
    """One row per run: its fit's start, asymptote, log10 midpoint, exponent, area, and
    whether (and why not) it is identifiable."""
    rows = []
    for key, run in curves.sort_values("compute").groupby(KEY, sort=True):
        f = fit_curve(run["compute"].to_numpy(), run["value"].to_numpy(), bounds)
        rows.append({**dict(zip(KEY, key, strict=True)), "start": f.start,
                     "asymptote": f.asymptote, "asymptote_se": f.asymptote_se,
                     "log10_midpoint": math.log10(f.midpoint) if f.identifiable else math.nan,
                     "exponent": f.exponent, "auc": f.auc, "identifiable": f.identifiable,
                     "reason": f.reason, "why": f.why,
                     "budget": float(run["compute"].max())})
    return pd.DataFrame(rows, columns=[*KEY, "start", "asymptote", "asymptote_se",
                                       "log10_midpoint", "exponent", "auc", "identifiable",
                                       "reason", "why", "budget"])


def _paired(fits: pd.DataFrame, arm: str, baseline: str, column: str) -> tuple[np.ndarray, ...]:
    a = fits[fits["arm"] == arm].set_index("seed")[column]
    b = fits[fits["arm"] == baseline].set_index("seed")[column]
    seeds = sorted(set(a.dropna().index) & set(b.dropna().index))
    return a.loc[seeds].to_numpy(float), b.loc[seeds].to_numpy(float)


def _unpaired(fits: pd.DataFrame, arm: str, baseline: str, column: str) -> tuple[np.ndarray, ...]:
    a, b = (fits.loc[fits["arm"] == name, column].dropna().to_numpy(float)
            for name in (arm, baseline))
    return a, b


def ceiling_or_speed(fits: pd.DataFrame, baseline: str, alpha: float, margin: float,
                     direction: str = "higher", matched: bool = True) -> list[dict]:
    """Each arm's ceiling and speed verdicts against the baseline (one stratum's fits):
    paired on matched seeds, else Welch on each arm's readable runs."""
    arms = [a for a in dict.fromkeys(fits["arm"]) if a != baseline]
    tests = []
    for arm in arms:
        for param, col, m, way in (("ceiling", "asymptote", margin, direction),
                                   ("speed", "log10_midpoint", SPEED_MARGIN, "lower")):
            if matched:
                x, y = _paired(fits, arm, baseline, col)
                c = paired_compare(x, y, m, robust=False) if len(x) >= 2 else None
            else:
                x, y = _unpaired(fits, arm, baseline, col)
                c = welch_compare(x, y, m, robust=False) if min(len(x), len(y)) >= 2 else None
            tests.append((arm, param, c, m, way, len(x)))
    adjusted = holm_adjust([c.p_value if c is not None else math.nan
                            for _, _, c, _, _, _ in tests])
    tost = holm_adjust([c.tost_p if c is not None else math.nan for _, _, c, _, _, _ in tests])
    got: dict[tuple[str, str], dict] = {}
    for (arm, param, c, m, way, n), p, tp in zip(tests, adjusted, tost, strict=True):
        if c is None:
            got[arm, param] = {"n": n, "verdict": "not_identifiable"}
            continue
        word = verdict(p, c.ci_low, c.ci_high, tp, alpha, m, way,
                       exact_zero=c.exact and c.diff == 0.0, mde=c.mde_at(alpha))
        got[arm, param] = {"n": n, "test": c.test, "diff": c.diff, "ci": [c.ci_low, c.ci_high],
                           "p_adjusted": p, "tost_p_adjusted": tp, "verdict": word}
    return [{"arm": a, "ceiling": got[a, "ceiling"], "speed": got[a, "speed"],
             "words": curve_words(got[a, "ceiling"]["verdict"], got[a, "speed"]["verdict"])}
            for a in arms]


def curve_words(ceiling: str, speed: str) -> str:
    """The combined line a reader asks for."""
    if ceiling == "not_identifiable":
        return "not identifiable at this budget"
    c = {"improves": "raises the ceiling", "harms": "lowers the ceiling"}.get(ceiling)
    s = {"improves": "learns faster", "harms": "learns slower"}.get(speed)
    same_c = ceiling in ("no_effect", "negligible")
    same_s = speed in ("no_effect", "negligible")
    if c and s:
        return f"both: {c} and {s}"
    if c:
        return c + (", same speed" if same_s else "")
    if s:
        return s + (", same ceiling" if same_c else "")
    if same_c and same_s:
        return "neither: same ceiling, same speed"
    return "open"


def budget_band(curves: pd.DataFrame, arm: str, baseline: str, alpha: float,
                seed: int = 0, matched: bool = True) -> dict:
    """The arm's paired effect at every evaluation both arms share on every matched seed,
    with a band simultaneous over those evaluations, and whether a decided effect flips
    (independent runs: `unpaired_band`)."""
    if not matched:
        return unpaired_band(curves, arm, baseline, alpha)
    a = curves[curves["arm"] == arm].pivot_table(index="seed", columns="step", values="value")
    b = curves[curves["arm"] == baseline].pivot_table(index="seed", columns="step",
                                                       values="value")
    seeds = sorted(set(a.index) & set(b.index))
    steps = [s for s in sorted(set(a.columns) & set(b.columns)) if s > 0
             and a.loc[seeds, s].notna().all() and b.loc[seeds, s].notna().all()]
    n = len(seeds)
    if n < 2 or not steps:
        return {"arm": arm, "steps": steps, "n": n, "method": "none"}
    d = a.loc[seeds, steps].to_numpy(float) - b.loc[seeds, steps].to_numpy(float)
    mean, sd = d.mean(axis=0), d.std(axis=0, ddof=1)
    se = sd / math.sqrt(n)
    if n - 1 > len(steps) and np.all(sd > 0):
        corr = np.corrcoef(d, rowvar=False) if len(steps) > 1 else np.ones((1, 1))
        rng = np.random.default_rng(seed)
        z = rng.multivariate_normal(np.zeros(len(steps)), corr, BAND_SIMS,
                                    check_valid="ignore")
        chi = np.sqrt(rng.chisquare(n - 1, BAND_SIMS) / (n - 1))
        crit, method = float(np.quantile(np.abs(z).max(axis=1) / chi, 1 - alpha)), "max-t"
    else:
        crit, method = float(stats.t.ppf(1 - alpha / (2 * len(steps)), n - 1)), "bonferroni-t"
    return _band(arm, steps, n, method, crit, mean, mean - crit * se, mean + crit * se)


def unpaired_band(curves: pd.DataFrame, arm: str, baseline: str, alpha: float) -> dict:
    """Independent runs: the difference of the arms' means at every evaluation each arm has
    on at least two runs, each with its Welch interval at alpha / (evaluations)
    (Bonferroni), so the band is simultaneous whatever the evaluations' correlation."""
    by = {name: curves[curves["arm"] == name].pivot_table(index="seed", columns="step",
                                                          values="value")
          for name in (arm, baseline)}
    steps = [s for s in sorted(set(by[arm].columns) & set(by[baseline].columns)) if s > 0
             and min(by[arm][s].notna().sum(), by[baseline][s].notna().sum()) >= 2]
    n = int(min(len(by[arm]), len(by[baseline])))
    if not steps:
        return {"arm": arm, "steps": steps, "n": n, "method": "none"}
    mean, low, high, crits = [], [], [], []
    for s in steps:
        x, y = by[arm][s].dropna().to_numpy(float), by[baseline][s].dropna().to_numpy(float)
        va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1)) if se > 0 else 1
        crit = float(stats.t.ppf(1 - alpha / (2 * len(steps)), df))
        d = float(x.mean() - y.mean())
        mean.append(d)
        low.append(d - crit * se)
        high.append(d + crit * se)
        crits.append(crit)
    return _band(arm, steps, n, "bonferroni-welch", max(crits), np.array(mean), np.array(low),
                 np.array(high))


def _band(arm: str, steps: list, n: int, method: str, crit: float, mean: np.ndarray,
          low: np.ndarray, high: np.ndarray) -> dict:
    signs = {int(np.sign(m)) for m, lo, hi in zip(mean, low, high, strict=True)
             if lo > 0 or hi < 0}
    return {"arm": arm, "steps": steps, "n": n, "method": method, "critical": crit,
            "diff": mean.tolist(), "low": low.tolist(), "high": high.tolist(),
            "sign_flips": signs == {-1, 1}}
