"""Which error a screening's analysis uses, chosen by simulation (stats/screening.py's
MIN_RESIDUAL_DF): over small and large two-level designs drawn by pyDOE3, unreplicated and
replicated (seeds as blocks), each candidate error method's family-wise error under the
global null and its power on planted sparse effects (two main effects and one two-factor
chain, each 4 standard errors of an effect):

- `ols`: the model's residual (the replicates' pure error pooled with the contrasts the
  model assumes zero), with its df;
- `lenth`: Lenth's pseudo standard error over every contrast the design estimates;
- `lenth_modelled`: Lenth's over the modelled contrasts alone (the former rule).

A method is admissible where its FWER is at most alpha within Monte Carlo error (2 SE); the
best is the admissible one of highest power. The rule "the residual from D df on, else
Lenth's over every contrast" is scored on every design: the values of D whose choice is best
(or within 0.03 of it) everywhere are printed as `error_rule_passing_df=LOW..HIGH`, and
whether the code's `MIN_RESIDUAL_DF` is among them (`error_rule_matches_code=yes|no`; the
code takes the middle of the span, where no design of the grid sits at its edge).

    python scripts/check_error_rule.py [--sims 1000] [--quick]
`--quick`: 40 studies per design: the script runs; its figures mean little then."""

from __future__ import annotations

import argparse
import math

import numpy as np

from grpo_ablate.config.fractional import alias_chains
from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.screening import MIN_RESIDUAL_DF, Term, fit

ALPHA = 0.05
SIGMA, SEED_SD = 1.0, 0.5


def designs() -> dict[str, np.ndarray]:
    import pyDOE3

    return {"2^3": pyDOE3.ff2n(3), "2^4": pyDOE3.ff2n(4), "2^5": pyDOE3.ff2n(5),
            "2^(4-1)": pyDOE3.fracfact("a b c abc"), "2^(5-1)": pyDOE3.fracfact("a b c d abcd"),
            "2^(6-2)": pyDOE3.fracfact("a b c d abc bcd"),
            "2^(7-4)": pyDOE3.fracfact("a b c ab ac bc abc"),
            "2^(8-4)": pyDOE3.fracfact("a b c d bcd acd abc abd")}


def terms_of(design: np.ndarray) -> list[Term]:
    return [Term(tuple(chain)) for chain in alias_chains(design)]


def studies(design: np.ndarray, terms: list[Term], reps: int, active: dict[int, float],
            methods: list[str], sims: int, rng: np.random.Generator) -> dict[str, list[set]]:
    """Planted studies, each analysed by every method (the same data for each: their
    differences are the methods', not the draws'): the terms each calls (Holm over them)."""
    levels = np.vstack([design] * reps)
    blocks = np.repeat(np.arange(reps), len(design))
    calls: dict[str, list[set]] = {m: [] for m in methods}
    for _ in range(sims):
        y = rng.normal(0, SEED_SD, reps)[blocks] + rng.normal(0, SIGMA, len(levels))
        for i, effect in active.items():
            y += effect / 2 * np.prod(levels[:, list(terms[i].head)], axis=1)
        for method in methods:
            f = fit(y, levels, blocks, terms, method=method)
            p = [1.0 if math.isnan(v) else v for v in f.p]
            calls[method].append({i for i, q in enumerate(holm_adjust(p)) if q < ALPHA})
    return calls


def residual_df(design: np.ndarray, terms: list[Term], reps: int) -> int:
    return len(design) * reps - 1 - (reps - 1) - len(terms)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ns = ap.parse_args()
    sims = 40 if ns.quick else ns.sims
    rng = np.random.default_rng(7)
    mc = 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims)
    table = []
    for name, design in designs().items():
        design = np.asarray(design, dtype=int)
        terms = terms_of(design)
        mains = [i for i, t in enumerate(terms) if t.is_main and not t.aliased][:2] or \
            [i for i, t in enumerate(terms) if t.is_main][:2]
        chains = [i for i, t in enumerate(terms) if not t.is_main][:1]
        for reps in (1, 2):
            df = residual_df(design, terms, reps)
            se = 2 * SIGMA / math.sqrt(len(design) * reps)
            active = {i: 4 * se for i in mains + chains}
            row = {"design": f"{name} x{reps}", "df": df, "m": len(design) - 1}
            methods = [m for m in ("ols", "lenth", "lenth_modelled") if m != "ols" or df >= 1]
            null = studies(design, terms, reps, {}, methods, sims, rng)
            hits = studies(design, terms, reps, active, methods, sims, rng)
            for method in methods:
                row[method] = (sum(bool(c) for c in null[method]) / sims,
                               sum(len(c & set(active)) for c in hits[method])
                               / (sims * len(active)))
            table.append(row)
    for row in table:
        methods = {m: v for m, v in row.items() if isinstance(v, tuple)}
        text = " ".join(f"{m}: fwer {v[0]:.3f} power {v[1]:.3f}" for m, v in methods.items())
        print(f"error_methods[{row['design']}, residual df {row['df']}]= {text}")

    def best(row: dict) -> tuple[str, float]:
        ok = {m: v for m, v in row.items() if isinstance(v, tuple) and v[0] <= ALPHA + mc}
        return max(ok.items(), key=lambda kv: kv[1][1]) if ok else ("none", (0, 0.0))

    def scores(d: int) -> bool:
        for row in table:
            pick = "ols" if row["df"] >= d else "lenth"
            top, (_, power) = best(row)
            got = row.get(pick)
            if got is None or got[0] > ALPHA + mc or got[1] < power - 0.03:
                return False
        return True

    passing = [d for d in range(1, 40) if scores(d)]
    for row in table:
        print(f"error_best[{row['design']}]={best(row)[0]}")
    span = f"{passing[0]}..{passing[-1]}" if passing else "none"
    print(f"error_rule_passing_df={span}")
    print(f"error_rule_matches_code={'yes' if MIN_RESIDUAL_DF in passing else 'no'} "
          f"(MIN_RESIDUAL_DF={MIN_RESIDUAL_DF}: the residual from it on)")


if __name__ == "__main__":
    main()
