"""Independent runs with per-prompt outcomes: the crossed model without a seed effect.

Runs of two arms that share nothing but a number (another trainer's runs 1..n, numbered
alike in every arm) cannot be paired run by run; they share the prompts. On the arm's
n_a x P table A and the baseline's n_b x P table B,

    y[arm, r, p] = mu_arm + b[p] + (arm x prompt)[p] + run[arm, r] + e[arm, r, p],

the prompt effect b cancels in the difference of the arms' means, the runs are Welch's
(each arm's run means, its own variance, every run), and the task scope adds the trick's
effect across prompts, the arm x prompt component var_ap / P. Its method-of-moments
estimate is the variance over prompts of the per-prompt difference of arm means, less what
the runs' own noise puts there (MS_resid_a / n_a + MS_resid_b / n_b, each arm's two-way
residual), truncated at 0. The test takes Welch's df, and under the task scope no more
than the prompts' P - 1 (the larger p of the two readings). Pure functions on arrays.
"""

from __future__ import annotations

import math

import numpy as np

from grpo_ablate.stats.crossed import Components, CrossedTest, _t_tests


def _residual_ms(t: np.ndarray) -> float:
    """The two-way (runs x prompts) residual mean square of one arm's table."""
    r, p = t.shape
    resid = t - t.mean(axis=1, keepdims=True) - t.mean(axis=0, keepdims=True) + t.mean()
    return float((resid ** 2).sum() / ((r - 1) * (p - 1)))


def independent_crossed(a: np.ndarray, b: np.ndarray, min_effect: float, scope: str = "task",
                        conf: float = 0.95) -> CrossedTest:
    """The arm's (n_a x P) and the baseline's (n_b x P) tables of the same P prompts, every
    run of each: the difference of the arms' means, its Welch standard error over run means
    (the prompts scope), plus the arm x prompt component over P under the task scope."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    (na, p), nb = a.shape, b.shape[0]
    ma, mb = a.mean(axis=1), b.mean(axis=1)
    diff = float(ma.mean() - mb.mean())
    va, vb = float(ma.var(ddof=1)), float(mb.var(ddof=1))
    welch_var = va / na + vb / nb
    denom = (va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1)
    welch_df = welch_var ** 2 / denom if denom > 0 else float(na + nb - 2)
    res_a, res_b = _residual_ms(a), _residual_ms(b)
    spread = float((a.mean(axis=0) - b.mean(axis=0)).var(ddof=1))
    prompt = max(0.0, spread - res_a / na - res_b / nb)
    if scope == "task" and prompt > 0:
        se, df = math.sqrt(welch_var + prompt / p), min(welch_df, float(p - 1))
    else:
        se, df = math.sqrt(welch_var), welch_df
    low, high, pv, tost = (float(x[0]) for x in _t_tests(
        np.array([diff]), np.array([se]), np.array([max(1.0, df)]), min_effect, conf))
    # The runs per arm of a balanced design with this Welch variance; the components in the
    # form waiting.py sizes routes with: (run part + residual / P) / runs + prompt / P.
    runs = max(2, round((va + vb) / welch_var)) if welch_var > 0 else min(na, nb)
    parts = Components(seed=max(0.0, va + vb - (res_a + res_b) / p), prompt=prompt,
                       residual=res_a + res_b, seeds=runs, prompts=p,
                       ms_seed=welch_var * runs * p, ms_prompt=prompt * runs, ms_residual=0.0)
    return CrossedTest(diff, se, df, low, high, pv, tost, parts)
