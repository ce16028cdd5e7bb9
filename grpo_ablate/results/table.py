"""Results as one table, one row per run: `arm, seed, model, task, status` plus one column
per metric. Read from sweep folders of records or from a CSV (docs/contracts.md).

Everything the statistics could silently get wrong is settled here, once, at load: column
types (plain Python strings, not pyarrow-backed ones, which made every comparison slow),
status spelling, empty identity cells, non-finite metric values (missing, with a note) and
duplicated (arm, seed) rows (exact copies dropped with a note, conflicting ones refused).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_ablate.config.catalog import former_names, prior_of
from grpo_ablate.config.identity import computation_key
from grpo_ablate.config.review import recipe_departures
from grpo_ablate.errors import UserError
from grpo_ablate.records import TIMED_COST, scan_records
from grpo_ablate.results.csv_file import TEXT_COLUMNS, read_csv
from grpo_ablate.runtime import describe_machine
from grpo_ablate.stats.columns import ID_COLUMNS

# Where and how fast a run went, not what it computed: two records of one run may differ here.
TIMINGS = ("run_id", "sweep_dir", "curve_source", "wall_seconds", "budget/wall_seconds",
           "machine", "machine_id", *(f"budget/{k}" for k in TIMED_COST))
KEY = ["model", "task", "arm", "seed"]
# A record's per-prompt columns (records.RunRecord.prompts) -> the run metric they average to.
PROMPT_METRICS = {"greedy": "eval/accuracy", "sampled": "eval/sampled_accuracy",
                  "reward": "eval/reward_mean"}


def records_table(records) -> pd.DataFrame:
    rows = []
    for r in records:
        row = {"arm": r.arm, "seed": r.seed, "model": r.model, "task": r.task,
               "status": r.status, "run_id": r.run_id, "error": r.error,
               "sweep_dir": getattr(r, "source_dir", None),
               "config_key": computation_key(r.config) if r.config else None,
               "recipe_departures": "; ".join(recipe_departures(r.config)),
               "against": ((r.config or {}).get("trick") or {}).get("against"),
               "composed_of": "+".join(((r.config or {}).get("trick") or {}).get(
                   "composed_of") or []) or None,
               "prior": prior_of((r.config or {}).get("trick") or {}),
               "control": ((r.config or {}).get("trick") or {}).get("control"),
               "diagnostic_rules": ",".join(sorted({d["rule"] for d in r.diagnostics})),
               "wall_seconds": r.wall_seconds,
               "prompt_pool": (r.prompts or {}).get("pool", math.nan),
               "machine_id": (r.machine or {}).get("numeric_id"),
               "machine": describe_machine(r.machine) if r.machine else None}
        row.update({k: (math.nan if v is None else v) for k, v in r.metrics.items()})
        row.update({f"stability/{k}": (math.nan if v is None else v)
                    for k, v in r.stability.items()})
        row.update({f"budget/{k}": v for k, v in r.cost.items() if isinstance(v, int | float)})
        act = r.activity or {}
        row["activity"] = act.get("acted", math.nan)
        row["activity_measure"] = act.get("measure")
        row.update({f"activity/{k}": v for k, v in (act.get("details") or {}).items()})
        row.update({f"acted_by_key/{k}": v for k, v in (act.get("by_key") or {}).items()})
        row.update({f"values/{k}": v for k, v in (act.get("values") or {}).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def renamed_arms(df: pd.DataFrame) -> list[str]:
    """Records of a renamed trick written under its former name are reported under its name
    now (their run ids are the same), in place; one note."""
    renamed = former_names()
    found = sorted(set(df["arm"]) & set(renamed))
    df["arm"] = df["arm"].map(lambda a: renamed.get(a, a))
    if not found:
        return []
    return [f"records of {len(found)} renamed arm(s) are reported under their names now: "
            + ", ".join(f"{old} -> {renamed[old]}" for old in found)]


def prompt_rows(records) -> pd.DataFrame:
    """The per-prompt outcomes of the records that carry them, one row per (run, prompt):
    arm, seed, model, task, prompt, and the final evaluation's eval/accuracy (greedy
    correct), eval/sampled_accuracy (the share of its samples correct), eval/reward_mean."""
    frames = []
    for r in records:
        if r.prompts is None or r.status == "failed":
            continue
        cols = {"prompt": r.prompts["ids"]}
        cols.update({metric: r.prompts[name] for name, metric in PROMPT_METRICS.items()
                     if r.prompts.get(name) is not None})
        frame = pd.DataFrame(cols)
        frame.insert(0, "arm", r.arm)
        frame.insert(1, "seed", r.seed)
        frame.insert(2, "model", r.model)
        frame.insert(3, "task", r.task)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["arm", "seed", "model", "task", "prompt"])


def per_run_means(long: pd.DataFrame) -> pd.DataFrame:
    """A long CSV (one row per run and prompt, a `prompt` column): each run's metrics are
    its prompts' means."""
    keys = [c for c in ("arm", "seed", "model", "task", "status", *TEXT_COLUMNS)
            if c in long.columns]
    metrics = [c for c in long.columns if c not in keys and c != "prompt"
               and pd.api.types.is_numeric_dtype(long[c])]
    return long.groupby(keys, sort=False, as_index=False)[metrics].mean()


