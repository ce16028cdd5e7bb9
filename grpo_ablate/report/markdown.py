"""report.md: the design, the verdict table (with each trick's activity and budget), then
EMA against raw weights, stability, strata, the single-run illusion, the recipe,
diagnostics and failures."""

from __future__ import annotations

from grpo_ablate.report.controls import control_lines, duplicate_lines
from grpo_ablate.report.design_text import arms_line, margin_text, runs_line, scope_line
from grpo_ablate.report.early_stop_text import early_stop_lines
from grpo_ablate.report.summary import summary_lines, waiting_cell

VERDICT_MARK = {"improves": "improves", "harms": "**harms**", "negligible": "negligible",
                "no_effect": "no effect", "inert": "inert (not tested)",
                "inconclusive": "inconclusive"}


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}" if abs(x) >= 10 ** -digits or x == 0 else f"{x:.1e}"
    return str(x)


def _p(x) -> str:
    return "-" if x is None else ("<0.001" if x < 0.001 else f"{x:.3f}")


def _g(x) -> str:
    return "-" if x is None else f"{x:.2g}"


def _order(arms: list[dict], direction: str) -> list[dict]:
    """Best first, in the metric's direction; untestable arms last."""
    sign = -1 if direction == "higher" else 1
    return sorted(arms, key=lambda e: sign * e["diff"] if e["diff"] is not None else 9)


