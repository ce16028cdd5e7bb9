"""A screening's verdicts beside a one-at-a-time sweep's of the same recipe (`grpo-ablate
report PATH --beside OVAT_SWEEP`): each trick's two verdicts and two effect sizes (OVAT's
difference from the baseline; the screening's effect of switching it on, averaged over the
design's other tricks), and the interactions called that involve it (what can make them
differ)."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablate.errors import UserError


def ovat_verdicts(path: Path, metric: str) -> dict[str, dict]:
    """trick -> its row on `metric` (verdict, diff, ci_low, ci_high), from an OVAT sweep's
    report.json."""
    file = path / "report.json" if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"--beside {path}: no report.json; allowed: a reported sweep folder")
    rep = json.loads(file.read_text())
    if rep.get("kind") == "screening" or rep.get("metric") != metric:
        raise UserError(f"--beside {path}: not a one-at-a-time report on {metric}")
    out: dict[str, dict] = {}
    for st in rep.get("strata", []):
        for arm in st.get("arms", []):
            out.setdefault(arm["arm"], {k: arm.get(k) for k in
                                        ("verdict", "diff", "ci_low", "ci_high")})
    return out


def beside(rep: dict, path: Path) -> dict:
    """Each factor's OVAT verdict beside its screening one, and the significant
    interactions that involve it (what can make them differ)."""
    ovat = ovat_verdicts(path, rep["metric"])
    mains = {r["name"].split(" = ")[0]: r for r in rep["effects"] if r["kind"] == "main"}
    inter = [r for r in rep["effects"] if r["kind"] == "interaction"
             and r["verdict"] == "interacts"]
    rows = []
    for name in rep["factors"]:
        involved = [(", ".join(r["likely"]) + " (likely)" if r["likely"] else r["name"])
                    for r in inter if name in r["name"].split(" ")
                    and (not r["likely"] or any(name in t.split(" x ") for t in r["likely"]))]
        one = ovat.get(name) or {}
        main = mains.get(name)
        rows.append({"trick": name, "ovat": one.get("verdict", "-"),
                     "ovat_diff": one.get("diff"),
                     "ovat_ci": [one.get("ci_low"), one.get("ci_high")],
                     "screening": main["verdict"] if main else "-",
                     "screening_effect": main["effect"] if main else None,
                     "screening_ci": list(main["ci"]) if main else [None, None],
                     "explains": "; ".join(involved) or "-"})
    return {"path": str(path), "rows": rows}


def render_beside(beside: dict | None) -> list[str]:
    """The markdown section (`--beside`)."""
    if not beside:
        return []
    lines = ["", "## Beside the one-at-a-time sweep", "",
             f"OVAT verdicts from {beside['path']} (each trick on the baseline: its "
             "difference from it); the screening's effect is switching the trick on, averaged "
             "over the design's other tricks.",
             "", "| trick | OVAT: diff [95% CI] | verdict | screening: effect [95% CI] | "
             "verdict | interactions that may explain a difference |",
             "|---|---|---|---|---|---|"]
    for row in beside["rows"]:
        lines.append(f"| {row['trick']} | {sized(row['ovat_diff'], row['ovat_ci'])} | "
                     f"{row['ovat']} | {sized(row['screening_effect'], row['screening_ci'])}"
                     f" | {row['screening']} | {row['explains']} |")
    return lines


def sized(value: float | None, ci: list) -> str:
    """An effect with its interval, or '-' where there is none."""
    if value is None:
        return "-"
    if any(c is None for c in ci):
        return f"{value:+.3g}"
    return f"{value:+.3g} [{ci[0]:+.3g}, {ci[1]:+.3g}]"