def load_results(paths: str | Path | list, with_prompts: bool = False,
                 lm_eval: bool = False, manifest: Path | None = None):
    """The table and its warnings (corrupt records by path, dropped duplicates), from one
    or more sweep folders, or one CSV, or (`lm_eval`) the harness's sample logs
    (results/lm_eval.py); with `with_prompts`, also the per-prompt outcomes (records that
    carry them, a CSV's rows when it has a `prompt` column, the harness's samples)."""
    paths = [Path(p) for p in (paths if isinstance(paths, list | tuple) else [paths])]
    prompts = None
    if lm_eval:
        from grpo_ablate.results.lm_eval import lm_eval_rows

        long, warnings = lm_eval_rows(paths, manifest)
        source = None
        if "step" in long.columns:  # checkpoints: the last is the run's final evaluation
            from grpo_ablate.results.curves import last_checkpoint

            long, source = last_checkpoint(long, paths, manifest)
        long, notes = checked_prompt_rows(long)
        df, warnings = per_run_means(long), warnings + notes
        if source:
            df["curve_source"] = source
        prompts = long.reset_index(drop=True)
    elif len(paths) == 1 and not paths[0].is_dir():
        df, warnings = read_csv(paths[0]), []
        if "step" in df.columns:  # a curve per run: the last values are the run's
            from grpo_ablate.results.curves import curve_csv

            df = curve_csv(df, str(paths[0]))
        elif "prompt" in df.columns:
            long, warnings = checked_prompt_rows(df)
            df = per_run_means(long)
            prompts = long[long["status"] != "failed"].reset_index(drop=True)
    else:
        records, warnings = [], []
        for path in paths:
            if not path.is_dir():
                raise UserError(f"{path}: not a sweep folder; allowed: sweep folders, or one CSV")
            found, problems = scan_records(path)
            records += found
            warnings += problems
        if not records:
            raise UserError(f"{', '.join(map(str, paths))}: no valid run records under "
                            "runs/*/record.json" + (f" ({len(warnings)} corrupt)" if warnings else ""))
        df = records_table(records)
        warnings += renamed_arms(df)
        prompts = prompt_rows(records)
        renamed_arms(prompts)
        prompts = prompts if len(prompts) else None
    df, notes = _normalise(df)
    return (df, warnings + notes, prompts) if with_prompts else (df, warnings + notes)


