"""figures/*.png: forest plot, per-seed strip plot, training curves per trick family, and
MDE versus seeds. Matplotlib with the Agg backend (no display needed).

Each per-seed figure works from one seed x arm table per stratum (a pivot), never from
per-arm row filtering, so a 10,000-row CSV draws in seconds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from grpo_ablate.config.catalog import load_catalog  # noqa: E402
from grpo_ablate.records import read_history  # noqa: E402
from grpo_ablate.stats.significance import mde  # noqa: E402

# Training curves: one row each (history keys), plus held-out accuracy (the decision metric).
CURVE_KEYS = ("eval/accuracy", "reward", "kl", "entropy", "completions/mean_length", "grad_norm")
CURVE_LABELS = {"eval/accuracy": "held-out accuracy", "completions/mean_length": "mean length"}
MAX_SEED_LINES = 20  # the strip plot draws at most this many seeds (it says so)
COLORS = {"improves": "tab:green", "harms": "tab:red", "no_effect": "tab:blue",
          "negligible": "tab:cyan", "inert": "tab:purple", "inconclusive": "0.5"}


def _stratum_name(st: dict) -> str:
    """`model / task`, or nothing for a CSV without those columns."""
    parts = [p for p in (st["model"], st["task"]) if p not in (None, "-")]
    return " / ".join(parts)


FIGURES_VERSION = 4  # bump when a figure's drawing changes: drawn figures are reused by input
INPUTS_NAME = ".inputs"


def inputs_fingerprint(report: dict, df: pd.DataFrame) -> str:
    """What the figures are drawn from: the report, the results table (run ids and sweep
    folders name the histories, which are written before their record and never after)."""
    blob = json.dumps(report, sort_keys=True, default=str) + df.to_csv(index=False)
    return hashlib.sha256(f"{FIGURES_VERSION}\n{blob}".encode()).hexdigest()


def write_figures(report: dict, df: pd.DataFrame, out: Path,
                  curves: pd.DataFrame | None = None) -> list[str]:
    """Draw the figures into `out`, or reuse the ones drawn there from the same inputs (a
    re-run of a finished sweep does not redraw them: the training curves take seconds).
    `curves`: the runs' curve table where the caller has read it (else read here)."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = out / INPUTS_NAME
    fingerprint = inputs_fingerprint(report, df)
    try:
        kept = json.loads(stamp.read_text())
        if kept["inputs"] == fingerprint and all((out / n).is_file() for n in kept["figures"]):
            return kept["figures"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    stamp.unlink(missing_ok=True)  # drawn below, then stamped: a killed draw is redrawn
    names = []
    for i, st in enumerate(report["strata"]):
        tag = "" if len(report["strata"]) == 1 else f"_{i}"
        sub = df[(df["model"] == st["model"]) & (df["task"] == st["task"])]
        wide = sub[sub["status"] != "failed"].pivot(index="seed", columns="arm",
                                                     values=report["metric"])
        names.append(_forest(report, st, wide, out / f"forest{tag}.png"))
        if report.get("runs", "matched") == "matched":  # lines would join unrelated runs
            names.append(_strip(report, st, wide, out / f"seeds{tag}.png"))
        names.append(_mde_curve(report, st, out / f"mde{tag}.png"))
        if "sweep_dir" in sub.columns and sub["sweep_dir"].notna().any():
            names.append(_curves(report, sub, out / f"curves{tag}.png"))
    if report.get("curves"):  # the fitted learning curves, per stratum
        from grpo_ablate.report.curve_figures import write_curve_figure
        from grpo_ablate.results.curves import curve_table

        table = curves if curves is not None else \
            curve_table(df[df["status"] != "failed"], report["metric"])
        for i, st in enumerate(report["curves"]["strata"]):
            tag = "" if len(report["curves"]["strata"]) == 1 else f"_{i}"
            names.append(write_curve_figure(report["curves"], table, st, report["baseline"],
                                            out / f"ceiling_speed{tag}.png"))
    names = [n for n in names if n]
    stamp.write_text(json.dumps({"inputs": fingerprint, "figures": names}))
    return names


def _order(st: dict, direction: str) -> list[dict]:
    sign = 1 if direction == "higher" else -1
    return sorted(st["arms"], key=lambda e: sign * e["diff"] if e["diff"] is not None else -9)


def compared_with(arm: dict, baseline: str) -> str:
    """The arm a report row is compared with: its trick file's `against`, or the baseline."""
    return arm.get("against") or baseline


def seed_differences(wide: pd.DataFrame, arm: str, against: str) -> np.ndarray:
    """Each matched seed's own difference of `arm` to the arm it is compared with."""
    if arm not in wide.columns or against not in wide.columns:
        return np.array([])
    return (wide[arm] - wide[against]).dropna().to_numpy()


def _forest(report, st, wide: pd.DataFrame, path: Path) -> str:
    """Each arm's difference and 95% CI; for matched runs also each seed's own difference
    (independent runs have no seed s to set against seed s)."""
    arms = _order(st, report["direction"])
    matched = report.get("runs", "matched") == "matched"
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(arms) + 1.6))
    m, me = report["metric"], st.get("min_effect") or report["min_effect"]
    ax.axvspan(-me, me, color="0.9", label=f"±min-effect ({me:.4g})")
    ax.axvline(0, color="0.4", lw=0.8)
    def against(e: dict) -> str:
        return compared_with(e, report["baseline"])

    for y, e in enumerate(arms):
        color = COLORS[e["verdict"]]
        if e["ci_low"] is not None:
            ax.plot([e["ci_low"], e["ci_high"]], [y, y], color=color, lw=2)
        if e["diff"] is not None:
            ax.plot(e["diff"], y, "o", color=color)
        if matched:
            d = seed_differences(wide, e["arm"], against(e))
            ax.plot(d, np.full(len(d), y + 0.18), ".", color="0.3", ms=3)
    vs = {e["arm"]: f" vs {against(e)}" for e in arms if against(e) != report["baseline"]}
    ax.set_yticks(range(len(arms)), [f"{e['arm']}{vs.get(e['arm'], '')} ({e['verdict']})"
                                     for e in arms], fontsize=8)
    better = "right" if report["direction"] == "higher" else "left"
    dots = "; dots: single seeds" if matched else ""
    to = f"{report['baseline']}, or the arm after 'vs'" if vs else report["baseline"]
    ax.set_xlabel(f"difference to {to} in {m} (95% CI{dots}; better is {better})")
    name = _stratum_name(st)
    what = "arm" if report.get("arms") == "methods" else "trick"
    ax.set_title(f"{name + ': ' if name else ''}effect of each {what}", fontsize=10)
    ax.legend(loc="lower right", fontsize=7)
    return _save(fig, path)


