"""How the results were made, decided once from where they come from and what the user says:
whether run s of one arm shares anything with run s of another (`runs`), which question the
prompts support (`scope`), and whether the arms are tricks or competing methods (`arms`).

grpo-ablate's own records are matched by construction (seed s gives every arm the same data
order and held-out prompts) and know their task's prompt pool. A CSV says nothing of the
sort unless it says so: any converter numbers runs 1..n in every arm, so its runs are
independent unless `--runs matched`, a `design` column or grpo-ablate's own run ids say
otherwise; its prompts are the fixed set unless `--scope task` or a pool (`--prompts-pool`,
a `prompt_pool` column) says they are a sample (docs/contracts.md, "What a CSV says about
itself").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from grpo_ablate.errors import UserError

RUNS = ("matched", "independent")
ARMS = ("tricks", "methods")
RUN_ID = re.compile(r"^[0-9a-f]{16}$")  # grpo-ablate's run ids (config/identity.py)


@dataclass(frozen=True)
class Provenance:
    runs: str
    runs_reason: str
    scope: str
    scope_reason: str
    arms: str
    arms_reason: str

    def as_dict(self) -> dict:
        return {"runs": self.runs, "runs_reason": self.runs_reason, "scope": self.scope,
                "scope_reason": self.scope_reason, "arms": self.arms,
                "arms_reason": self.arms_reason}


def declared_design(df: pd.DataFrame) -> str | None:
    """A CSV's `design` column: one value, matched or independent (any case); None without."""
    if "design" not in df.columns:
        return None
    values = {str(v).strip().lower() for v in df["design"] if str(v).strip()}
    if not values:
        return None
    if len(values) > 1 or not values <= set(RUNS):
        raise UserError(f"column design holds {', '.join(sorted(values))}; allowed: one value "
                        f"for the whole file, {' or '.join(RUNS)}")
    return values.pop()


def own_run_ids(df: pd.DataFrame) -> bool:
    """Every row carries a grpo-ablate run id (16 hex digits), one per run."""
    if "run_id" not in df.columns or not len(df):
        return False
    ids = df["run_id"].map(lambda v: str(v).strip())
    return bool(ids.map(lambda v: bool(RUN_ID.match(v))).all())


def decide_runs(df: pd.DataFrame, from_records: bool, asked: str | None) -> tuple[str, str]:
    if asked:
        return asked, f"as `--runs {asked}` says"
    if from_records:
        return "matched", ("grpo-ablate's records: seed s gives every arm the same data order "
                           "and held-out prompts")
    design = declared_design(df)
    if design:
        return design, f"as the CSV's `design` column says ({design})"
    if own_run_ids(df):
        return "matched", "the rows carry grpo-ablate's run ids: seed s is the same data in every arm"
    return "independent", ("a CSV that does not say how its runs were made: runs numbered alike "
                           "in two arms are not assumed to share anything (`--runs matched`, "
                           "or a `design` column, if seed s gave every arm the same data)")


def decide_scope(df: pd.DataFrame, from_records: bool, asked: str | None,
                 pool: int | None) -> tuple[str, str]:
    if asked:
        return asked, f"as `--scope {asked}` says"
    if from_records:
        return "task", "grpo-ablate's records: the held-out prompts are a sample of the task's data"
    has_pool = pool is not None or ("prompt_pool" in df.columns and df["prompt_pool"].notna().any())
    if has_pool:
        return "task", ("the CSV declares a prompt pool: its prompts are a sample of it, and the "
                        "verdicts speak for the pool")
    return "prompts", ("a CSV's prompts are taken as the fixed set they are (a benchmark's "
                       "tasks): the verdicts speak for them (`--scope task`, or a prompt pool, "
                       "if they are a sample of a larger pool)")


def decide_arms(arms: list[str], baseline: str, from_records: bool, asked: str | None,
                trick_names: set[str]) -> tuple[str, str]:
    if asked:
        return asked, f"as `--arms {asked}` says"
    if from_records:
        return "tricks", "grpo-ablate's records: each arm is a trick file"
    others = [a for a in arms if a != baseline]
    strangers = [a for a in others if a not in trick_names]
    if others and not strangers:
        return "tricks", "every arm is named after a trick file"
    return "methods", (f"arms that are not trick files ({', '.join(strangers[:4])}"
                       f"{', ...' if len(strangers) > 4 else ''}): a comparison of methods, "
                       "without a recommended recipe (`--arms tricks` for one)")


def provenance(df: pd.DataFrame, from_records: bool, baseline: str, runs: str | None = None,
               scope: str | None = None, pool: int | None = None, arms: str | None = None,
               trick_names: set[str] | None = None) -> Provenance:
    """What the report may assume of these results, and why (each reason is a sentence)."""
    r, r_why = decide_runs(df, from_records, runs)
    s, s_why = decide_scope(df, from_records, scope, pool)
    names = trick_names if trick_names is not None else set()
    a, a_why = decide_arms(list(dict.fromkeys(df["arm"])), baseline, from_records, arms, names)
    return Provenance(r, r_why, s, s_why, a, a_why)


def with_pool(df: pd.DataFrame, pool: int | None) -> pd.DataFrame:
    """`--prompts-pool N`: the prompts that exist, on every run (the smaller where a record
    or the CSV's `prompt_pool` column says less)."""
    if pool is None:
        return df
    known = df["prompt_pool"] if "prompt_pool" in df.columns else pd.Series(float("nan"), df.index)
    return df.assign(prompt_pool=known.fillna(pool).clip(upper=pool))
