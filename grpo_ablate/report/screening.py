"""The report of a screening sweep (a sweep folder holding design.json): the design line
with its estimand, the design table, the alias structure, each effect's estimate, interval,
Holm-adjusted p, TOST, MDE and verdict (stats/screening.py), and, beside an OVAT report of
the same recipe (`--beside PATH`), each trick's two verdicts."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_ablate.config.fractional import ROMAN
from grpo_ablate.errors import UserError
from grpo_ablate.report.screening_beside import render_beside
from grpo_ablate.report.screening_curves import render_screening_curves, screening_curves
from grpo_ablate.report.screening_rows import (
    INERT_BELOW,
    adaptive_summary,
    factor_activity,
    heredity,
    inert_factors,
    look_waiting_on,
    waiting_on,
)
from grpo_ablate.report.screening_summary import screening_summary
from grpo_ablate.stats.screening import MIN_RESIDUAL_DF, Term, screen
from grpo_ablate.stats.screening_looks import screening_looks
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.verdicts import default_direction, margin_for

ESTIMAND = ("the effect of switching this trick on, averaged over the design's settings of "
            "the other factors")


def columns_of(design: dict) -> list[Term]:
    """One model column per alias chain of mains and two-trick interactions."""
    index = {f["name"]: i for i, f in enumerate(design["factors"])}
    return [Term(tuple((tuple(index[n] for n in m["term"]), m["sign"]) for m in chain))
            for chain in design["chains"]]


def term_text(term: Term, names: list[str]) -> str:
    """`A`, `A x B`, or a chain: `C = A x B + D x E` (signs as the design has them)."""
    parts = []
    for k, (t, sign) in enumerate(term.terms):
        text = " x ".join(names[i] for i in t)
        parts.append(text if k == 0 else f"{'+' if sign > 0 else '-'} {text}")
    head, rest = parts[0], parts[1:]
    return head + (" = " + " ".join(rest).lstrip("+ ") if rest else "")


def runs_table(df: pd.DataFrame, design: dict, metric: str) -> pd.DataFrame:
    """The runs the model uses: one row per run with its point's levels and its seed."""
    if metric not in df.columns:
        raise UserError(f"--metric {metric}: not in the records; allowed: "
                        + ", ".join(sorted(c for c in df.columns if c.startswith("eval/"))))
    row_of = {p: i for i, p in enumerate(design["points"])}
    used = df[df["arm"].isin(row_of) & (df["status"] != "failed")
              & np.isfinite(df[metric].astype(float))]
    return used.assign(point=used["arm"].map(row_of))


def screening_report(df: pd.DataFrame, design: dict, metric: str, alpha: float,
                     min_effect: float, min_effect_of: str | None,
                     direction: str | None, plan: Design | None = None) -> dict:
    """The screening's effects and verdicts; an adaptive screening's (its `plan`, on the
    metric its looks decide) from the look that settled each effect."""
    names = [f["name"] for f in design["factors"]]
    used = runs_table(df, design, metric)
    if used.empty:
        raise UserError(f"no finished run of the design has {metric}")
    levels = np.asarray(design["design"])[used["point"].to_numpy()]
    fraction = np.asarray(design.get("fractions") or [0] * len(design["points"]))
    # A block per seed, and per fraction of a folded-over design (run later, apart).
    blocks = np.array([f"{s}/{f}" for s, f in zip(used["seed"],
                                                   fraction[used["point"].to_numpy()],
                                                   strict=True)])
    y = used[metric].astype(float).to_numpy()
    columns = columns_of(design)
    direction = direction or default_direction(metric)
    base = used[used["arm"] == "baseline"][metric].astype(float)
    from grpo_ablate.stats.decide import Settings

    margin = margin_for(Settings(metric=metric, min_effect=min_effect,
                                 min_effect_of=min_effect_of),
                        float(base.mean()) if len(base) else float(np.mean(y)),
                        float(base.std(ddof=1)) if len(base) > 1 else math.nan)
    try:
        fitted, rows = screen(y, levels, blocks, columns, alpha, margin, direction)
    except ValueError as exc:
        raise UserError(f"{metric}: {exc}") from None
    replicates = int(used["seed"].nunique())
    looks = None
    if plan is not None and plan.metric == metric and len(set(fraction.tolist())) == 1:
        looks = screening_looks(y, levels, used["point"].to_numpy(),
                                used["seed"].astype(int).to_numpy(), blocks,
                                len(design["points"]), columns,
                                [term_text(t, names) for t in columns], plan,
                                plan.min_effect, direction)
        if looks.rows:
            rows, margin, alpha = looks.settled_rows(
                [term_text(t, names) for t in columns]), plan.min_effect, plan.alpha
    for r, term in zip(rows, columns, strict=True):
        r["name"] = term_text(term, names)
        r["kind"] = "main" if term.is_main else "interaction"
        r["factors"] = [names[i] for i in term.head]
        r["waiting_on"] = look_waiting_on(r, looks) if looks and looks.rows else \
            waiting_on(r, term, replicates, margin)
    heredity(rows, columns, names)
    inert_factors(rows, factor_activity(used, design), INERT_BELOW)
    expected = len(design["points"]) * replicates
    by_point = used.groupby("point")[metric].mean()
    point_means = [float(by_point.get(i, math.nan)) for i in range(len(design["points"]))]
    rep = {
        "kind": "screening", "metric": metric, "direction": direction, "alpha": alpha,
        "min_effect": margin, "estimand": ESTIMAND, "factors": names,
        "resolution": design["resolution"], "drawn_by": design["drawn_by"],
        "points": design["points"], "design": design["design"],
        "replicates": sorted(set(used["seed"].tolist())), "runs_used": int(len(y)),
        "runs_expected": expected, "point_means": point_means, "error": fitted.method,
        "residual_df": fitted.residual_df, "pure_error_df": fitted.pure_df,
        "contrasts": fitted.contrasts, "min_residual_df": MIN_RESIDUAL_DF,
        "effects": [{k: v for k, v in r.items() if k not in ("head", "terms")} for r in rows],
        "adaptive": adaptive_summary(looks) if looks else None,
        "curves": screening_curves(used, levels, blocks, columns,
                                   [term_text(t, names) for t in columns], metric, alpha,
                                   margin, direction),
    }
    rep.update(recipe_fields(rep, used))
    return rep