def _strip(report, st, wide: pd.DataFrame, path: Path) -> str:
    m = report["metric"]
    arms = [report["baseline"]] + [e["arm"] for e in _order(st, report["direction"])]
    arms = [a for a in arms if a in wide.columns]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(arms) + 1), 4))
    seeds = list(wide.index)
    shown = seeds[:MAX_SEED_LINES]
    cmap = plt.get_cmap("tab10")
    for j, seed in enumerate(shown):
        ax.plot(range(len(arms)), wide.loc[seed, arms].to_numpy(dtype=float), "-o",
                color=cmap(j % 10), alpha=0.6, ms=3, lw=0.7, label=f"seed {seed}")
    ax.set_xticks(range(len(arms)), arms, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(m)
    extra = f" (first {len(shown)} of {len(seeds)} seeds)" if len(seeds) > len(shown) else ""
    ax.set_title(f"per-seed results; lines join matched seeds{extra}", fontsize=10)
    if len(shown) <= 10:
        ax.legend(fontsize=7, ncol=min(5, len(shown)))
    return _save(fig, path)


def median_sd_arm(arms: list[dict]) -> dict:
    """The arm whose test sd (`diff_sd`) is the median. Not the median MDE: arms of an
    adaptive sweep stop at different n, so their MDEs are not comparable."""
    return sorted(arms, key=lambda e: e["diff_sd"])[len(arms) // 2]


def mde_at(e: dict, sd: float, n: int, alpha: float) -> float:
    """The arm's MDE at n seeds. Under the task scope more seeds shrink only the seed part
    of the variance: the prompt part, var_prompt / P, is a floor (normal approximation at
    80% power), as the waiting column sizes it."""
    v = e.get("variance")
    if not v or v.get("scope") != "task" or not v.get("prompt"):
        return mde(e["test"], sd, n, alpha)
    from scipy.stats import norm

    var = (v["seed"] + v["residual"] / v["prompts"]) / n + v["prompt"] / v["prompts"]
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(0.8)) * np.sqrt(var))


