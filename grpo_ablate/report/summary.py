"""A report in words first: the "In short" section that opens report.md (what to keep, what to
drop, what was shown to do nothing, what was not tested, what is still open and what it waits
on, the recipe, and what the report left out, with counts and why), and the lines the
terminal gets in place of the whole report (`--verbose` prints it all). The verdict words are
the table's."""

from __future__ import annotations

from grpo_ablate.stats.verdicts import row_contradiction

WORDS = {"improves": "improves", "harms": "harms", "no_effect": "no effect",
         "negligible": "negligible", "inert": "inert", "inconclusive": "inconclusive"}


def _effect(x: dict) -> str:
    if x.get("diff") is None:
        return ""
    ci = f", 95% CI [{x['ci_low']:+.3g}, {x['ci_high']:+.3g}]" \
        if x.get("ci_low") is not None and x.get("ci_high") is not None else ""
    return f" ({x['diff']:+.3g}{ci})"


def _names(arms: list[dict], effects: bool = False) -> str:
    return ", ".join(f"{x['arm']}{_effect(x) if effects else ''}" for x in arms) or "-"


def left_out(report: dict, st: dict) -> list[str]:
    """What the stratum's verdicts did not use, with counts and why."""
    out = []
    failed = sum(x["runs_failed"] for x in st["arms"]) + st["baseline"].get("runs_failed", 0)
    diverged = sum(x["runs_diverged"] for x in st["arms"])
    if failed:
        out.append(f"{failed} failed run(s), not used (\"Diverged and failed runs\")")
    if diverged:
        out.append(f"{diverged} diverged run(s), used as they ended")
    dropped = {x["arm"]: (x.get("variance") or {}).get("dropped_prompts") for x in st["arms"]}
    dropped = {a: n for a, n in dropped.items() if n}
    if dropped:
        most = max(dropped.values())
        out.append(f"up to {most} held-out prompt(s) per comparison, missing from some run of "
                   f"the pair ({', '.join(f'{a}: {n}' for a, n in dropped.items())})")
    elsewhere = [n for x in st["arms"] for n in x.get("notes", [])
                 if "which has no runs here" in n]
    if elsewhere:
        out.append(f"{len(elsewhere)} arm(s) compared with the baseline because their "
                   "comparison arm has no runs (Notes)")
    untested = [x["arm"] for x in st["arms"] if (x.get("decided_by") or {}).get("rule") == "untested"]
    if untested:
        out.append(f"{len(untested)} arm(s) not tested: the same difference on every seed "
                   f"({', '.join(untested)})")
    for s in report.get("strata_without_baseline") or []:
        out.append(f"{s['runs']} run(s) of {s['model']}/{s['task']}: no baseline runs there")
    return out


def summary_lines(report: dict, path: str = "<this folder>") -> list[str]:
    """The "In short" section: one block per stratum."""
    lines = ["## In short", ""]
    many = len(report["strata"]) > 1
    confirm = bool(report.get("additivity")) and all(
        len(st["arms"]) == 1 for st in report["strata"])
    for st in report["strata"]:
        by = {v: [x for x in st["arms"] if x["verdict"] == v] for v in WORDS}
        seeds = sorted({x["n"] for x in st["arms"] if x["n"]})
        span = f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]) if seeds else "0"
        head = f"On `{st['model']}` / `{st['task']}`, " if many else ""
        lines.append(f"{head}{len(st['arms'])} arm(s) against `{report['baseline']}` over {span} "
                     f"seeds ({report['metric']}, {report['direction']} is better, margin "
                     f"±{st.get('min_effect') or report['min_effect']:g}):")
        lines += [
            f"- **Keep** (improves): {_names(by['improves'], True)}",
            f"- **Drop** (harms): {_names(by['harms'], True)}",
            f"- **Shown not to matter** (no effect, or negligible: inside the margin): "
            f"{_names(by['no_effect'] + by['negligible'])}",
            f"- **Not tested** (inert: the trick hardly acted): {_names(by['inert'])}",
        ]
        open_ = [f"{x['arm']} (waiting on "
                 f"{waiting_cell(x.get('waiting_on')).replace('(see below)', '(see the table)')})"
                 for x in by["inconclusive"]]
        lines.append(f"- **Still open** (inconclusive): {'; '.join(open_) or '-'}")
        recipe = st.get("recipe")
        if recipe is not None and not confirm:
            lines.append(f"- **Recipe**: baseline + {', '.join(recipe['keep']) or 'nothing'} "
                         f"(`grpo-ablate recipe {path}` writes it; `grpo-ablate confirm {path}` "
                         "runs it against the baseline)")
        gone = left_out(report, st)
        none = "nothing: every run, arm and prompt was used"
        lines.append(f"- **Left out**: {'; '.join(gone) if gone else none}")
        lines.append("")
    if confirm:
        lines += [
            "This confirmation tests one combined arm, so its correction is over 1 comparison, "
            "where the sweep's was over all its arms: a trick the sweep showed to do nothing "
            "(no effect) can come out negligible here, a small significant difference inside "
            "the margin. Both say it does not matter. Whether a recipe's tricks add up is "
            "asked only of a recipe of two or more (\"Do the tricks add up?\").", ""]
    return lines


