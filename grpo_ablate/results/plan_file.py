"""An adaptive sweep's plan file, `<sweep>/adaptive_plan.json`: declared before the first run
and fixed afterwards (a ladder redesigned after looking at results would void its error
rates). The sweep writes it; the report reads it to take the verdicts from the looks."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from grpo_ablate.config.catalog import former_names
from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text
from grpo_ablate.stats.sequential import Design

PLAN_NAME = "adaptive_plan.json"
BASELINE = "baseline"


def plan_json(design: Design) -> dict:
    return {"design": asdict(design), "baseline": BASELINE,
            "looks": design.table(len(design.arms)),
            "rules": "efficacy: t-test (under scope task, crossed over seeds and held-out "
                     "prompts) p < the look's boundary (O'Brien-Fleming-type spending, "
                     "Holm across arms, sequentially rejective); no_effect: TOST p < the "
                     "boundary at alpha/arms; futility (non-binding): conditional power under "
                     "the current trend < design.futility; boundaries shown at alpha/arms"}


def write_plan(sweep_dir: Path, design: Design) -> dict:
    """Declare the plan, or check that this command asks for the one already declared."""
    path = Path(sweep_dir) / PLAN_NAME
    return declare_once(path, plan_json(design), lambda: read_plan(sweep_dir), design,
                        lambda have: (
        f"adaptive: {path} declares rungs {list(have.rungs)}, alpha {have.alpha}, "
        f"futility {have.futility}, {len(have.arms)} arms on {have.metric}, scope "
        f"{have.scope}; this command asks for rungs {list(design.rungs)}, alpha "
        f"{design.alpha}, futility {design.futility}, {len(design.arms)} arms on "
        f"{design.metric}, scope {design.scope}; allowed: the "
        "declared plan (a ladder is fixed before its first run), or a new sweep_name"))


def declare_once(path: Path, body: dict, read: Callable[[], Any], asked: Any,
                 refusal: Callable[[Any], str]) -> dict:
    """A sweep's plan written before its first run; once written, a command must ask for the
    same plan (its arms in any order), else `refusal(declared)` is the one-line error."""
    if path.is_file():
        have = read()
        if replace(have, arms=tuple(sorted(have.arms))) != \
                replace(asked, arms=tuple(sorted(asked.arms))):
            raise UserError(refusal(have))
        return body
    atomic_write_text(path, json.dumps(body, indent=1) + "\n")
    return body


def read_plan(sweep_dir: Path) -> Design | None:
    path = Path(sweep_dir) / PLAN_NAME
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())["design"]
        renamed = former_names()  # a plan declared under a trick's former name
        return Design(rungs=tuple(d["rungs"]), alpha=d["alpha"], min_effect=d["min_effect"],
                      futility=d["futility"], metric=d["metric"],
                      arms=tuple(renamed.get(a, a) for a in d["arms"]),
                      # A plan declared before scopes existed: its looks are replayed from
                      # records without per-prompt outcomes, seeds alone either way.
                      scope=d.get("scope", "task"))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a readable adaptive plan ({exc}); allowed: the file "
                        "`grpo-ablate sweep adaptive=true` wrote") from None