def _mde_curve(report, st, path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 4))
    k = max(1, st["comparisons"])
    sds = [e for e in st["arms"] if e.get("diff_sd") and e["n"] >= 2]
    if not sds:
        plt.close(fig)
        return ""
    e = median_sd_arm(sds)
    sd = e["diff_sd"]
    # Far enough right to reach the seeds the verdict table asks for, and the runs there are.
    needed = max([x["seeds_needed"] or 0 for x in st["arms"]]
                 + [x["n"] for x in st["arms"]] + [30])
    ns = np.unique(np.geomspace(2, min(needed * 1.2, 10_000), 24).astype(int))
    ax.plot(ns, [mde_at(e, sd, int(n), report["alpha"] / k) for n in ns],
            label=f"arm of median sd ({e['arm']}), sd={sd:.3g}")
    ax.axhline(st.get("min_effect") or report["min_effect"], ls="--", color="0.4",
               label="min-effect")
    ax.set_xscale("log")
    ax.set_yscale("log")  # n=2 needs effects orders of magnitude larger than n=20
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("seeds per arm")
    ax.set_ylabel(f"minimum detectable effect (80% power, alpha/{k})")
    ax.set_title("how many seeds a study needs", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, path)


def _curves(report: dict, sub: pd.DataFrame, path: Path) -> str:
    base_arm = report["baseline"]
    fam_of = {t["id"]: t["family"] for t in load_catalog()}
    families: dict[str, list[str]] = {}
    for arm in dict.fromkeys(sub["arm"]):
        if arm != base_arm:  # drawn in every panel, for reference
            families.setdefault(fam_of.get(arm, "other"), []).append(arm)
    fams = sorted(families)
    if not fams:
        return ""
    # Not sharex: shared axes re-scale every sibling on each artist added (30 s for 90 runs);
    # one x range is set at the end instead.
    fig, axes = plt.subplots(len(CURVE_KEYS), len(fams), squeeze=False,
                             figsize=(2.6 * len(fams) + 1, 1.9 * len(CURVE_KEYS) + 0.8))
    runs = sub.dropna(subset=["run_id", "sweep_dir"])
    hist = {rid: pd.DataFrame(read_history(Path(d) / "runs" / rid))
            for rid, d in zip(runs["run_id"], runs["sweep_dir"], strict=True)}
    cmap = plt.get_cmap("tab10")
    last_step = 0
    for c, fam in enumerate(fams):
        # The trick's lines first, the baseline dashed on top: where they coincide both show.
        for j, arm in enumerate(families[fam] + [base_arm]):
            rids = runs[runs["arm"] == arm]["run_id"]
            is_base = arm == base_arm
            color = "0.15" if is_base else cmap(j % 10)
            for r, key in enumerate(CURVE_KEYS):
                ax = axes[r][c]
                series = [h.set_index("step")[key].dropna() for h in (hist[i] for i in rids)
                          if key in h.columns and "step" in h.columns]
                series = [s[~s.index.duplicated()] for s in series if len(s)]
                if not series:
                    continue
                ax.add_collection(LineCollection(  # every seed as one artist
                    [np.column_stack([s.index, s.values]) for s in series], colors=[color],
                    alpha=0.25, linewidths=0.5))
                last_step = max(last_step, max(s.index.max() for s in series))
                mat = pd.concat(series, axis=1)
                mean, sd = mat.mean(axis=1), mat.std(axis=1).fillna(0)
                ax.plot(mean.index, mean.values, color=color, lw=1.2, ls="--" if is_base else "-",
                        label=arm if not is_base or arm == "baseline" else f"{arm} (baseline)",
                        zorder=3 if is_base else 2)
                ax.fill_between(mean.index, mean - sd, mean + sd, color=color, alpha=0.12)
                if c == 0:
                    ax.set_ylabel(CURVE_LABELS.get(key, key), fontsize=8)
                ax.tick_params(labelsize=6)
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # optimizer steps
        axes[0][c].set_title(f"trick family: {fam}", fontsize=9)
        axes[0][c].legend(fontsize=6, loc="lower left")
    for ax in axes.flat:
        ax.set_xlim(0, max(1, last_step))
        ax.autoscale_view(scalex=False)
    for ax in axes[:-1].flat:
        ax.tick_params(labelbottom=False)
    for ax in axes[-1]:
        ax.set_xlabel("optimizer step", fontsize=8)
    fig.suptitle("training curves per trick family (columns) and metric (rows): seeds thin, "
                 "mean bold with ±1 sd band", fontsize=10)
    return _save(fig, path)


def _save(fig, path: Path) -> str:
    fig.savefig(path, dpi=110, bbox_inches="tight")  # one layout pass, not tight_layout's two
    plt.close(fig)
    return path.name
