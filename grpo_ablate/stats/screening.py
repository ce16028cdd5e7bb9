"""The analysis of a two-level screening design: pure functions over arrays.

The model: y = mu + block(seed) + sum_j beta_j x_j + sum_c gamma_c z_c + e, with x_j = -1/+1
the factor's level in the run, and one column z_c for each alias chain of two-trick
interactions only (the first term's product column; its aliases share it). An effect is
2 beta, the mean at the trick's level minus the mean at the baseline's, averaged over the
design's settings of the other factors. A chain holding a main effect and two-trick
interactions (resolution III) is one estimate of their signed sum.

The error, from all the information the design holds: the residual of that model (its
replicates' pure error, blocks taken out, pooled with the contrasts the model assumes zero:
the chains of three tricks and more) when it has at least MIN_RESIDUAL_DF degrees of
freedom; else Lenth's pseudo standard error over every contrast the design estimates
(Lenth 1989: the modelled ones and the unmodelled, each an effect or noise), its p-values
calibrated by simulating the same number of null contrasts (the t(m/3) reference Lenth
proposed is conservative, Ye & Hamada 2000). MIN_RESIDUAL_DF is the rule
scripts/check_error_rule.py chose by simulation over small and large designs, unreplicated
and replicated (FWER at most alpha, the higher power). An error of zero is claimed only
where replicates exist and agree; where the only error is contrasts that came out zero (an
unreplicated design whose tricks did not act), the error is unknown and every effect open.
Holm across every tested effect, TOST against the margin, the MDE at 80% power."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.significance import is_zero_spread
from grpo_ablate.stats.verdicts import verdict

# Fewer residual df than this and Lenth's PSE over every contrast is the better-powered
# test (scripts/check_error_rule.py, docs/figures.md); from it on, the residual's t.
MIN_RESIDUAL_DF = 4
LENTH_SIMS = 20_000
POWER_TARGET = 0.8


@dataclass(frozen=True)
class Term:
    """One estimable column: its terms (a chain: each a tuple of factor indices, with its
    sign relative to the first), and whether a main effect heads it."""

    terms: tuple[tuple[tuple[int, ...], int], ...]

    @property
    def head(self) -> tuple[int, ...]:
        return self.terms[0][0]

    @property
    def is_main(self) -> bool:
        return len(self.head) == 1

    @property
    def aliased(self) -> bool:
        return len(self.terms) > 1


def model_matrix(levels: np.ndarray, blocks: np.ndarray, columns: list[Term]) -> np.ndarray:
    """Intercept, one dummy per block after the first, then each term's column."""
    levels = np.asarray(levels, dtype=float)
    names = sorted(set(blocks.tolist()))
    parts = [np.ones((len(levels), 1))]
    parts += [(blocks == b).astype(float)[:, None] for b in names[1:]]
    parts += [np.prod(levels[:, list(t.head)], axis=1)[:, None] for t in columns]
    return np.hstack(parts)


def lenth_pse(contrasts: np.ndarray) -> float:
    """Lenth's pseudo standard error of a set of effect estimates (most of them null)."""
    c = np.abs(np.asarray(contrasts, dtype=float))
    s0 = 1.5 * np.median(c)
    trimmed = c[c < 2.5 * s0]
    return float(1.5 * np.median(trimmed)) if len(trimmed) else math.nan


@lru_cache(maxsize=64)
def lenth_null(m: int, sims: int = LENTH_SIMS, seed: int = 0) -> np.ndarray:
    """|contrast| / PSE under the global null for m contrasts, sorted (a fixed seed: the
    same p-values for the same data)."""
    rng = np.random.default_rng(seed)
    c = np.abs(rng.standard_normal((sims, m)))
    s0 = 1.5 * np.median(c, axis=1, keepdims=True)
    pse = 1.5 * np.nanmedian(np.where(c < 2.5 * s0, c, np.nan), axis=1, keepdims=True)
    return np.sort((c / pse).ravel())


def lenth_p(t: float, m: int) -> float:
    null = lenth_null(m)
    return float((len(null) - np.searchsorted(null, abs(t), side="left") + 1) / (len(null) + 1))


@lru_cache(maxsize=256)
def lenth_critical(m: int, alpha: float) -> float:
    """The two-sided critical |t| at `alpha` for m contrasts."""
    return float(np.quantile(lenth_null(m), 1 - alpha))


