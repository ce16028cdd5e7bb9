"""figures/ceiling_speed*.png: for each arm, its runs' held-out curves and fits beside the
baseline's (top), and its effect at every budget with the simultaneous band (bottom)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from grpo_ablate.stats.curves import saturating  # noqa: E402

PER_ROW = 4


def _draw_runs(ax, points: pd.DataFrame, fits: list[dict], color: str, label: str) -> None:
    for seed, run in points.groupby("seed"):
        run = run.sort_values("compute")
        ax.plot(run["compute"], run["value"], "o", ms=2.5, color=color, alpha=0.6,
                label=label if seed == points["seed"].min() else None)
        fit = next((f for f in fits if f["seed"] == seed and f["identifiable"]), None)
        if fit:
            c = np.linspace(max(run["compute"].min(), 1e-9), run["compute"].max(), 60)
            ax.plot(c, saturating(c, fit["start"], fit["asymptote"], fit["exponent"],
                                  10 ** fit["log10_midpoint"]), "-", color=color, lw=1)


def write_curve_figure(curves: dict, table: pd.DataFrame, stratum: dict, baseline: str,
                       path: Path) -> str | None:
    """One stratum's figure; None when it has no arm."""
    arms = stratum["arms"]
    if not arms:
        return None
    mine = table[(table["model"] == stratum["model"]) & (table["task"] == stratum["task"])]
    fits = [r for r in curves["runs"] if r["model"] == stratum["model"]
            and r["task"] == stratum["task"]]
    rows = math.ceil(len(arms) / PER_ROW)
    cols = min(PER_ROW, len(arms))
    fig, axes = plt.subplots(2 * rows, cols, figsize=(3.6 * cols, 4.2 * rows), squeeze=False,
                             gridspec_kw={"height_ratios": [2, 1] * rows})
    for k, row in enumerate(arms):
        top, bottom = axes[2 * (k // PER_ROW), k % PER_ROW], axes[2 * (k // PER_ROW) + 1,
                                                                  k % PER_ROW]
        _draw_runs(top, mine[mine["arm"] == baseline],
                   [f for f in fits if f["arm"] == baseline], "0.45", baseline)
        _draw_runs(top, mine[mine["arm"] == row["arm"]],
                   [f for f in fits if f["arm"] == row["arm"]], "tab:blue", row["arm"])
        top.set_title(f"{row['arm']}\n{row['words']}", fontsize=8)
        top.legend(fontsize=6, loc="lower right")
        band = row["band"]
        if band.get("method", "none") != "none":
            steps = band["steps"]
            bottom.fill_between(steps, band["low"], band["high"], color="tab:blue", alpha=0.2,
                                label=f"simultaneous 95% ({band['method']})")
            bottom.plot(steps, band["diff"], "-o", ms=2.5, color="tab:blue")
            bottom.axhline(0, color="0.3", lw=0.8)
            bottom.legend(fontsize=6)
        else:  # an inert arm, or fewer than two seeds shared: say so, draw no empty axes
            bottom.axis("off")
            bottom.text(0.5, 0.5, "no band: " + ("not tested (inert)" if
                                                   row["ceiling"]["verdict"] == "inert"
                                                   else "fewer than 2 seeds shared"),
                        ha="center", va="center", fontsize=7, transform=bottom.transAxes)
        bottom.set_xlabel("step", fontsize=7)
        top.set_xlabel(curves["unit"], fontsize=7)
        for ax in (top, bottom):
            ax.tick_params(labelsize=6)
    for k in range(len(arms), rows * cols):
        axes[2 * (k // PER_ROW), k % PER_ROW].axis("off")
        axes[2 * (k // PER_ROW) + 1, k % PER_ROW].axis("off")
    # Wrapped to the figure's width (one arm: 3.6 in), in a strip of its own at the top, so
    # that it is never cut at the sides nor sits on the first row's titles.
    title = textwrap.fill(f"{curves['metric']}: each arm's runs and fits (top, the baseline "
                          "grey), its effect at every budget (bottom)",
                          width=int(14 * fig.get_figwidth()))
    height = fig.get_figheight()
    fig.suptitle(title, fontsize=9, y=1 - 0.06 / height, va="top")
    fig.tight_layout()  # it leaves room for the suptitle
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
