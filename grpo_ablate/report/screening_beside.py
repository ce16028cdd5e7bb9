"""A screening's verdicts beside a one-at-a-time sweep's of the same recipe (`grpo-ablate
report PATH --beside OVAT_SWEEP`): each trick's two verdicts, and the interactions called
that involve it (what can make them differ)."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablate.errors import UserError


def ovat_verdicts(path: Path, metric: str) -> dict[str, str]:
    """trick -> verdict on `metric`, from an OVAT sweep's report.json."""
    file = path / "report.json" if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"--beside {path}: no report.json; allowed: a reported sweep folder")
    rep = json.loads(file.read_text())
    if rep.get("kind") == "screening" or rep.get("metric") != metric:
        raise UserError(f"--beside {path}: not a one-at-a-time report on {metric}")
    out: dict[str, str] = {}
    for st in rep.get("strata", []):
        for arm in st.get("arms", []):
            out.setdefault(arm["arm"], arm["verdict"])
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
        rows.append({"trick": name, "ovat": ovat.get(name, "-"),
                     "screening": mains[name]["verdict"] if name in mains else "-",
                     "explains": "; ".join(involved) or "-"})
    return {"path": str(path), "rows": rows}