def checked_prompt_rows(long: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A long CSV's rows as the run means and the crossed test use them, and the notes: a
    non-finite value is missing (as in the run table); an exact copy of a row is kept once;
    two rows of one (model, task, arm, seed, prompt) with different values are refused, since
    the run mean would count the prompt twice and the crossed table average them."""
    long = long.copy()
    long["prompt"] = long["prompt"].map(str)
    notes = []
    metrics = [c for c in long.columns if c not in ID_COLUMNS and c != "prompt"
               and pd.api.types.is_float_dtype(long[c])]
    bad = int((~np.isfinite(long[metrics].to_numpy())
               & ~np.isnan(long[metrics].to_numpy())).sum()) if metrics else 0
    if bad:
        long[metrics] = long[metrics].where(np.isfinite(long[metrics].to_numpy()), np.nan)
        notes.append(f"{bad} non-finite per-prompt value(s) treated as missing: each leaves its "
                     "prompt out of that arm's crossed test")
    key = ["model", "task", "arm", "seed", "prompt"]
    dup = long.duplicated(key, keep=False)
    if dup.any():
        values = [c for c in long.columns if c not in key]
        conflicts = [k for k, g in long[dup].groupby(key, sort=True)
                     if len(g[values].astype(str).drop_duplicates()) > 1]
        if conflicts:
            names = "; ".join(f"arm={a} seed={s} prompt={q}" + ("" if (m, t) == ("-", "-")
                                                                 else f" ({m}/{t})")
                              for m, t, a, s, q in conflicts[:5])
            raise UserError(f"duplicate per-prompt rows with different results: {names}; "
                            "allowed: one row per (model, task, arm, seed, prompt)")
        copies = int(long.duplicated(key).sum())
        long = long.drop_duplicates(key, keep="first").reset_index(drop=True)
        notes.append(f"{copies} exact duplicate per-prompt row(s) dropped, kept once")
    return long, notes


def _normalise(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Non-finite metrics become NaN (missing, said in the comparison's notes); exact
    duplicate runs are dropped with a note; conflicting duplicates are refused."""
    notes = []
    for col in df.columns:
        if col not in ID_COLUMNS and pd.api.types.is_float_dtype(df[col]):
            df[col] = df[col].where(np.isfinite(df[col].to_numpy()), np.nan)
    for col in ("arm", "model", "task", "status"):
        df[col] = df[col].astype(object)
    df["seed"] = df["seed"].astype(int)
    dup = df.duplicated(KEY, keep=False)
    if dup.any():
        value_cols = [c for c in df.columns if c not in TIMINGS]
        groups = df[dup].groupby(KEY, sort=True)
        conflicts = [k for k, g in groups if len(g[value_cols].astype(str).drop_duplicates()) > 1]
        if conflicts and "config_key" in df.columns and \
                df[dup]["config_key"].dropna().nunique() > 1:
            raise UserError("the same arm and seed come from runs of different recipes; allowed: "
                            "one recipe per report (report those sweep folders separately)")
        if conflicts:
            names = "; ".join(f"arm={a} seed={s}" + ("" if (m, t) == ("-", "-") else f" ({m}/{t})")
                              for m, t, a, s in conflicts[:5])
            raise UserError(f"duplicate runs with different results: {names}; allowed: one run "
                            "per (model, task, arm, seed): remove or rename the extra rows")
        copies = [k for k, _ in groups]
        df = df.drop_duplicates(KEY, keep="first").reset_index(drop=True)
        notes.append(f"{len(copies)} exact duplicate run(s) dropped, kept once: " + "; ".join(
            f"arm={a} seed={s}" for _, _, a, s in copies[:5]))
    return df, notes


def machines_note(df: pd.DataFrame) -> str | None:
    """A warning when the runs were computed on more than one machine (numeric identity):
    each run is valid, but runs of one seed on two machines are not bitwise comparable, and
    an arm 'identical to the baseline' can differ there (docs/determinism.md)."""
    if "machine_id" not in df.columns:
        return None
    ran = df[df["status"] != "failed"].dropna(subset=["machine_id"])
    kinds = ran.groupby("machine_id")["machine"].first()
    if len(kinds) < 2:
        return None
    counts = ran["machine_id"].value_counts()
    where = "; ".join(f"{counts[m]} runs on {kinds[m]} [{m}]" for m in counts.index)
    return (f"the runs were computed on {len(kinds)} machines ({where}): the same config and seed "
            "give other numbers on another CPU or GPU, so matched seeds across machines are "
            "paired by seed but not bitwise comparable")
