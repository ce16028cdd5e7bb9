"""An adaptive screening: the design's looks, replayed from its runs (pure functions).

Replicates of the whole design are added at the plan's rungs (seeds per point: never single
points, so every look is a balanced design and one model). At each look the screening model
is fitted on the seeds below the rung (stats/screening.py: the same error rule, blocks and
terms) and every open effect is looked at once with the ladder's rules (stats/sequential.py):
O'Brien-Fleming-type alpha spending over the looks, Holm across the design's effects in its
sequentially rejective form, TOST at the look's boundary for no_effect (with the CI inside the
margin and the MDE at most it), and non-binding futility. An effect settled at a look keeps
that look's numbers and verdict; the sweep stops when every effect is settled or the cap is
reached. Effects are taken as their look's t (or calibrated Lenth) p against the boundary's
nominal p, as the ladder's seeds are (Jennison & Turnbull 2000, ch. 11)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_ablate.stats.screening import Term, mde, screen, term_verdict
from grpo_ablate.stats.sequential import Design, Ladder, take_look


@dataclass(frozen=True)
class EffectLook:
    """One effect at one look, as the ladder reads a comparison."""

    n: int             # replicates at the look
    diff: float        # the effect (2 beta)
    ci_low: float
    ci_high: float
    p_value: float
    tost_p: float
    se: float
    df: float
    method: str
    contrasts: int
    exact: bool = False
    test: str = "screening"

    def mde_at(self, alpha: float) -> float:
        return mde(self.se, self.df, alpha, self.method, self.contrasts)


@dataclass
class ScreeningLooks:
    """The looks taken: the ladder (settled effects by name), each look's rows (screen's),
    and the first look whose runs are not all recorded (None: the ladder is finished)."""

    ladder: Ladder
    rows: list[list[dict]]
    pending: int | None

    def settled_rows(self, names: list[str]) -> list[dict]:
        """Each effect's row from the look that settled it (its verdict in the design's
        words), or from the latest look while it is open."""
        out = []
        for i, name in enumerate(names):
            s = self.ladder.settled.get(name)
            look = (s.look if s else len(self.rows)) - 1
            row = self.rows[look][i] if look >= 0 else {}
            verdict = term_verdict(s.verdict, Term(row["terms"])) if s else \
                "inconclusive" if look >= 0 else row.get("verdict")
            out.append({**row, "verdict": verdict, "look": look + 1,
                        "replicates_at_look": self.ladder.design.rungs[look] if look >= 0
                        else 0, "reason": s.reason if s else "open",
                        "p_boundary": s.p_boundary if s else float("nan"),
                        # the p its look compared with the boundary (TOST's for no_effect)
                        "p_look": s.p_value if s else row.get("p", float("nan"))})
        return out


def complete_look(points: np.ndarray, seeds: np.ndarray, n_points: int, n: int) -> bool:
    """Every design point has a run of every seed below n."""
    have = set(zip(points.tolist(), seeds.tolist(), strict=True))
    return all((p, s) in have for p in range(n_points) for s in range(n))


def screening_looks(y: np.ndarray, levels: np.ndarray, points: np.ndarray, seeds: np.ndarray,
                    blocks: np.ndarray, n_points: int, columns: list[Term], names: list[str],
                    plan: Design, margin: float, direction: str) -> ScreeningLooks:
    """Replay the plan's looks over the runs recorded (y, each run's levels, point index,
    seed and block)."""
    y, levels, points, seeds, blocks = (np.asarray(a) for a in (y, levels, points, seeds,
                                                                  blocks))
    ladder, rows = Ladder(plan, list(names)), []
    for k, n in enumerate(plan.rungs):
        if ladder.finished:
            return ScreeningLooks(ladder, rows, None)
        keep = seeds < n
        if not complete_look(points[keep], seeds[keep], n_points, n):
            return ScreeningLooks(ladder, rows, k)
        fitted, look_rows = screen(y[keep], levels[keep], blocks[keep], columns, plan.alpha,
                                   margin, direction)
        rows.append(look_rows)
        comparisons = {
            name: EffectLook(n, r["effect"], r["ci"][0], r["ci"][1], r["p"], r["tost_p"],
                             r["se"], fitted.df, fitted.method, fitted.contrasts,
                             exact=fitted.method == "none" and r["effect"] == 0.0)
            for name, r in zip(names, look_rows, strict=True) if name in ladder.open}
        take_look(ladder, comparisons, direction)
    return ScreeningLooks(ladder, rows, None)