def recipe_fields(rep: dict, used: pd.DataFrame) -> dict:
    """What `grpo-ablate recipe` and `confirm` read (report/recipe.py): the main effects as
    arms, the improving ones kept and the ones shown to do nothing safe to drop. The runs
    are the design's seeds alone (the prompts fixed): the confirmation's scope."""
    mains = [r for r in rep["effects"] if r["kind"] == "main"]
    arms = [{"arm": r["factors"][0], "verdict": r["verdict"], "p_adjusted": r["p_adjusted"],
             "diff": r["effect"]} for r in mains]
    first = used.iloc[0] if len(used) else {}
    return {"baseline": "baseline", "correction": "holm", "inert_below": INERT_BELOW,
            "scope": "prompts", "strata": [{
                "model": first.get("model", "-"), "task": first.get("task", "-"),
                "arms": arms, "recipe": {
                    "keep": [a["arm"] for a in arms if a["verdict"] == "improves"],
                    "safe_to_drop": [a["arm"] for a in arms
                                     if a["verdict"] in ("no_effect", "negligible")]}}]}


def render_screening(rep: dict, figures: list[str]) -> str:
    names = rep["factors"]
    roman = ROMAN.get(rep["resolution"], str(rep["resolution"]))
    error = {
        "ols": f"the residual of the model, {rep['residual_df']} df: the replicates' own "
               f"error ({rep.get('pure_error_df', 0)} df, blocks taken out) pooled with the "
               "contrasts the model takes as zero (three tricks or more)",
        "lenth": f"Lenth's pseudo standard error over all {rep.get('contrasts')} contrasts the "
                 "design estimates (modelled or not), p-values calibrated by simulation; the "
                 f"model leaves {rep['residual_df']} residual df",
        "none": "none: every replicate gave the same differences to rounding, so no effect "
                "can be tested; a zero effect is exactly zero (no_effect), any other stays "
                "open",
        "unknown": "unknown: no replicates, and the contrasts that would estimate the noise "
                   "came out zero (tricks that did not act): every effect stays open"
    }[rep["error"]]
    rule = (f"Error rule: the residual where it has at least {rep.get('min_residual_df')} df, "
            "else Lenth's PSE over every contrast (chosen by simulation, "
            "scripts/check_error_rule.py; docs/verdicts.md)")
    lines = [
        f"# Screening report: {rep['metric']} ({rep['direction']} is better)", "",
        *screening_summary(rep),
        f"**Design:** a two-level resolution {roman} fraction of {len(names)} factors, "
        f"{len(rep['points'])} points x {len(rep['replicates'])} replicate(s) (seeds "
        f"{', '.join(map(str, rep['replicates']))}); {rep['runs_used']} of "
        f"{rep['runs_expected']} runs used; drawn by `{rep['drawn_by']}`. Each effect is "
        f"{rep['estimand']}. Error: {error}. {rule}. Holm across the {len(rep['effects'])} "
        f"tested effects at alpha {rep['alpha']}; no effect: TOST within "
        f"±{rep['min_effect']:.3g}." + adaptive_line(rep.get("adaptive"), len(rep["effects"])),
        "", "## Effects", "",
        "| effect | estimate | 95% CI | " + (
            "p at its look (TOST's for no effect) | boundary p" if rep.get("adaptive")
            else "p (Holm) | TOST p (Holm)")
        + " | MDE | verdict | waiting on |", "|---|---|---|---|---|---|---|---|"]
    order = sorted(rep["effects"], key=lambda r: (r["kind"] != "main", -abs(r["t"])
                                                  if math.isfinite(r["t"]) else 0))
    for r in order:
        lo, hi = r["ci"]
        hint = f" (likely {', '.join(r['likely'])}: both tricks' main effects called)" \
            if r["likely"] and r["verdict"] == "interacts" and r["kind"] == "interaction" else ""
        tests = f"{r['p_look']:.3g} | {r['p_boundary']:.3g}" if rep.get("adaptive") else \
            f"{r['p_adjusted']:.3g} | {r['tost_p_adjusted']:.3g}"
        lines.append(f"| {r['name']} | {r['effect']:+.4g} | [{lo:+.3g}, {hi:+.3g}] | "
                     f"{tests} | {r['mde']:.3g} | {r['verdict']}{hint} | {r['waiting_on']} |")
    chains = [r["name"] for r in rep["effects"] if " = " in r["name"]]
    lines += ["", "## Alias structure", "",
              "Terms in one line share one column of the design: their estimate is their "
              "signed sum (interactions of three or more tricks taken as zero)." if chains
              else "No main effect or two-trick interaction shares a column with another.", ""]
    lines += [f"- {c}" for c in chains]
    lines += ["", "## Design table", "", "| point | " + " | ".join(names) + " |",
              "|---|" + "---|" * len(names)]
    for point, row in zip(rep["points"], rep["design"], strict=True):
        lines.append(f"| {point} | " + " | ".join("+" if v > 0 else "-" for v in row) + " |")
    lines += render_beside(rep.get("beside"))
    lines += render_screening_curves(rep.get("curves"))
    if figures:
        lines += ["", "## Figures", ""] + [f"![{Path(f).stem}](figures/{Path(f).name})"
                                           for f in figures]
    return "\n".join(lines) + "\n"


