"""The W&B summary run of a report: job_type `summary` in the sweep's group, with the verdict
table (`wandb.Table`, one row per trick and stratum; a screening's effects and design
tables; with learning curves, each arm's ceiling-or-speed verdicts and each run's fit), the
report's figures (`wandb.Image`: a screening's Pareto, half-normal and
interaction plots)
and report.md / report.json as an artifact. Its id is fixed by the report's folder, so a
re-run of the report updates the same run instead of adding another. Like every W&B call
here it never fails the report: a problem is one warning line."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

log = logging.getLogger(__name__)
COLUMNS = ["model", "task", "arm", "n", "mean", "std", "diff", "ci_low", "ci_high", "p_adjusted",
           "verdict", "waiting_on", "seeds_needed", "acted"]


def summary_run_id(out_dir: Path) -> str:
    return "summary-" + hashlib.sha256(str(Path(out_dir).resolve()).encode()).hexdigest()[:12]


def verdict_rows(report: dict) -> list[list]:
    rows = []
    for st in report["strata"]:
        for a in st["arms"]:
            acted = (a.get("activity") or {}).get("acted")
            rows.append([st["model"], st["task"], a["arm"], a["n"], a["mean"], a["std"], a["diff"],
                         a["ci_low"], a["ci_high"], a["p_adjusted"], a["verdict"],
                         (a.get("waiting_on") or {}).get("on"), a["seeds_needed"], acted])
    return rows


EFFECT_COLUMNS = ["effect", "kind", "estimate", "ci_low", "ci_high", "p_adjusted",
                  "tost_p_adjusted", "mde", "verdict", "waiting_on"]


CURVE_COLUMNS = ["model", "task", "arm", "ceiling_diff", "ceiling_ci_low", "ceiling_ci_high",
                 "ceiling_verdict", "midpoint_ratio", "midpoint_ratio_ci_low",
                 "midpoint_ratio_ci_high", "speed_verdict", "in_words"]
FIT_COLUMNS = ["model", "task", "arm", "seed", "start", "asymptote", "asymptote_se",
               "log10_midpoint", "exponent", "auc", "identifiable", "reason"]


def curve_tables(curves: dict | None) -> dict[str, tuple[list[str], list[list]]]:
    """The learning-curve section as two tables: per arm its ceiling and speed (C_mid as a
    ratio to the baseline's), per run its fit (null where the curve does not show its
    ceiling, with the reason)."""
    if not curves:
        return {}
    verdicts = []
    for st in curves["strata"]:
        for row in st["arms"]:
            c, s = row["ceiling"], row["speed"]
            ratio = [10 ** v if v is not None else None
                     for v in (s.get("diff"), *(s.get("ci") or [None, None]))]
            verdicts.append([st["model"], st["task"], row["arm"], c.get("diff"),
                             *(c.get("ci") or [None, None]), c["verdict"], *ratio,
                             s["verdict"], row["words"]])
    fits = [[r.get(k) for k in FIT_COLUMNS] for r in curves["runs"]]
    return {"curves": (CURVE_COLUMNS, verdicts), "curve_fits": (FIT_COLUMNS, fits)}


def tables_of(report: dict) -> tuple[dict[str, tuple[list[str], list[list]]], list[str], dict]:
    """(tables by name, the verdict of each row counted, the run's config) of a report: a
    one-at-a-time report's verdict table, or a screening's effects and design tables."""
    if report.get("kind") != "screening":
        rows = verdict_rows(report)
        return ({"verdicts": (COLUMNS, rows), **curve_tables(report.get("curves"))},
                [r[10] for r in rows],
                {k: report[k] for k in ("metric", "direction", "alpha", "correction",
                                        "baseline", "min_effect", "inert_below")})
    effects = [[e["name"], e["kind"], e["effect"], e["ci"][0], e["ci"][1], e["p_adjusted"],
                e["tost_p_adjusted"], e["mde"], e["verdict"], e["waiting_on"]]
               for e in report["effects"]]
    design = [[p, *row] for p, row in zip(report["points"], report["design"], strict=True)]
    return ({"effects": (EFFECT_COLUMNS, effects),
             "design": (["point", *report["factors"]], design)},
            [e["verdict"] for e in report["effects"]],
            {k: report[k] for k in ("metric", "direction", "alpha", "min_effect", "resolution",
                                    "drawn_by", "error", "estimand")})


def log_summary(report: dict, out_dir: Path, figures: list[str], group: str,
                project: str = "grpo-ablate", entity: str | None = None,
                mode: str = "offline") -> str | None:
    """Write the summary run; returns its id, or None when W&B could not be used."""
    try:
        import wandb

        tables, verdicts, config = tables_of(report)
        run = wandb.init(
            project=project, entity=entity, group=group, job_type="summary",
            name=f"{group}-summary", id=summary_run_id(out_dir), resume="allow", mode=mode,
            dir=str(out_dir), reinit="finish_previous",
            config=config, settings=wandb.Settings(silent=True, init_timeout=60,
                                                   console="off"))
        payload = {name: wandb.Table(columns=cols, data=rows)
                   for name, (cols, rows) in tables.items()}
        payload.update({f"figures/{Path(f).stem}": wandb.Image(str(out_dir / "figures" / f))
                        for f in figures})
        run.log(payload)
        counts: dict[str, int] = {}
        for verdict in verdicts:
            counts[verdict] = counts.get(verdict, 0) + 1
        run.summary.update({f"verdicts/{v}": n for v, n in counts.items()})
        artifact = wandb.Artifact(f"report-{group}", type="report")
        for name in ("report.md", "report.json"):
            artifact.add_file(str(out_dir / name))
        run.log_artifact(artifact)
        run.finish()
        return run.id
    except Exception as exc:  # noqa: BLE001 - W&B must never stop the report
        log.warning("W&B summary run not written (%s)", exc)
        return None
