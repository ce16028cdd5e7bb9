"""report.md: the design, the verdict table, then stability, strata, the single-run
illusion, the recipe, diagnostics and failures."""

from __future__ import annotations

VERDICT_MARK = {"improves": "improves", "harms": "**harms**", "negligible": "negligible",
                "no_effect": "no effect", "inconclusive": "inconclusive"}


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}" if abs(x) >= 10 ** -digits or x == 0 else f"{x:.1e}"
    return str(x)


def _p(x) -> str:
    return "-" if x is None else ("<0.001" if x < 0.001 else f"{x:.3f}")


def render_markdown(report: dict, figures: list[str]) -> str:
    m, a = report["metric"], report["alpha"]
    lines = ["# grpo-ablate report", ""]
    for st in report["strata"]:
        base = st["baseline"]
        tests = sorted({x["test"] for x in st["arms"]})
        lines += [
            f"## Design: model `{st['model']}`, task `{st['task']}`", "",
            f"- Metric: `{m}` (higher is better). Baseline arm `{report['baseline']}`: "
            f"n={base['n']}, mean {_f(base['mean'])} ± {_f(base['std'])} (std over seeds).",
            f"- Arms compared: {len(st['arms'])}; test: {', '.join(tests)} (paired when seeds are "
            "matched across arms, Welch otherwise; chosen from the design, not the results).",
            f"- alpha {a}, {report['correction'].upper()} correction over {st['comparisons']} "
            f"comparisons; min-effect ±{report['min_effect']} (smaller differences do not "
            "matter); secondary and stability metrics BH-corrected.",
            "- Verdicts: improves/harms = corrected p < alpha and the 95% CI excludes 0; "
            "negligible = significant but inside ±min-effect; no effect = TOST equivalence "
            "within ±min-effect; inconclusive = neither (more seeds listed).", "",
            "## Verdicts", "",
            "| arm | n | mean ± std | diff | 95% CI | p | p adj | effect | MDE | verdict |"
            " seeds needed | diverged/failed |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for x in sorted(st["arms"], key=lambda e: -(e["diff"] if e["diff"] is not None else -9)):
            lines.append(
                f"| {x['arm']} | {x['n']} | {_f(x['mean'])} ± {_f(x['std'])} | {_f(x['diff'])} "
                f"| [{_f(x['ci_low'])}, {_f(x['ci_high'])}] | {_p(x['p_value'])} "
                f"| {_p(x['p_adjusted'])} | {_f(x['effect_size'], 2)} | {_f(x['mde'])} "
                f"| {VERDICT_MARK[x['verdict']]} | {_f(x['seeds_needed'])} "
                f"| {x['runs_diverged']}/{x['runs_failed']} |")
        notes = [(x["arm"], n) for x in st["arms"] for n in x["notes"]]
        if notes:
            lines += ["", "Notes:"] + [f"- {arm}: {n}" for arm, n in notes]
        lines += ["", "Robustness (never decides): Wilcoxon/Mann-Whitney p, permutation p, "
                  "P(trick > baseline):", ""]
        lines += [f"- {x['arm']}: {_p(x['robust_p'])}, {_p(x['permutation_p'])}, "
                  f"{_f(x['prob_improvement'], 2)}" for x in st["arms"]]
        lines += _stability(st) + _illusion(st) + _recipe(st) + _diag(st) + _failures(st)
    if len(report["strata"]) > 1:
        lines += _strata(report)
    if report.get("warnings"):
        lines += ["", "## Corrupt records (excluded)", ""] + [f"- {w}" for w in report["warnings"]]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}](figures/{f})" for f in figures]
    return "\n".join(lines) + "\n"


def _stability(st: dict) -> list[str]:
    if not st["stability"]:
        return []
    metrics = list(st["stability"])
    out = ["", "## Stability (difference to baseline; * = BH-significant)", "",
           "| arm | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
    arms = [x["arm"] for x in st["arms"]]
    for arm in arms:
        cells = []
        for m in metrics:
            e = next(x for x in st["stability"][m] if x["arm"] == arm)
            star = "*" if e["p_adjusted"] is not None and e["p_adjusted"] < 0.05 else ""
            cells.append(f"{_f(e['diff'])}{star}")
        out.append(f"| {arm} | " + " | ".join(cells) + " |")
    return out


def _illusion(st: dict) -> list[str]:
    il = st["single_run_illusion"]
    frac = il["unconfirmed_fraction"]
    out = ["", "## The single-run illusion", "",
           f"Of {il['single_run_improves']} single-seed comparisons that say \"improves\" "
           f"(trick seed s vs baseline seed s, by at least min-effect), "
           f"{il['unconfirmed_improves']} ({_f(frac * 100 if frac is not None else None, 0)}%) "
           "are not confirmed by the multi-seed verdict.", "",
           "| arm | single runs | disagree with multi-seed verdict |", "|---|---|---|"]
    for arm, v in il["per_arm"].items():
        d = v["disagree_fraction"]
        out.append(f"| {arm} | {v['single_runs']} | {_f(d * 100 if d is not None else None, 0)}% |")
    return out


def _recipe(st: dict) -> list[str]:
    r = st["recipe"]
    und = ", ".join(f"{u['arm']} (+{u['more_seeds_needed']} seeds)" if u["more_seeds_needed"] is not None
                    else f"{u['arm']} (seeds needed undefined: see notes)" for u in r["undecided"])
    return ["", "## Recommended minimal recipe", "",
            f"- Baseline plus: {', '.join(r['keep']) or 'nothing (no trick significantly improves)'}",
            f"- Safe to drop (shown to do nothing that matters): {', '.join(r['safe_to_drop']) or '-'}",
            f"- Avoid (significantly harms): {', '.join(r['avoid']) or '-'}",
            f"- Undecided: {und or '-'}"]


def _diag(st: dict) -> list[str]:
    if not st["diagnostics"]:
        return []
    out = ["", "## Monitoring-rule hits (runs per arm)", ""]
    out += [f"- {arm}: " + ", ".join(f"{r} x{n}" for r, n in sorted(rules.items()))
            for arm, rules in sorted(st["diagnostics"].items())]
    return out


def _failures(st: dict) -> list[str]:
    out = ["", "## Diverged and failed runs", ""]
    if not st["failures"]:
        return out + ["None."]
    out += ["Diverged runs count as results (their final evaluation); failed runs are listed "
            "and not counted.", ""]
    out += [f"- {f['arm']} seed {f['seed']}: {f['status']} ({f['error']})" for f in st["failures"]]
    return out


def _strata(report: dict) -> list[str]:
    names = [f"{s['model']}/{s['task']}" for s in report["strata"]]
    arms = sorted({a["arm"] for s in report["strata"] for a in s["arms"]})
    out = ["", "## Verdicts per stratum", "", "| arm | " + " | ".join(names) + " |",
           "|---|" + "---|" * len(names)]
    for arm in arms:
        cells = [next((a["verdict"] for a in s["arms"] if a["arm"] == arm), "-")
                 for s in report["strata"]]
        flip = " (sign flips)" if arm in report["sign_flips"] else ""
        out.append(f"| {arm}{flip} | " + " | ".join(cells) + " |")
    return out