def render_markdown(report: dict, figures: list[str], path: str = "<this folder>") -> str:
    m, a, direction = report["metric"], report["alpha"], report["direction"]
    lines = ["# grpo-ablate report", "", *summary_lines(report, path)]
    for st in report["strata"]:
        base = st["baseline"]
        tests = sorted({x["test"] for x in st["arms"]})
        lines += [
            f"## Design: model `{st['model']}`, task `{st['task']}`", "",
            f"- Metric: `{m}` ({direction} is better). Baseline arm `{report['baseline']}`: "
            f"n={base['n']}, mean {_f(base['mean'])} ± {_f(base['std'])} (std over seeds).",
            f"- Arms compared: {len(st['arms'])}; test: {', '.join(tests) or '-'}.",
            runs_line(report.get("design") or {}),
            scope_line(st, report.get("design") or {}),
            *arms_line(report.get("design") or {}),
            f"- alpha {a}, {report['correction'].upper()} correction over {st['comparisons']} "
            f"comparisons, for both significance and equivalence; {margin_text(report, st)} "
            "(smaller differences do not matter); secondary and stability metrics BH-corrected.",
            "- Verdicts: improves/harms = corrected p < alpha and the 95% CI excludes 0; "
            "negligible = significant but inside ±min-effect; no effect = corrected TOST "
            "equivalence within ±min-effect, the 95% CI inside it and an MDE at most it, or "
            "identical to its comparison arm on every seed (CI [0, 0], no test needed); "
            "inert = the trick acted on fewer than "
            f"{report['inert_below']:.0%} of its units (or is the baseline by construction), so "
            "the run did not test it; inconclusive = none of these. Every number in a row "
            "(n, diff, CI, p, MDE) is the comparison that decided its verdict, named in "
            "\"decided by\" (an adaptive sweep's: the look that settled it, at that look's "
            "boundary).",
            "- Waiting on (open arms only): confirmation of the observed effect (the CI excludes "
            "0), equivalence (the CI straddles 0 inside ±min-effect) or either, and the more "
            "seeds that would give 80% power at the observed difference and spread under this "
            "design (Holm's alpha/k, or the adaptive plan's next boundaries); under the task "
            "scope also the more held-out prompts, and what each route costs in run time.",
            *(["- Adaptive sweep: the verdicts are the looks' decisions (section \"Adaptive seed "
               "ladder\"); p adj is the fixed-n Holm value on the seeds run, for reference only."]
              if st.get("adaptive") else []), "",
            "## Verdicts", "",
            "| arm | n | mean ± std | diff | 95% CI | p | p adj | effect | MDE | verdict |"
            " decided by | waiting on | acted | budget vs baseline | diverged/failed |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for x in _order(st["arms"], direction):
            against = x.get("against")
            name = x["arm"] + (f" (vs {against})" if against and against != report["baseline"]
                               else "")
            lines.append(
                f"| {name} | {x['n']} | {_f(x['mean'])} ± {_f(x['std'])} | {_f(x['diff'])} "
                f"| [{_f(x['ci_low'])}, {_f(x['ci_high'])}] | {_p(x['p_value'])} "
                f"| {_p(x['p_adjusted'])} | {_f(x['effect_size'], 2)} | {_f(x['mde'])} "
                f"| {VERDICT_MARK[x['verdict']]} | {decided_cell(x)} "
                f"| {waiting_cell(x.get('waiting_on'))} "
                f"| {_acted(x.get('activity'))} | {_budget_cell(st.get('budget', {}).get(x['arm']))} "
                f"| {x['runs_diverged']}/{x['runs_failed']} |")
        waiting = [(x["arm"], x["waiting_on"]["text"]) for x in _order(st["arms"], direction)
                   if x.get("waiting_on")]
        if waiting:
            lines += ["", "What each open arm is waiting on:"] + [f"- {a}: {t}" for a, t in waiting]
        notes = [(x["arm"], n) for x in st["arms"] for n in x["notes"]]
        if notes:
            lines += ["", "Notes:"] + [f"- {arm}: {n}" for arm, n in notes]
        lines += ["", "Robustness (never decides): Wilcoxon/Mann-Whitney p, permutation p, "
                  "P(trick better than baseline):", ""]
        lines += [f"- {x['arm']}: {_p(x['robust_p'])}, {_p(x['permutation_p'])}, "
                  f"{_f(x['prob_improvement'], 2)}" for x in st["arms"]]
        lines += _against(st, report["baseline"]) + _priors(st, report.get("priors") or {})
        lines += control_lines(st, report.get("controls") or {})
        lines += duplicate_lines(st, report.get("duplicates") or {})
        lines += (_adaptive(st) + _variance(st) + _activity(st) + _budget(st) + _ema(st, m)
                  + _stability(st) + _illusion(st) + _recipe(st, report.get("design") or {})
                  + _diag(st) + _failures(st))
    if len(report["strata"]) > 1:
        lines += _strata(report)
    if report.get("strata_without_baseline"):
        lines += section("Strata without a baseline (not analysed)")
        lines += [f"- {s['model']}/{s['task']}: {s['runs']} runs of {', '.join(s['arms'])}; no "
                  f"`{report['baseline']}` runs to compare with"
                  for s in report["strata_without_baseline"]]
    if report.get("additivity"):
        lines += _additivity(report)
    if report.get("recipe_departures"):
        lines += section("Where the baseline departs from the review's recipe")
        lines += [f"- {d}" for d in report["recipe_departures"]]
    if report.get("warnings"):
        lines += section("Warnings") + [f"- {w}" for w in report["warnings"]]
    if figures:
        lines += section("Figures") + [f"![{f}](figures/{f})" for f in figures]
    return "\n".join(lines) + "\n"


def decided_cell(x: dict) -> str:
    """What decided the row's verdict (its numbers are that comparison's)."""
    if x["verdict"] == "inert":
        act = x.get("activity") or {}
        return f"inert rule: acted on {_pct(act.get('acted'))} of its units"
    return (x.get("decided_by") or {}).get("text", "-")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def _against(st: dict, baseline: str) -> list[str]:
    """Which arm each comparison is with, where it is not the baseline."""
    other = [(x["arm"], x["against"]) for x in st["arms"] if x.get("against") not in (None, baseline)]
    if not other:
        return []
    return ["", "Compared with another arm (one the trick can act on; its trick file's "
            "`against`):"] + [f"- {a} against {b}" for a, b in other]


def _priors(st: dict, priors: dict) -> list[str]:
    """What the source review, or the paper behind a variant, claimed beside what was
    measured here."""
    rows = [(x["arm"], priors[x["arm"]], x["verdict"]) for x in st["arms"] if priors.get(x["arm"])]
    if not rows:
        return []
    out = ["", "### Claimed before, measured here", "", "| arm | claimed (review's verdict, or "
           "the paper's claim and source) | measured |", "|---|---|---|"]
    return out + [f"| {a} | {p} | {VERDICT_MARK[v]} |" for a, p, v in rows]


REASONS = {"efficacy": "crossed the efficacy boundary", "equivalence": "equivalent (TOST)",
           "identical": "identical to the baseline on every seed", "final": "last rung reached",
           "futility": "stopped for futility", "open": "still open"}


def _variance(st: dict) -> list[str]:
    """Each arm's variance decomposition, and which route buys precision."""
    arms = [x for x in st["arms"] if x.get("variance")]
    if not arms:
        return []
    out = section("Where the uncertainty comes from (variance of the paired difference)") + [
        "Per arm: the variance of a run's seed effect on the difference, of the trick's "
        "effect across prompts, and of the rest (seed x prompt), from the seeds x prompts "
        "table the arm shares with the baseline; the standard error of the mean difference "
        "on these prompts and for the task, and the prompt component's share of the latter.",
        "", "| arm | seeds x prompts | seed var | prompt var | residual var | SE (these "
        "prompts) | SE (task) | from prompts |", "|---|---|---|---|---|---|---|---|"]
    for x in arms:
        v = x["variance"]
        share = v["prompt_share"]
        out.append(f"| {x['arm']} | {v['seeds']} x {v['prompts']} | {v['seed']:.2g} | "
                   f"{v['prompt']:.2g} | {v['residual']:.2g} | {_f(v['se_prompts_scope'])} | "
                   f"{_f(v['se_task_scope'])} | "
                   + ("-" if share is None else f"{share:.0%}") + " |")
    notes = [f"- {x['arm']}: {x['variance']['note']}" for x in arms if x["variance"].get("note")]
    return out + ([""] + notes if notes else [])


def section(title: str) -> list[str]:
    """A report section's heading, set off by blank lines."""
    return ["", f"## {title}", ""]


def _ladder_design(d: dict) -> str:
    """The ladder's design, as it was declared before the first run."""
    return (f"Declared before the first run: rungs {' -> '.join(map(str, d['rungs']))} seeds, "
            f"alpha {d['alpha']} spent over the looks (O'Brien-Fleming type) with Holm across "
            f"the {len(d['arms'])} arms, equivalence margin ±{d['min_effect']}, futility stop "
            f"below {d['futility']:.0%} conditional power (non-binding). The verdicts above "
            "are the looks' decisions.")


def _adaptive(st: dict) -> list[str]:
    ad = st.get("adaptive")
    if not ad:
        return []
    if "early_stop" in ad:
        return early_stop_lines(st)
    lines = [*section("Adaptive seed ladder"), _ladder_design(ad["design"]), "",
             "| look | seeds | alpha spent (at alpha/arms) | boundary z | boundary p |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['look']} | {r['seeds']} | {r['alpha_spent_this_look']:.2g} "
              f"| {r['z_boundary']:.3f} | {r['p_boundary']:.2g} |" for r in ad["plan"]]
    lines += ["", "| arm | settled at look | seeds | why | p at that look | boundary p | verdict |",
              "|---|---|---|---|---|---|---|"]
    def settled(x: dict) -> tuple:  # by look, then name; still-open arms last
        return ((x.get("adaptive") or {}).get("look") or 99, x["arm"])

    for x in sorted(st["arms"], key=settled):
        a = x.get("adaptive")
        if a:
            lines.append(f"| {x['arm']} | {a['look'] or '-'} | {a['seeds'] or '-'} "
                         f"| {REASONS.get(a['reason'], a['reason'])} | {_g(a.get('p_value'))} "
                         f"| {_g(a.get('p_boundary'))} | {x['verdict']} |")
    pending = f"; look {ad['pending_look']} still running" if ad["pending_look"] else ""
    lines += ["", f"Runs: {ad['runs_used']} used against {ad['runs_fixed_n']} for fixed n at "
              f"{ad['design']['rungs'][-1]} seeds: {ad['runs_saved']:.0%} saved{pending}."]
    return lines


def _acted(act: dict | None) -> str:
    return "-" if not act else f"{act['acted']:.0%}"


def _budget_cell(b: dict | None) -> str:
    if not b:
        return "-"
    if not b["differs"]:
        return "same"
    names = {"optimizer_steps": "steps", "completions": "completions", "total_lr": "total LR"}
    return ", ".join(f"{names[k]} x{b['ratio'][k]:.2f}" for k in b["differs"])


def _activity(st: dict) -> list[str]:
    acts = [(x["arm"], x["activity"]) for x in st["arms"] if x.get("activity")]
    if not acts:
        return []
    out = [*section("How much each trick acted"),
           "Values used: a reward trick's settings in the task's reward units, as the trainer "
           "applied them (measured on the SFT policy's rewards when the task sets them as "
           "quantiles, `task.shaping.scale=sft_quantiles`).", "",
           "| arm | acted | what was counted | details | values used |", "|---|---|---|---|---|"]
    for arm, act in acts:
        details = ", ".join(f"{k}={_f(v)}" for k, v in sorted(act["details"].items()))
        values = ", ".join(f"{k}={_f(v)}" for k, v in sorted((act.get("values") or {}).items()))
        out.append(f"| {arm} | {act['acted']:.1%} | {act['measure'] or '-'} | {details or '-'} "
                   f"| {values or '-'} |")
    return out


def _budget(st: dict) -> list[str]:
    b = st.get("budget") or {}
    if not b:
        return []
    keys = [k for k in ("optimizer_steps", "completions", "completion_tokens", "total_lr")
            if k in next(iter(b.values()))]
    out = [*section("Budget per arm (means over runs; ratio to the baseline)"),
           "| arm | " + " | ".join(keys) + " | differs |", "|---|" + "---|" * (len(keys) + 1)]
    for arm, row in b.items():
        cells = [f"{_f(row[k], 4 if k == 'total_lr' else 0)} (x{_f(row['ratio'][k], 2)})"
                 for k in keys]
        out.append(f"| {arm} | " + " | ".join(cells) + f" | {', '.join(row['differs']) or '-'} |")
    out += ["", "An arm whose planned budget differs (steps, completions, total learning rate) "
            "changes more than its one knob: read its verdict with that in mind, or sweep with "
            "`budget.match=completions`."]
    return out


def _ema(st: dict, metric: str) -> list[str]:
    rows = st.get("ema_vs_raw") or []
    if not rows:
        return []
    out = [*section("Averaged (EMA) against raw weights, within the arm (paired by seed)"),
           f"| arm | n | EMA {metric} | raw | diff | 95% CI | p adj | regret EMA | regret raw |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['arm']} | {r['n']} | {_f(r['ema_mean'])} | {_f(r['raw_mean'])} "
                   f"| {_f(r['diff'])} | [{_f(r['ci_low'])}, {_f(r['ci_high'])}] "
                   f"| {_p(r['p_adjusted'])} | {_f(r['regret_ema'])} | {_f(r['regret_raw'])} |")
    return out


def _stability(st: dict) -> list[str]:
    if not st["stability"]:
        return []
    metrics = list(st["stability"])
    out = ["", "## Stability (difference to baseline; * = BH-significant; lower is better "
           "except entropy_ratio_final)", "",
           "| arm | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    for x in st["arms"]:
        cells = []
        for m in metrics:
            e = next(y for y in st["stability"][m] if y["arm"] == x["arm"])
            star = "*" if e["p_adjusted"] is not None and e["p_adjusted"] < 0.05 else ""
            cells.append(f"{_f(e['diff'])}{star}")
        out.append(f"| {x['arm']} | " + " | ".join(cells) + " |")
    return out


def _illusion(st: dict) -> list[str]:
    il = st["single_run_illusion"]
    if il is None:  # independent runs: no seed s of one arm to set against seed s of another
        return []
    frac = il["unconfirmed_fraction"]
    out = [*section("The single-run illusion"),
           f"Of {il['single_run_improves']} single-seed comparisons that say \"improves\" "
           f"(trick seed s vs baseline seed s, by at least min-effect), "
           f"{il['unconfirmed_improves']} ({_f(frac * 100 if frac is not None else None, 0)}%) "
           "are not confirmed by the multi-seed verdict.", "",
           "| arm | single runs | disagree with multi-seed verdict |", "|---|---|---|"]
    for arm, v in il["per_arm"].items():
        d = v["disagree_fraction"]
        out.append(f"| {arm} | {v['single_runs']} | {_f(d * 100 if d is not None else None, 0)}% |")
    return out


def _undecided_cell(w: dict | None) -> str:
    """The recipe's form of waiting_cell: the seed-only count says what it counts."""
    cell = waiting_cell(w)
    if w and w.get("more_seeds") is not None and "more_prompts" not in w:
        cell += " seeds"
    return cell


def _recipe(st: dict, design: dict) -> list[str]:
    r = st["recipe"]
    if r is None:  # arms that are methods: a comparison, no recipe of tricks
        return [*section("Recommended minimal recipe"), "None: the arms are methods, not "
                "tricks (" + design.get("arms_reason", "--arms methods") + ")."]
    und = ", ".join(f"{u['arm']} ({_undecided_cell(u.get('waiting_on'))})" for u in r["undecided"])
    return [*section("Recommended minimal recipe"),
            f"- Baseline plus: {', '.join(r['keep']) or 'nothing (no trick significantly improves)'}",
            f"- Safe to drop (shown to do nothing that matters): {', '.join(r['safe_to_drop']) or '-'}",
            f"- Avoid (significantly harms): {', '.join(r['avoid']) or '-'}",
            f"- Not tested here (the trick hardly acted): {', '.join(r['untested']) or '-'}",
            f"- Undecided: {und or '-'}"]


def _additivity(report: dict) -> list[str]:
    """Does each combined arm's effect equal the sum of its tricks' single-trick effects?"""
    lines = [*section("Do the tricks add up?"),
             "A combined arm's difference from the baseline beside the sum of its tricks' "
             "single-trick differences, per matched seed; the interaction is their difference "
             f"(95% t interval over the seeds; 'adds up' within +-{report['min_effect']:g})."]
    for a in report["additivity"]:
        head = f"- {a['arm']} ({' + '.join(a['composed_of'])}), {a['model']}/{a['task']}"
        if a["observed"] is None:
            lines.append(f"{head}: no seed with every run ({', '.join(a['missing']) or 'the combination'} "
                         f"missing): {a['sentence']}")
            continue
        ci = f" [{a['ci_low']:+.4f}, {a['ci_high']:+.4f}]" if a["ci_low"] is not None else ""
        lines.append(f"{head}, {a['seeds']} seed(s): observed {a['observed']:+.4f}, the sum of "
                     f"the single-trick effects {a['predicted']:+.4f}; interaction "
                     f"{a['difference']:+.4f}{ci}: **{a['sentence']}**")
    return lines


def _diag(st: dict) -> list[str]:
    if not st["diagnostics"]:
        return []
    out = section("Monitoring-rule hits (runs per arm)")
    out += [f"- {arm}: " + ", ".join(f"{r} x{n}" for r, n in sorted(rules.items()))
            for arm, rules in sorted(st["diagnostics"].items())]
    return out


def _failures(st: dict) -> list[str]:
    out = section("Diverged and failed runs")
    if not st["failures"]:
        return out + ["None."]
    out += ["Diverged runs count as results (their final evaluation); failed runs are listed "
            "and not counted.", ""]
    out += [f"- {f['arm']} seed {f['seed']}: {f['status']} ({f['error']})" for f in st["failures"]]
    return out


def _strata(report: dict) -> list[str]:
    names = [f"{s['model']}/{s['task']}" for s in report["strata"]]
    arms = sorted({a["arm"] for s in report["strata"] for a in s["arms"]})
    out = [*section("Verdicts per stratum"), "| arm | " + " | ".join(names) + " |",
           "|---|" + "---|" * len(names)]
    for arm in arms:
        cells = [next((a["verdict"] for a in s["arms"] if a["arm"] == arm), "-")
                 for s in report["strata"]]
        flip = " (sign flips)" if arm in report["sign_flips"] else ""
        out.append(f"| {arm}{flip} | " + " | ".join(cells) + " |")
    return out