def terminal_lines(report: dict, out: str) -> list[str]:
    """What the terminal gets: verdict counts, the recipe, open arms, warnings, the paths."""
    lines = []
    for st in report["strata"]:
        counts = {v: sum(x["verdict"] == v for x in st["arms"]) for v in WORDS}
        said = ", ".join(f"{n} {WORDS[v]}" for v, n in counts.items() if n)
        where = f"{st['model']}/{st['task']}: " if len(report["strata"]) > 1 else ""
        lines.append(f"{where}{len(st['arms'])} arms: {said}")
        keep = [x["arm"] for x in st["arms"] if x["verdict"] == "improves"]
        harm = [x["arm"] for x in st["arms"] if x["verdict"] == "harms"]
        lines.append(f"  keep: {', '.join(keep) or '-'}; drop: {', '.join(harm) or '-'}")
        recipe = st.get("recipe")
        if recipe is not None:
            lines.append(f"  recipe: baseline + {', '.join(recipe['keep']) or 'nothing'}")
    if report.get("warnings"):
        lines.append(f"{len(report['warnings'])} warning(s): see the report's Warnings")
    lines.append(f"report: {out}/report.md  json: {out}/report.json  (the whole report in the "
                 "terminal: --verbose)")
    return lines


CONSOLE_SKIPS = ("Stability", "Monitoring", "Figures")  # long tables stay in report.md


def console_summary(md: str) -> str:
    """report.md without its longest tables, for the terminal."""
    sections = md.split("\n## ")
    kept = [sections[0]] + [s for s in sections[1:] if not s.startswith(CONSOLE_SKIPS)]
    return "\n## ".join(kept).rstrip()


def contradictions(report: dict) -> list[str]:
    """A row whose numbers its verdict's definition denies (none is expected: the numbers are
    the deciding comparison's), as a warning rather than a silent table."""
    out = []
    for st in report.get("strata", []):
        margin = st.get("min_effect") or report["min_effect"]
        for x in st["arms"]:
            why = row_contradiction(x, report["alpha"], margin, report["direction"],
                                    report["inert_below"])
            if why:
                out.append(f"{x['arm']} ({st['model']}/{st['task']}): the row contradicts its "
                           f"verdict: {why}")
    return out


def waiting_cell(w: dict | None) -> str:
    """The verdict table's short form of an arm's `waiting_on`: `effect +7`, `-` when
    decided; the full sentence is listed under the table."""
    if not w:
        return "-"
    if w["on"] == "a trick that acts":
        return "a trick that acts"
    if "more_prompts" in w:  # the task scope: seeds, or prompts, whichever is possible
        routes = [f"+{w['more_seeds']} seeds" if w["more_seeds"] is not None else None,
                  f"+{w['more_prompts']} prompts" if w["more_prompts"] is not None else None]
        both = w.get("both")
        if not any(routes) and both:  # neither alone: the two together
            routes = [f"+{both['more_seeds']} seeds and +{both['more_prompts']} prompts"]
        return f"{w['on']} " + (" or ".join(r for r in routes if r) or "(see below)")
    more = f" +{w['more_seeds']}" if w["more_seeds"] is not None else " (see below)"
    return f"{w['on']}{more}"
