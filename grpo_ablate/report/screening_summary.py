"""A screening report in words first: the "In short" section that opens it, in the verdict
words of the one-at-a-time report (keep, drop, shown not to matter, not tested, open and what
each waits on), plus what only a design can say (effects aliased with interactions, which a
fold-over separates; interactions called), the recipe `grpo-ablate recipe` would write, and
what the model left out."""

from __future__ import annotations


def _effect(r: dict) -> str:
    lo, hi = r["ci"]
    return f"{r['name'].split(' = ')[0]} ({r['effect']:+.3g}, 95% CI [{lo:+.3g}, {hi:+.3g}])"


def screening_summary(rep: dict) -> list[str]:
    """The section's lines."""
    mains = [r for r in rep["effects"] if r["kind"] == "main"]
    by = {v: [r for r in mains if r["verdict"] == v] for v in
          ("improves", "harms", "no_effect", "negligible", "inert", "aliased", "inconclusive")}
    called = [r for r in rep["effects"] if r["kind"] == "interaction"
              and r["verdict"] == "interacts"]
    recipe = rep["strata"][0]["recipe"] if rep.get("strata") else {"keep": [],
                                                                     "safe_to_drop": []}
    open_ = "; ".join(f"{r['name'].split(' = ')[0]} ({r['waiting_on']})" if r.get("waiting_on")
                      else r["name"].split(" = ")[0] for r in by["inconclusive"]) or "-"
    lines = ["## In short", "",
             f"{len(mains)} tricks screened together on {rep['metric']} "
             f"({rep['direction']} is better); an effect is {rep['estimand']}.",
             f"- **Keep** (improves): {', '.join(map(_effect, by['improves'])) or '-'}",
             f"- **Drop** (harms): {', '.join(map(_effect, by['harms'])) or '-'}",
             "- **Shown not to matter** (no effect, or negligible: inside the margin): "
             + (", ".join(r["name"].split(" = ")[0] for r in by["no_effect"] + by["negligible"])
                or "-"),
             "- **Not tested** (inert: the trick hardly acted in the runs that set it): "
             + (", ".join(r["name"].split(" = ")[0] for r in by["inert"]) or "-"),
             "- **Aliased** (decided, but its column is also two-trick interactions; a "
             "fold-over, `design=foldover`, separates them): "
             + (", ".join(r["name"] for r in by["aliased"]) or "-"),
             "- **Interactions called**: " + (", ".join(
                 (", ".join(r["likely"]) + " (likely)") if r.get("likely") else r["name"]
                 for r in called) or "-"),
             f"- **Still open** (inconclusive): {open_}",
             f"- **Recipe**: keep {', '.join(recipe['keep']) or 'nothing'}; safe to drop "
             f"{', '.join(recipe['safe_to_drop']) or 'nothing'} (`grpo-ablate recipe` writes it, "
             "`grpo-ablate confirm` runs it against the baseline)"]
    missing = rep["runs_expected"] - rep["runs_used"]
    lines.append("- **Left out**: " + (f"{missing} of the design's {rep['runs_expected']} runs "
                                        f"(no {rep['metric']}: not run yet, or failed)"
                                        if missing else "nothing: every run of the design "
                                        "was used"))
    return lines + [""]
