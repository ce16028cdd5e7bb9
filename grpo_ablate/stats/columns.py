"""The results table the statistics take: one row per run, `arm, seed, model, task, status`
plus one column per metric (grpo_ablate/results/table.py reads it from records or a CSV)."""

from __future__ import annotations

import pandas as pd

ID_COLUMNS = ("arm", "seed", "model", "task", "status")


def metric_columns(df: pd.DataFrame) -> list[str]:
    """Numeric columns a user could pick as --metric."""
    skip = set(ID_COLUMNS) | {"run_id", "error", "sweep_dir", "config_key", "diagnostic_rules",
                              "recipe_departures", "machine_id", "machine", "against", "prior",
                              "composed_of", "control",
                              "wall_seconds", "activity", "activity_measure", "prompt_pool"}
    return [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])
            and not c.startswith(("budget/", "activity/", "values/"))]