@dataclass(frozen=True)
class Fit:
    effects: np.ndarray      # 2 beta per term
    se: np.ndarray           # of each effect
    df: float                # residual df (OLS) or m/3 (Lenth, for the CI's t)
    method: str              # "ols" | "lenth" | "none" (replicates agree) | "unknown"
    p: np.ndarray
    residual_df: int
    contrasts: int = 0       # every contrast the design estimates (Lenth's m)
    pure_df: int = 0         # the replicates' own error df (0: unreplicated)


def contrast_columns(levels: np.ndarray) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Every contrast the design's points estimate: one column per alias class of the
    factors' products (all orders), the lowest-order product naming it; a product that is
    constant (a word of the defining relation) estimates nothing."""
    from itertools import combinations

    levels = np.asarray(levels, dtype=float)
    k = levels.shape[1]
    seen: dict[tuple, tuple[int, ...]] = {}
    out = []
    for order in range(1, k + 1):
        for term in combinations(range(k), order):
            col = np.prod(levels[:, list(term)], axis=1)
            if np.all(col == col[0]):
                continue
            key = tuple(np.round(col * col[0], 12))
            if key not in seen:
                seen[key] = term
                out.append((term, col))
    return out


def pure_error_df(levels: np.ndarray, blocks: np.ndarray) -> int:
    """Degrees of freedom of the replicates' own error: runs less distinct points, less the
    blocks beyond the first (a seed's shift is taken out)."""
    points = {tuple(r) for r in np.asarray(levels).tolist()}
    return max(0, len(levels) - len(points) - (len(set(np.asarray(blocks).tolist())) - 1))


def fit(y: np.ndarray, levels: np.ndarray, blocks: np.ndarray, columns: list[Term],
        min_residual_df: int = MIN_RESIDUAL_DF, method: str | None = None) -> Fit:
    """The effects and their p-values, by the residual error or (too few residual df)
    Lenth's PSE over every contrast; `method` forces one (the simulation's candidates)."""
    y = np.asarray(y, dtype=float)
    blocks = np.asarray(blocks)
    x = model_matrix(levels, blocks, columns)
    rank = np.linalg.matrix_rank(x)
    if rank < x.shape[1]:
        raise ValueError(f"the runs present estimate {rank} of the model's {x.shape[1]} "
                         "columns: a design point is missing from every replicate")
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    k = len(columns)
    effects = 2 * beta[-k:]
    resid_df = len(y) - x.shape[1]
    pure = pure_error_df(levels, blocks)
    resid = y - x @ beta
    all_effects = saturated_effects(y, levels, blocks)
    m = len(all_effects)
    chosen = method or ("ols" if resid_df >= min_residual_df else "lenth")
    zero = is_zero_spread  # rounding noise, relative to the data's scale, is no error
    error_zero = zero(float(np.std(resid)), y) if chosen == "ols" \
        else zero(lenth_pse(all_effects), y)
    if error_zero and (chosen == "ols" and resid_df > 0 or chosen == "lenth"):
        # Claimed only where replicates exist and agree: then an effect that is zero is
        # exactly zero and any other is open. Where the only error is contrasts that are
        # zero (tricks that did not act), nothing says how large the noise is: open.
        agree = pure > 0 and zero(float(np.std(resid)), y)
        effects = np.where([zero(abs(e), y) for e in effects], 0.0, effects)
        return Fit(effects, np.zeros(k), math.nan, "none" if agree else "unknown",
                   np.full(k, math.nan), resid_df, m, pure)
    if chosen == "ols":
        if resid_df < 1:
            raise ValueError("no residual degrees of freedom for the residual error")
        sigma2 = float(np.sum(resid ** 2) / resid_df)
        cov = sigma2 * np.linalg.inv(x.T @ x)
        se = 2 * np.sqrt(np.diag(cov)[-k:])
        with np.errstate(divide="ignore", invalid="ignore"):
            p = 2 * special.stdtr(resid_df, -np.abs(effects / se))
        return Fit(effects, se, float(resid_df), "ols", p, resid_df, m, pure)
    if chosen == "lenth_modelled":  # the former rule: the modelled contrasts alone
        all_effects, m = effects, k
    pse = lenth_pse(all_effects)
    se = np.full(k, pse)
    p = np.array([lenth_p(e / pse, m) if pse > 0 else math.nan for e in effects])
    return Fit(effects, se, m / 3, "lenth", p, resid_df, m, pure)


def saturated_effects(y: np.ndarray, levels: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Every contrast's effect (2 beta), the blocks taken out: the point means' contrasts
    where the design is replicated."""
    cols = contrast_columns(levels)
    names = sorted(set(np.asarray(blocks).tolist()))
    parts = [np.ones((len(y), 1))]
    parts += [(np.asarray(blocks) == b).astype(float)[:, None] for b in names[1:]]
    parts += [c[:, None] for _, c in cols]
    x = np.hstack(parts)
    beta, *_ = np.linalg.lstsq(x, np.asarray(y, dtype=float), rcond=None)
    return 2 * beta[-len(cols):] if cols else np.zeros(0)


def tost_p(effect: float, se: float, df: float, margin: float) -> float:
    if not (se > 0 and margin > 0):
        return math.nan
    return float(max(special.stdtr(df, -(effect + margin) / se),
                     special.stdtr(df, -(margin - effect) / se)))


def mde(se: float, df: float, alpha: float, method: str, m: int) -> float:
    """The smallest true effect found with 80% power at `alpha` (unadjusted, as OVAT's)."""
    if not se > 0:
        return math.nan
    if method == "lenth":  # the calibrated critical value; the PSE taken as known
        return float(se * (lenth_critical(m, alpha) + stats.norm.ppf(POWER_TARGET)))
    return float(se * _unit_mde(float(df), alpha))


@lru_cache(maxsize=256)
def _unit_mde(df: float, alpha: float) -> float:
    """The MDE in units of the effect's se (the noncentrality reaching 80% power)."""
    crit = stats.t.ppf(1 - alpha / 2, df)

    def gap(nc: float) -> float:  # both tails as survival functions: nct.cdf is NaN far out
        return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc)) - POWER_TARGET

    return float(optimize.brentq(gap, 0.0, 100.0))


def screen(y: np.ndarray, levels: np.ndarray, blocks: np.ndarray, columns: list[Term],
           alpha: float, margin: float, direction: str = "higher",
           min_residual_df: int = MIN_RESIDUAL_DF,
           method: str | None = None) -> tuple[Fit, list[dict]]:
    """Every term's effect, interval, Holm-adjusted p, TOST, MDE and verdict.

    Verdicts: a main effect free of two-trick aliases gets OVAT's words (improves, harms,
    negligible, no_effect, inconclusive); a main effect that shares its column with
    two-trick interactions is `aliased` whenever it would be decided (the estimate is their
    sum: a fold-over separates them); a chain of interactions is `interacts` when
    significant, else the words of "no interaction shown" (no_effect, inconclusive)."""
    f = fit(y, levels, blocks, columns, min_residual_df, method)
    adj = holm_adjust(f.p.tolist())
    tost = [tost_p(e, s, f.df, margin) for e, s in zip(f.effects, f.se, strict=True)]
    tost_adj = holm_adjust(tost)
    q = stats.t.ppf(1 - alpha / 2, f.df) if f.method == "ols" else \
        lenth_critical(f.contrasts, alpha) if f.method == "lenth" else 0.0
    out = []
    for i, term in enumerate(columns):
        e, s = float(f.effects[i]), float(f.se[i])
        low, high = e - q * s, e + q * s
        m = mde(s, f.df, alpha, f.method, f.contrasts)
        word = verdict(adj[i], low, high, tost_adj[i], alpha, margin,
                       direction if term.is_main else "higher", mde=m,
                       exact_zero=f.method == "none" and e == 0.0)
        out.append({"head": term.head, "terms": term.terms, "effect": e, "se": s,
                    "ci": (low, high), "p": float(f.p[i]), "p_adjusted": adj[i],
                    "tost_p": tost[i], "tost_p_adjusted": tost_adj[i], "mde": m,
                    "verdict": term_verdict(word, term), "t": e / s if s > 0 else math.nan})
    return f, out


def term_verdict(word: str, term: Term) -> str:
    """OVAT's word in a design's terms: a decided chain of interactions `interacts`, a
    decided main effect that shares its column with interactions `aliased`."""
    if not term.is_main and word in ("improves", "harms"):
        return "interacts"
    if term.is_main and term.aliased and word != "inconclusive":
        return "aliased"
    return word


def replicates_for(mde_now: float, replicates: int, target: float) -> int | None:
    """Replicates (seeds) at which the MDE falls to `target` (se ~ 1/sqrt(replicates))."""
    if not (mde_now > 0 and target > 0 and math.isfinite(mde_now)):
        return None
    return max(replicates + 1, math.ceil(replicates * (mde_now / target) ** 2))
