"""Two-level designs for screening, as pyDOE3 draws them: the candidates for k factors, the
design a resolution or a run budget asks for, the baseline point kept among its runs, and
what is measured from its columns rather than taken from the request: the resolution
(pyDOE3's `fracfact_by_res` returns resolution IV when asked for V beyond 6 factors) and the
alias chains (which main effects and two-trick interactions share one column). A fold-over
adds the mirror image of a fraction."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from grpo_ablate.errors import UserError

MAX_POINTS = 128  # runs per replicate of the largest design drawn
# The minimum aberration fractions pyDOE3's search finds in under a second; (8, 2) takes 5 s
# and is searched only when resolution V is asked for (the only way to it at 8 factors).
OPT_FAST = {(k, 1) for k in range(3, 8)} | {(k, 2) for k in range(4, 8)}
ROMAN = {3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII or full"}


def candidates(k: int, resolution: int | None = None) -> list[tuple[np.ndarray, int, str]]:
    """Every design pyDOE3 draws for k factors within MAX_POINTS runs, as (design, measured
    resolution, how): its full factorial, its minimum aberration half and quarter fractions
    (`fracfact_opt`; an eighth took minutes at 9 factors), and `fracfact_by_res` at each
    resolution. Each one's resolution is measured, not taken from how it was asked for."""
    import pyDOE3

    found = []
    if 2 ** k <= MAX_POINTS:
        found.append((pyDOE3.ff2n(k), f"pyDOE3.ff2n({k})"))
    for p in (1, 2):
        if (k, p) in OPT_FAST or (resolution == 5 and (k, p) == (8, 2)):
            try:
                gens, _, _ = pyDOE3.fracfact_opt(k, p)
            except ValueError:  # "too many erased factors" at 4 factors
                continue
            found.append((pyDOE3.fracfact(gens), f"pyDOE3.fracfact_opt({k}, {p})"))
    for res in (3, 4, 5):
        try:
            found.append((pyDOE3.fracfact_by_res(k, res), f"pyDOE3.fracfact_by_res({k}, {res})"))
        except ValueError:  # "design not possible" for this k and resolution
            continue
    out = []
    for design, how in found:
        design = with_baseline_point(np.asarray(design, dtype=int))
        if len(design) <= MAX_POINTS:
            out.append((design, measured_resolution(design), how))
    return sorted(out, key=lambda c: (len(c[0]), -c[1]))


def with_baseline_point(design: np.ndarray) -> np.ndarray:
    """The design with the all-baseline run among its points: where a generator's sign
    leaves it out (D = AB puts D on at A, B off), the columns that are +1 in its first run
    are mirrored. Mirroring a column keeps the design's resolution and aliases (their signs
    change): the baseline's runs are then the one-at-a-time sweep's, and a confirmation's."""
    if (design == -1).all(axis=1).any():
        return design
    return design * -design[0]


def draw(k: int, resolution: int | None = None, points: int | None = None,
         ) -> tuple[np.ndarray, int, str]:
    """(the design, runs x k in -1/+1; its resolution, measured; how it was drawn): the
    fewest runs at `resolution` (default IV), or the highest resolution within `points`
    runs per replicate."""
    options = candidates(k, resolution)
    if not options:
        raise UserError(f"{k} factors: no two-level design within {MAX_POINTS} runs; "
                        "allowed: fewer factors")
    best = max(r for _, r, _ in options)
    if resolution is not None and resolution not in (3, 4, 5):
        raise UserError(f"resolution={resolution}: allowed: 3, 4 or 5")
    fits = [o for o in options if points is None or len(o[0]) <= points]
    if not fits:
        raise UserError(f"runs={points}: the smallest design of {k} factors has "
                        f"{len(options[0][0])} runs per seed; allowed: runs>="
                        f"{len(options[0][0])}")
    if resolution is None and points is not None:  # the highest resolution the runs allow
        top = max(r for _, r, _ in fits)
        return next(o for o in fits if o[1] == top)
    want = 4 if resolution is None else resolution
    chosen = [o for o in fits if o[1] >= want]
    if not chosen:
        within = f" within {points} runs" if points is not None else ""
        reach = [o for o in options if o[1] >= want]
        hint = (f"runs>={len(reach[0][0])}" if reach else
                f"resolution<={best} (the highest pyDOE3 draws for {k} factors within "
                f"{MAX_POINTS} runs)")
        raise UserError(f"resolution={want}: no design of {k} factors{within} reaches it; "
                        f"allowed: {hint}")
    return chosen[0]


def _columns(design: np.ndarray, order: int) -> dict[tuple[int, ...], np.ndarray]:
    k = design.shape[1]
    return {c: np.prod(design[:, list(c)], axis=1)
            for r in range(1, order + 1) for c in combinations(range(k), r)}


def measured_resolution(design: np.ndarray) -> int:
    """The length of the shortest word of the defining relation, read off the columns: the
    smallest |s(a) xor s(b)| over two terms of order <= 3 that share a column (up to sign)."""
    seen: dict[tuple[int, ...], tuple[int, ...]] = {}
    shortest = 7
    for term, col in _columns(design, 3).items():
        key = tuple(int(v) for v in col * col[0])
        if key in seen:
            shortest = min(shortest, len(set(term) ^ set(seen[key])))
        else:
            seen[key] = term
    return min(shortest, 7)


def alias_chains(design: np.ndarray) -> list[list[tuple[tuple[int, ...], int]]]:
    """Main effects and two-factor interactions grouped by the column they share: each chain
    a list of (term, sign), sign +1 where the term's column equals the chain's first term's.
    Chains with a main effect first, in factor order; a term whose column is nearly but not
    exactly another's (a non-regular design) is its own chain."""
    chains: dict[tuple[int, ...], list] = {}
    for term, col in _columns(design, 2).items():
        key = tuple(int(v) for v in col * col[0])
        chains.setdefault(key, []).append((term, int(col[0])))
    out = []
    for members in chains.values():
        first_sign = members[0][1]
        out.append([(t, s * first_sign) for t, s in members])
    return sorted(out, key=lambda ch: (len(ch[0][0]), ch[0][0]))


def term_name(term: tuple[int, ...], names: list[str]) -> str:
    return " x ".join(names[i] for i in term)


def folded_over(held: dict) -> tuple[np.ndarray, list[int], int, str]:
    """The first fraction and its mirror image (every factor's level reversed): the
    two-trick interactions a resolution III fraction confounds with main effects are
    separated from them. (the design, its fractions, its resolution, how)."""
    if len(set(held.get("fractions", [0]))) > 1:
        raise UserError("design=foldover: this sweep's design is folded over already; "
                        "allowed: more replicates (seed=range(0,N))")
    first = np.asarray(held["design"], dtype=int)
    mirror = -first
    if {tuple(r) for r in mirror} <= {tuple(r) for r in first}:
        raise UserError(f"design=foldover: the design (resolution {held['resolution']}) is "
                        "its own mirror image: a fold-over adds no new run; allowed: more "
                        "replicates (seed=range(0,N)) or a resolution III design to fold")
    design = np.vstack([first, mirror])
    return (design, [0] * len(first) + [1] * len(mirror), measured_resolution(design),
            f"{held['drawn_by']}, folded over")