def adaptive_line(adaptive: dict | None, effects: int) -> str:
    """The design line's words for an adaptive screening."""
    if not adaptive:
        return ""
    state = "finished" if adaptive["finished"] else f"waiting on look {adaptive['next_look']}"
    return (f" **Adaptive:** replicates of the whole design at looks of "
            f"{' -> '.join(map(str, adaptive['rungs']))} seeds, alpha {adaptive['alpha']} "
            f"spent over the looks (O'Brien-Fleming type) and Holm across the {effects} "
            f"effects (sequentially rejective), no effect within ±{adaptive['min_effect']:.3g}; "
            f"{adaptive['looks_taken']} look(s) taken, {state}; each effect's numbers are "
            "those of the look that settled it.")


def write_screening_report(sweep_dir: Path, design: dict, settings) -> Path:
    """report.md, report.json and the figures of a screening sweep (its folder, or --out)."""
    from grpo_ablate.results.plan_file import read_plan
    from grpo_ablate.results.table import load_results

    df, warnings = load_results([sweep_dir])
    out = Path(settings.out) if settings.out else sweep_dir
    return write_design_report(df, warnings, design, settings, out, sweep_dir.name,
                               [sweep_dir], read_plan(sweep_dir))


def write_design_report(df: pd.DataFrame, warnings: list[str], design: dict, settings,
                        out: Path, group: str, paths: list[Path],
                        plan: Design | None = None) -> Path:
    """The screening report of a design's runs (a sweep's records, or a table's rows)."""
    from grpo_ablate.records import atomic_write_text, jsonable

    rep = screening_report(df, design, settings.metric, settings.alpha, settings.min_effect,
                           settings.min_effect_of, settings.direction, plan)
    if settings.beside:
        from grpo_ablate.report.screening_beside import beside

        rep["beside"] = beside(rep, Path(settings.beside))
    if rep["runs_used"] < rep["runs_expected"]:
        warnings.append(f"{rep['runs_expected'] - rep['runs_used']} of the design's "
                        f"{rep['runs_expected']} runs have no {rep['metric']} (not run yet, "
                        "or failed): the model uses the rest")
    rep["warnings"] = warnings
    figures = []
    if settings.figures:
        from grpo_ablate.report.screening_figures import write_screening_figures

        figures = write_screening_figures(rep, out / "figures")
    md = render_screening(rep, figures)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    atomic_write_text(out / "report.json", json.dumps(jsonable(rep), indent=1,
                                                      allow_nan=False) + "\n")
    atomic_write_text(out / "report.md", md)
    print(md.split("\n## Alias structure")[0].rstrip())
    print(f"\nreport: {out / 'report.md'}  json: {out / 'report.json'}")
    if settings.wandb:
        from grpo_ablate.report.wandb_summary import log_summary

        run_id = log_summary(rep, out, figures, group=group,
                             project=settings.wandb_project, entity=settings.wandb_entity,
                             mode=settings.wandb)
        if run_id:
            print(f"W&B summary run: {run_id} ({settings.wandb}, under {out / 'wandb'})")
        from grpo_ablate.report.wandb_dashboard import write_dashboard

        write_dashboard(rep, out, paths, group, settings.wandb_project,
                        settings.wandb_entity, run_id, figures,
                        online=settings.wandb == "online")
    return out
