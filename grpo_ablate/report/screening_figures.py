"""A screening report's figures, the two a design-of-experiments reader expects: a Pareto
chart of the standardised effects (|estimate| / se, with the critical value an unadjusted
test at alpha uses) and a half-normal plot of the effects (the active ones stand off the
line the null ones lie on); and an interaction plot for each interaction called."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from grpo_ablate.stats.screening import lenth_critical  # noqa: E402

CALLED = ("improves", "harms", "interacts", "aliased", "negligible")
COLORS = {"improves": "tab:green", "harms": "tab:red", "interacts": "tab:orange",
          "aliased": "tab:purple", "negligible": "tab:cyan"}


def write_screening_figures(rep: dict, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    effects = [r for r in rep["effects"] if np.isfinite(r["t"])]
    if not effects:
        return []
    paths = [_pareto(rep, effects, out / "screening_pareto.png"),
             _half_normal(effects, out / "screening_half_normal.png")]
    for k, r in enumerate(e for e in effects if e["verdict"] == "interacts"):
        paths.append(_interaction(rep, r, out / f"screening_interaction_{k + 1}.png"))
    return [str(p) for p in paths]


def _label(r: dict) -> str:
    name = r["name"].split(" = ")[0]
    return name + (" (+ aliases)" if " = " in r["name"] else "")


def _pareto(rep: dict, effects: list[dict], path: Path) -> Path:
    rows = sorted(effects, key=lambda r: abs(r["t"]))
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.2))
    # Each bar labelled with its signed estimate: the chart's length is |t|, its sign is the
    # label's (hatched: a negative effect).
    ax.barh([f"{_label(r)} ({r['effect']:+.3g})" for r in rows],
            [abs(r["t"]) if math.isfinite(r["t"]) else 0.0 for r in rows],
            color=[COLORS.get(r["verdict"], "0.6") for r in rows],
            hatch=["//" if r["effect"] < 0 else "" for r in rows])
    crit = stats.t.ppf(1 - rep["alpha"] / 2, max(rep["residual_df"], 1)) \
        if rep["error"] == "ols" else lenth_critical(rep.get("contrasts") or len(rep["effects"]),
                                                     rep["alpha"])
    ax.axvline(crit, color="k", ls="--", lw=1,
               label=f"unadjusted critical value {crit:.2f} (verdicts: Holm)")
    ax.set_xlabel("|standardised effect| (estimate / se)")
    ax.set_title(f"Pareto chart of effects on {rep['metric']}")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _half_normal(effects: list[dict], path: Path) -> Path:
    rows = sorted(effects, key=lambda r: abs(r["effect"]))
    m = len(rows)
    q = stats.halfnorm.ppf((np.arange(1, m + 1) - 0.5) / m)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.scatter(q, [abs(r["effect"]) for r in rows],
               c=[COLORS.get(r["verdict"], "0.5") for r in rows], s=18)
    se = next((r["se"] for r in rows if r["se"] > 0), None)
    if se:  # where null effects fall: |effect| = se x the half-normal quantile
        ax.plot([0, q[-1]], [0, se * q[-1]], "k--", lw=0.8,
                label=f"null effects: se {se:.3g} x quantile")
        ax.legend(fontsize=7, loc="upper left")
    for x, r in zip(q, rows, strict=True):
        if r["verdict"] in CALLED:
            ax.annotate(f"{_label(r)} {r['effect']:+.3g}", (x, abs(r["effect"])), fontsize=7,
                        xytext=(3, 2), textcoords="offset points")
    ax.set_xlabel("half-normal quantile")
    ax.set_ylabel("|effect|")
    ax.set_title("Half-normal plot of the effects")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _interaction(rep: dict, r: dict, path: Path) -> Path:
    """The mean at each level pair of the chain's first interaction."""
    names = rep["factors"]
    a, b = (names.index(f) for f in r["factors"])
    levels = np.asarray(rep["design"])
    y = np.asarray(rep["point_means"], dtype=float)
    fig, ax = plt.subplots(figsize=(5, 4))
    for lb, style in ((-1, "o--"), (1, "s-")):
        ys = [np.nanmean(y[(levels[:, a] == la) & (levels[:, b] == lb)]) for la in (-1, 1)]
        ax.plot([0, 1], ys, style, label=f"{names[b]} {'on' if lb > 0 else 'off'}")
    ax.set_xticks([0, 1], [f"{names[a]} off", f"{names[a]} on"])
    ax.set_ylabel(rep["metric"])
    others = len(r["name"].split(" = ")) + r["name"].count(" + ") - 1
    ax.set_title(f"{names[a]} x {names[b]}" + (f" (its column holds {others} more "
                                                "interaction(s))" if others else ""), fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
