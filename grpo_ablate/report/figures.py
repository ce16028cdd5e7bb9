"""figures/*.png: forest plot, per-seed strip plot, training curves per trick family, and
MDE versus seeds. Matplotlib with the Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from grpo_ablate.stats.tests import mde  # noqa: E402

CURVE_KEYS = ("reward", "kl", "entropy", "completions/mean_length", "grad_norm")


def write_figures(report: dict, df: pd.DataFrame, sweep_dir: Path | None, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for i, st in enumerate(report["strata"]):
        tag = "" if len(report["strata"]) == 1 else f"_{i}"
        sub = df[(df["model"] == st["model"]) & (df["task"] == st["task"])]
        names.append(_forest(report, st, sub, out / f"forest{tag}.png"))
        names.append(_strip(report, st, sub, out / f"seeds{tag}.png"))
        names.append(_mde_curve(report, st, out / f"mde{tag}.png"))
        if sweep_dir is not None and "run_id" in sub.columns:
            names.append(_curves(sub, sweep_dir, report["baseline"], out / f"curves{tag}.png"))
    return [n for n in names if n]


def _order(st: dict) -> list[dict]:
    return sorted(st["arms"], key=lambda e: e["diff"] if e["diff"] is not None else -9)


def _forest(report, st, sub, path: Path) -> str:
    arms = _order(st)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(arms) + 1.6))
    m, me = report["metric"], report["min_effect"]
    ax.axvspan(-me, me, color="0.9", label=f"±min-effect ({me})")
    ax.axvline(0, color="0.4", lw=0.8)
    colors = {"improves": "tab:green", "harms": "tab:red", "no_effect": "tab:blue",
              "negligible": "tab:cyan", "inconclusive": "0.5"}
    base = sub[(sub["arm"] == report["baseline"]) & (sub["status"] != "failed")].set_index("seed")
    for y, e in enumerate(arms):
        if e["ci_low"] is not None:
            ax.plot([e["ci_low"], e["ci_high"]], [y, y], color=colors[e["verdict"]], lw=2)
        if e["diff"] is not None:
            ax.plot(e["diff"], y, "o", color=colors[e["verdict"]])
        rows = sub[(sub["arm"] == e["arm"]) & (sub["status"] != "failed")].set_index("seed")
        seeds = [s for s in rows.index if s in base.index]
        d = [rows.loc[s, m] - base.loc[s, m] for s in seeds]
        ax.plot(d, [y + 0.18] * len(d), ".", color="0.3", ms=3)
    ax.set_yticks(range(len(arms)), [f"{e['arm']} ({e['verdict']})" for e in arms], fontsize=8)
    ax.set_xlabel(f"difference to {report['baseline']} in {m} (95% CI; dots: single seeds)")
    ax.set_title(f"{st['model']} / {st['task']}: effect of each trick", fontsize=10)
    ax.legend(loc="lower right", fontsize=7)
    return _save(fig, path)


def _strip(report, st, sub, path: Path) -> str:
    m = report["metric"]
    arms = [report["baseline"]] + [e["arm"] for e in _order(st)]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(arms) + 1), 4))
    ok = sub[sub["status"] != "failed"]
    seeds = sorted(ok["seed"].unique())
    cmap = plt.get_cmap("tab10")
    for j, seed in enumerate(seeds):
        ys = [ok[(ok["arm"] == a) & (ok["seed"] == seed)][m].mean() for a in arms]
        ax.plot(range(len(arms)), ys, "-o", color=cmap(j % 10), alpha=0.6, ms=3, lw=0.7,
                label=f"seed {seed}")
    ax.set_xticks(range(len(arms)), arms, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(m)
    ax.set_title("per-seed results; lines join matched seeds", fontsize=10)
    ax.legend(fontsize=7, ncol=min(5, len(seeds)))
    return _save(fig, path)


def _mde_curve(report, st, path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 4))
    k = max(1, st["comparisons"])
    sds = [e for e in st["arms"] if e["mde"] is not None and e["n"] >= 2]
    if not sds:
        plt.close(fig)
        return ""
    # The arm with the median MDE; the sd its MDE implies at its n gives the whole curve.
    e = sorted(sds, key=lambda e: e["mde"])[len(sds) // 2]
    sd = e["mde"] / mde(e["test"], 1.0, e["n"], report["alpha"] / k)
    ns = np.arange(2, 31)
    ax.plot(ns, [mde(e["test"], sd, int(n), report["alpha"] / k) for n in ns],
            label=f"median arm ({e['arm']}), sd={sd:.3g}")
    ax.axhline(report["min_effect"], ls="--", color="0.4", label="min-effect")
    ax.set_yscale("log")  # n=2 needs effects orders of magnitude larger than n=20
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("seeds per arm")
    ax.set_ylabel(f"minimum detectable effect (80% power, alpha/{k})")
    ax.set_title("how many seeds a study needs", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _curves(sub: pd.DataFrame, sweep_dir: Path, base_arm: str, path: Path) -> str:
    from grpo_ablate.catalog import load_catalog
    from grpo_ablate.store import read_history

    fam_of = {t["id"]: t["family"] for t in load_catalog()}
    families: dict[str, list[str]] = {}
    for arm in dict.fromkeys(sub["arm"]):
        if arm != base_arm:  # drawn in every panel, for reference
            families.setdefault(fam_of.get(arm, "other"), []).append(arm)
    fams = sorted(families)
    if not fams:
        return ""
    fig, axes = plt.subplots(len(CURVE_KEYS), len(fams), squeeze=False,
                             figsize=(2.6 * len(fams) + 1, 1.9 * len(CURVE_KEYS) + 0.6),
                             sharex=True)
    hist = {rid: pd.DataFrame(read_history(Path(sweep_dir) / "runs" / rid))
            for rid in sub["run_id"].dropna()}
    cmap = plt.get_cmap("tab10")
    for c, fam in enumerate(fams):
        for j, arm in enumerate([base_arm] + families[fam]):
            rids = sub[sub["arm"] == arm]["run_id"].dropna()
            for r, key in enumerate(CURVE_KEYS):
                ax = axes[r][c]
                series = [h.set_index("step")[key].dropna() for h in (hist[i] for i in rids)
                          if key in h.columns and "step" in h.columns]
                series = [s[~s.index.duplicated()] for s in series if len(s)]
                if not series:
                    continue
                color = "0.3" if arm == base_arm else cmap(j % 10)
                for s in series:
                    ax.plot(s.index, s.values, color=color, alpha=0.25, lw=0.5)
                mat = pd.concat(series, axis=1)
                mean, sd = mat.mean(axis=1), mat.std(axis=1).fillna(0)
                ax.plot(mean.index, mean.values, color=color, lw=1.2, label=arm)
                ax.fill_between(mean.index, mean - sd, mean + sd, color=color, alpha=0.12)
                if c == 0:
                    ax.set_ylabel(key.replace("completions/", ""), fontsize=8)
                ax.tick_params(labelsize=6)
        axes[0][c].set_title(fam, fontsize=9)
        axes[0][c].legend(fontsize=6, loc="lower left")
    for ax in axes[-1]:
        ax.set_xlabel("step", fontsize=8)
    fig.suptitle("training curves: seeds (thin), mean and ±1 sd band", fontsize=10)
    return _save(fig, path)


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name
