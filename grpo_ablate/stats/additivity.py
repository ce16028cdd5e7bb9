"""Do tricks add up? A combination's effect against the baseline beside the sum of its
tricks' single-trick effects, on the seeds where every one of them ran (matched seeds: the
seed effect cancels in each difference).

Per seed s: observed_s = C_s - B_s, predicted_s = sum_i (T_i,s - B_s), and their difference
d_s = observed_s - predicted_s, the interaction. Its mean has a t interval over the seeds.
The sentence: "adds up" when the interval lies inside +-min_effect; "less than the sum (the
tricks overlap)" or "more than the sum" when it excludes 0; else "cannot tell yet (+N
seeds)", N the seeds a t interval of this spread needs to settle one way."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as st

ADDS_UP = "adds up"
LESS = "less than the sum (the tricks overlap)"
MORE = "more than the sum"


@dataclass(frozen=True)
class Additivity:
    seeds: int
    observed: float | None     # the combination's mean difference from the baseline
    predicted: float | None    # the mean of the summed single-trick differences
    difference: float | None   # observed - predicted (the interaction)
    ci_low: float | None
    ci_high: float | None
    sentence: str
    more_seeds: int | None     # for "cannot tell yet"

    def as_dict(self) -> dict:
        return asdict(self)


def seeds_for_halfwidth(sd: float, halfwidth: float, alpha: float) -> int:
    """The fewest seeds whose t interval of spread `sd` is at most `halfwidth` wide each way."""
    n = 2
    while n < 10_000 and st.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n) > halfwidth:
        n += 1
    return n


def additivity(combined: np.ndarray, singles: np.ndarray, baseline: np.ndarray,
               min_effect: float, alpha: float = 0.05) -> Additivity:
    """`combined`, `baseline`: one value per matched seed; `singles`: seeds x tricks."""
    combined, baseline = np.asarray(combined, float), np.asarray(baseline, float)
    n = len(combined)
    if n == 0:  # (no seed has every single-trick run: a topology sweep's arms, say)
        return Additivity(0, None, None, None, None, None, "cannot tell yet (+2 seeds)", 2)
    singles = np.asarray(singles, float).reshape(n, -1)
    observed = combined - baseline
    predicted = (singles - baseline[:, None]).sum(axis=1)
    d = observed - predicted
    mean = float(d.mean())
    if n < 2:
        return Additivity(n, float(observed.mean()), float(predicted.mean()), mean, None, None,
                          f"cannot tell yet (+{2 - n} seeds)", 2 - n)
    sd = float(d.std(ddof=1))
    half = float(st.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n))
    low, high = mean - half, mean + half
    more = None
    if -min_effect <= low and high <= min_effect:
        sentence = ADDS_UP
    elif low > 0 or high < 0:
        sentence = MORE if low > 0 else LESS
    else:
        # Settling needs the interval inside +-min_effect (if the mean stays there) or clear
        # of 0 (if it does not).
        target = min_effect - abs(mean) if abs(mean) < min_effect else abs(mean)
        more = max(1, seeds_for_halfwidth(sd, target, alpha) - n) if target > 0 else None
        sentence = f"cannot tell yet (+{more} seeds)" if more else "cannot tell yet"
    return Additivity(n, float(observed.mean()), float(predicted.mean()), mean, low, high,
                      sentence, more)


def combinations_in(df, metric: str, baseline: str, min_effect: float, alpha: float = 0.05,
                    components=None) -> list[dict]:
    """For each combined arm of a results table (its `composed_of` column: "A+B"), per
    model and task: its additivity on the seeds where it, the baseline and every trick it
    combines completed. `components`: another table the single-trick runs may come from (the
    sweep a confirmation combines), the baseline's values being this table's."""
    import pandas as pd  # heavy: only where a report is made

    if "composed_of" not in df.columns or metric not in df.columns:
        return []
    done = df[df["status"] == "completed"]
    singles = done if components is None else pd.concat(
        [done, components[components["status"] == "completed"]], ignore_index=True)
    out = []
    combined_rows = done[done["composed_of"].notna() & (done["composed_of"] != "")]
    keys = ["model", "task", "arm", "composed_of"]
    for model, task, arm, parts in sorted(combined_rows[keys].drop_duplicates().itertuples(
            index=False, name=None)):
        tricks = [t for t in str(parts).split("+") if t]

        def per_seed(name: str, table=done, model=model, task=task) -> dict:
            sel = table[(table["arm"] == name) & (table["model"] == model)
                        & (table["task"] == task)]
            return sel.groupby("seed")[metric].mean().dropna().to_dict()

        base, comb = per_seed(baseline), per_seed(arm)
        each = [per_seed(t, singles) for t in tricks]
        seeds = sorted(set(comb) & set(base) & set.intersection(*(set(e) for e in each))
                       if each else set())
        result = additivity(np.array([comb[s] for s in seeds]),
                            np.array([[e[s] for e in each] for s in seeds]).reshape(
                                len(seeds), len(each)),
                            np.array([base[s] for s in seeds]), min_effect, alpha)
        missing = [t for t, e in zip(tricks, each, strict=True) if not e]
        out.append({"arm": arm, "model": model, "task": task, "composed_of": tricks,
                    "seeds_used": seeds, "missing": missing, **result.as_dict()})
    return out
