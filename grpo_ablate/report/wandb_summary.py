"""The W&B summary run of a report: job_type `summary` in the sweep's group, with the verdict
table (`wandb.Table`, one row per trick and stratum), the report's figures (`wandb.Image`)
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


def log_summary(report: dict, out_dir: Path, figures: list[str], group: str,
                project: str = "grpo-ablate", entity: str | None = None,
                mode: str = "offline") -> str | None:
    """Write the summary run; returns its id, or None when W&B could not be used."""
    try:
        import wandb

        run = wandb.init(
            project=project, entity=entity, group=group, job_type="summary",
            name=f"{group}-summary", id=summary_run_id(out_dir), resume="allow", mode=mode,
            dir=str(out_dir), reinit="finish_previous",
            config={k: report[k] for k in ("metric", "direction", "alpha", "correction",
                                           "baseline", "min_effect", "inert_below")},
            settings=wandb.Settings(silent=True, init_timeout=60, console="off"))
        rows = verdict_rows(report)
        payload = {"verdicts": wandb.Table(columns=COLUMNS, data=rows)}
        payload.update({f"figures/{Path(f).stem}": wandb.Image(str(out_dir / "figures" / f))
                        for f in figures})
        run.log(payload)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row[10]] = counts.get(row[10], 0) + 1
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
