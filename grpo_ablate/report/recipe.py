"""The recommended recipe of a finished sweep as one trick file (`grpo-ablate recipe PATH`):
the baseline with every trick the report keeps (it improves) applied, and every component it
shows safe to drop removed where removing it is a trick of the catalog (an `<family>_off` arm:
`kl_off` doing nothing means the recipe runs without KL). Of two arms of one family the
better-supported is kept: an improving arm before a removal, then the smaller adjusted
p-value, then the larger effect."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from grpo_ablate.config.combination import Combination, combine
from grpo_ablate.errors import UserError

REPORT_NAME = "report.json"


def read_report(path: Path) -> dict:
    """A finished sweep's report.json (PATH: the sweep folder, or the file)."""
    path = Path(path)
    file = path / REPORT_NAME if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"{path}: no {REPORT_NAME}; allowed: a sweep folder with a report "
                        "(`grpo-ablate report PATH` writes one)")
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{file}: not a report ({exc.msg}); allowed: report.json as "
                        "`grpo-ablate report` writes it") from None


def recipe_name(sweep_dir: Path) -> str:
    return f"recipe_{Path(sweep_dir).resolve().name}"


def _order(arms: dict, names: list[str]) -> list[str]:
    """Best-supported first: the smaller adjusted p-value, then the larger |effect|."""
    def key(name: str) -> tuple[float, float]:
        a = arms.get(name) or {}
        p = a.get("p_adjusted")
        return (p if p is not None else 1.0, -abs(a.get("diff") or 0.0))
    return sorted(names, key=key)


def _why(arm: dict, verdict: str) -> str:
    p, diff = arm.get("p_adjusted"), arm.get("diff")
    figures = ", ".join(f for f in (f"adjusted p {p:.3g}" if p is not None else "",
                                    f"effect {diff:+.4f}" if diff is not None else "") if f)
    return f"{verdict}" + (f" ({figures})" if figures else "")


def recipe_of(report: dict, name: str, config_dirs: list[str] | None = None) -> Combination:
    """The recipe of a report's one stratum (one model and task) as a combined trick."""
    strata = report.get("strata") or []
    if len(strata) != 1:
        raise UserError(f"recipe: the report has {len(strata)} strata (model/task pairs); "
                        "allowed: a report of one model on one task")
    stratum = strata[0]
    arms = {a["arm"]: a for a in stratum["arms"]}
    recipe = stratum["recipe"]
    if recipe is None:
        raise UserError("recipe: the report's arms are methods, not tricks (--arms methods), "
                        "so it recommends no recipe; allowed: a report of trick arms")
    keep = _order(arms, list(recipe["keep"]))
    drop = _order(arms, [a for a in recipe["safe_to_drop"] if a.endswith("_off")])
    if not keep and not drop:
        raise UserError(
            f"recipe: nothing to keep or drop in this report (keep: none; safe to drop as a "
            f"removal: none of {', '.join(recipe['safe_to_drop']) or 'no arm'}); the recipe "
            "is the baseline, with nothing to confirm")
    why = {a: _why(arms[a], "improves" if a in keep else "safe to drop") for a in keep + drop}
    combined = combine(name, keep + drop, config_dirs, why_first=why)
    removed = [t for t in combined.tricks if t in drop]
    added = [t for t in combined.tricks if t in keep]
    changes = "baseline" + "".join(f" + {t}" for t in added) + (
        f", without what {', '.join(removed)} remove(s)" if removed else "")
    return replace(combined, changes=changes)


def recipe_comment(report: dict, sweep_dir: Path, combined: Combination) -> str:
    """The trick file's header: where the recipe came from and what was passed over."""
    stratum = report["strata"][0]
    lines = [f"The recommended recipe of the sweep {Path(sweep_dir).resolve()}",
             f"({stratum['model']} on {stratum['task']}, {report['metric']}, scope "
             f"{report.get('scope', 'task')}), composed by `grpo-ablate recipe`.",
             f"Tricks: {', '.join(combined.tricks)}."]
    lines += [f"{arm} not applied: {kept} sets the same family and is better supported "
              f"({why})." for arm, kept, why in combined.passed_over]
    lines.append("A prediction from single-trick verdicts: `grpo-ablate confirm PATH` runs it "
                 "against the baseline.")
    return "\n".join(lines)
