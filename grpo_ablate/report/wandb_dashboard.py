"""The W&B dashboard of a sweep, built with wandb-workspaces: a Report titled after the sweep
(the design in a line, the verdict table and forest plot from the summary run, the
ceiling-or-speed tables and fitted curves where the runs have learning curves, one panel grid
per stratum over the sweep's runs grouped by arm: the primary metric against
`train/global_step` as a mean line with a stderr band, KL, entropy, completion length and
grad norm, and a bar of each arm's final metric with its spread; then what each open arm
waits on), and a project Workspace with the same grouping.

Offline (the default) the report's spec is written beside report.json as `wandb_report.json`:
the exact model `Report.save()` sends, and `wandb_workspace.json` for the workspace.
`grpo-ablate report PATH --wandb-publish` saves both later from an online machine; the
report's id is then written back into the spec, so a later re-run of the report (or another
publish) updates the same W&B report instead of creating a second one. A panel plots only
keys that the sweep's runs logged (read from their histories), and no failure of W&B ever
fails the report: a problem is one warning line.

wandb-workspaces' private names (`_to_model`, `_from_model`, the `internal` pydantic models)
are used here and nowhere else; tests/test_report_wandb_dashboard.py fails when they move.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ablate.records import atomic_write_text, read_history, scan_records
from grpo_ablate.report.wandb_sections import curve_blocks, screening_blocks
from grpo_ablate.runtime import wandb_run_id

SPEC_FILE = "wandb_report.json"
WORKSPACE_FILE = "wandb_workspace.json"
log = logging.getLogger(__name__)
STEP = "train/global_step"
ARM = "JobType"  # every run of an arm carries job_type = the arm (training/wandb_logger.py)
# The run curves beside the primary metric, as the per-run logger names them.
CURVES = (("KL to the reference", "train/kl"), ("entropy", "train/entropy"),
          ("completion length", "train/completions/mean_length"),
          ("grad norm", "train/grad_norm"))


@dataclass(frozen=True)
class SweepRuns:
    """The W&B runs behind a report: their group, project, ids and the keys they logged."""

    group: str
    project: str
    entity: str
    run_ids: tuple[str, ...] = ()
    strata: tuple[tuple[str, str], ...] = ()  # (model, task)
    logged: frozenset[str] = field(default_factory=frozenset)


def logged_name(key: str) -> str:
    """The W&B key of a history key: train rows are logged under train/, eval rows as named."""
    return key if key.startswith(("eval/", "raw/")) else f"train/{key}"


def sweep_runs(paths: list[Path], group: str, project: str, entity: str | None) -> SweepRuns:
    """The W&B runs the sweep folders' records were logged to (logger=wandb), and every key
    with a finite value in their histories."""
    ids, strata, logged, groups, projects, entities = [], [], set(), set(), set(), set()
    for path in paths:
        if not Path(path).is_dir():
            continue  # a CSV: no W&B runs behind it
        records, _ = scan_records(Path(path))
        for record in records:
            lg = (record.config or {}).get("logger") or {}
            if lg.get("backend") != "wandb" or lg.get("mode") == "disabled":
                continue
            ids.append(wandb_run_id(record.run_id, record.source_dir))
            groups.add(record.config.get("sweep_name") or group)
            projects.add(lg.get("project") or project)
            entities.add(lg.get("entity") or "")
            if (record.model, record.task) not in strata:
                strata.append((record.model, record.task))
            for row in read_history(Path(record.source_dir) / "runs" / record.run_id):
                logged |= {logged_name(k) for k, v in row.items() if k != "step"
                           and isinstance(v, int | float) and math.isfinite(v)}
            logged |= {k for k, v in record.metrics.items()
                       if isinstance(v, int | float) and math.isfinite(v)}
    return SweepRuns(group=_one(groups, group), project=_one(projects, project),
                     entity=entity or _one(entities, ""), run_ids=tuple(sorted(ids)),
                     strata=tuple(strata), logged=frozenset(logged))


def _one(values: set, default: str) -> str:
    """The value all records share, else the report's own."""
    return next(iter(values)) if len(values) == 1 else default


# --------------------------------------------------------------------------- building
def design_line(report: dict) -> str:
    arms = {a["arm"] for st in report["strata"] for a in st["arms"]}
    seeds = sorted({a["n"] for st in report["strata"] for a in st["arms"]}) or [0]
    n = f"{seeds[0]}" if seeds[0] == seeds[-1] else f"{seeds[0]}-{seeds[-1]}"
    return (f"Metric {report['metric']} ({report['direction']} is better); {len(arms)} arms, "
            f"each against arm {report['baseline']} over {n} seeds; alpha {report['alpha']}, "
            f"{report['correction'].upper()} correction, min-effect ±{report['min_effect']}, "
            f"inert below {report['inert_below']:.0%} activity.")


def _runset(wr, name: str, filters: str, groupby: list[str] | None = None):
    # Offline the runset names neither entity nor project: wandb-workspaces would look the
    # project's id up over the network while serialising. Publishing fills them in.
    return wr.Runset(name=name, filters=filters, groupby=groupby or [])


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "\\'") + "'"


def stratum_grid(wr, report: dict, runs: SweepRuns, model: str, task: str):
    """One stratum's runs, grouped by arm: the metric's curve and final bar, and the
    stability curves the runs logged."""
    metric = report["metric"]
    where = (f"Group = {_quote(runs.group)} and JobType != 'summary' and "
             f"Config('model.name') = {_quote(model)} and Config('task.name') = {_quote(task)}")
    grouped = {"groupby": ARM, "groupby_aggfunc": "mean", "groupby_rangefunc": "stderr"}
    panels = []
    if metric in runs.logged:
        panels.append(wr.LinePlot(title=f"{metric} (mean ± stderr per arm)", x=STEP, y=[metric],
                                  **grouped))
        panels.append(wr.BarPlot(title=f"final {metric} per arm (mean ± std)", metrics=[metric],
                                 orientation="h", groupby=ARM, groupby_aggfunc="mean",
                                 groupby_rangefunc="stddev"))
    panels += [wr.LinePlot(title=title, x=STEP, y=[key], **grouped)
               for title, key in CURVES if key in runs.logged]
    return wr.PanelGrid(runsets=[_runset(wr, f"{model} / {task}", where, [ARM])],
                        panels=panels)


def waiting_lines(report: dict) -> list[str]:
    """One line per open arm of every stratum: what would settle it."""
    return [f"{st['model']} / {st['task']} / {a['arm']}: {a['waiting_on']['text']}"
            for st in report["strata"] for a in st["arms"] if a.get("waiting_on")]


def dashboard_report(report: dict, runs: SweepRuns, summary_id: str | None, figures: list[str]):
    """The wandb-workspaces Report for one sweep's report (no network)."""
    import wandb_workspaces.reports.v2 as wr

    summary = (f"Group = {_quote(runs.group)} and JobType = 'summary'"
               + (f" and ID = {_quote(summary_id)}" if summary_id else ""))
    if report.get("kind") == "screening":
        blocks = screening_blocks(wr, report, _runset(wr, "summary", summary), figures)
    else:
        verdict_panels = [wr.WeavePanelSummaryTable(table_name="verdicts")]
        if "forest.png" in figures:
            verdict_panels.append(wr.MediaBrowser(title="forest plot",
                                                  media_keys=["figures/forest"]))
        blocks = [wr.P(design_line(report)),
                  wr.H2("Verdicts"),
                  wr.PanelGrid(runsets=[_runset(wr, "summary", summary)],
                               panels=verdict_panels)]
        blocks += curve_blocks(wr, report, _runset(wr, "summary", summary), figures)
    for model, task in runs.strata:
        blocks += [wr.H2(f"Runs: {model} / {task}"), stratum_grid(wr, report, runs, model, task)]
    if not runs.strata:
        blocks.append(wr.P("No run of this report was logged to W&B (logger=wandb): only the "
                           "summary run's verdicts and figures are shown."))
    waiting = waiting_lines(report) if report.get("kind") != "screening" else [
        f"{e['name']}: {e['waiting_on']}" for e in report["effects"] if e["waiting_on"]]
    blocks += [wr.H2("Open arms: what each is waiting on"),
               wr.UnorderedList(items=waiting) if waiting else wr.P("Every arm is decided.")]
    blocks += [wr.H3("Built from"),
               wr.P(f"summary run {summary_id or '-'}; {len(runs.run_ids)} runs: "
                    + (", ".join(runs.run_ids) or "-"))]
    return wr.Report(entity=runs.entity, project=runs.project, title=f"grpo-ablate: {runs.group}",
                     description=f"grpo-ablate sweep {runs.group}", blocks=blocks)


def build_workspace(report: dict, runs: SweepRuns):
    """The project's workspace view: the sweep's runs grouped by arm, the same curves."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces import expr

    metric = report["metric"]
    grouped = {"groupby": ARM, "groupby_aggfunc": "mean", "groupby_rangefunc": "stderr"}
    panels = [wr.LinePlot(title=metric, x=STEP, y=[metric], **grouped)] \
        if metric in runs.logged else []
    panels += [wr.LinePlot(title=title, x=STEP, y=[key], **grouped)
               for title, key in CURVES if key in runs.logged]
    return ws.Workspace(
        entity=runs.entity, project=runs.project, name=f"grpo-ablate: {runs.group}",
        sections=[ws.Section(name=f"sweep {runs.group}", panels=panels, is_open=True)],
        runset_settings=ws.RunsetSettings(filters=f"Group = {_quote(runs.group)}",
                                          groupby=[expr.Metric(ARM)]))


# --------------------------------------------------------------------------- the private API
def view_spec(built) -> str:
    """The JSON `Report.save()` or `Workspace.save()` sends (its `_to_model()` dumped by
    alias)."""
    return built._to_model().model_dump_json(by_alias=True, exclude_none=True)


def report_from_spec(text: str):
    import wandb_workspaces.reports.v2 as wr
    from wandb_workspaces.reports.v2 import internal

    return wr.Report._from_model(internal.ReportViewspec.model_validate_json(text))


def workspace_from_spec(text: str):
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.workspaces import internal

    return ws.Workspace._from_model(internal.View.model_validate_json(text))


def _runsets(built):
    for block in built.blocks:
        yield from getattr(block, "runsets", None) or []


# --------------------------------------------------------------------------- entry points
def write_dashboard(report: dict, out_dir: Path, paths: list[Path], group: str, project: str,
                    entity: str | None, summary_id: str | None, figures: list[str],
                    online: bool) -> Path | None:
    """Write wandb_report.json (and the workspace's spec) beside report.json, keeping the
    id of a report published before; online, also save both and print their URLs."""
    try:
        runs = sweep_runs(paths, group, project, entity)
        built = dashboard_report(report, runs, summary_id, figures)
        spec_path = Path(out_dir) / SPEC_FILE
        if spec_path.is_file():  # published before: keep its id so a save updates it
            try:
                built.id = json.loads(spec_path.read_text()).get("id") or ""
            except (OSError, ValueError):
                pass
        atomic_write_text(spec_path, view_spec(built) + "\n")
        workspace = build_workspace(report, runs)
        atomic_write_text(Path(out_dir) / WORKSPACE_FILE, view_spec(workspace) + "\n")
        print(f"W&B report spec: {spec_path} (grpo-ablate report {out_dir} --wandb-publish "
              "saves it)")
    except Exception as exc:  # noqa: BLE001 - W&B must never stop the report
        log.warning("W&B report spec not written (%s)", exc)
        return None
    if online:
        publish(Path(out_dir))
    return spec_path


def publish(out_dir: Path) -> bool:
    """Save the report and workspace specs written offline (entity and project filled in
    from the login when the spec leaves them empty), print their URLs and keep the report's
    id in its spec. One warning line and False on any failure; the specs are then untouched."""
    spec_path = Path(out_dir) / SPEC_FILE
    try:
        text = spec_path.read_text()
    except OSError as exc:
        log.warning("W&B report not published: %s (run the report with --wandb first)", exc)
        return False
    try:
        _check_reachable()
        built = report_from_spec(text)
        ws_path = Path(out_dir) / WORKSPACE_FILE
        workspace = workspace_from_spec(ws_path.read_text()) if ws_path.is_file() else None
        entity = built.entity or _default_entity()
        built.entity = entity
        for runset in _runsets(built):
            runset.entity, runset.project = entity, built.project
        built.save()
        url = built.url
        if workspace is not None:
            workspace.entity = workspace.entity or entity
            workspace.save()
        updated = json.loads(text)
        updated["id"] = built.id
        atomic_write_text(spec_path, json.dumps(updated) + "\n")
        print(f"W&B report: {url}")
        if workspace is not None:
            print(f"W&B workspace: {workspace.url}")
        return True
    except Exception as exc:  # noqa: BLE001 - W&B must never stop the report
        log.warning("W&B report not published (%s); the spec in %s is unchanged",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__, spec_path)
        return False


def _check_reachable(timeout_s: float = 10.0) -> None:
    """Fail fast where the W&B server cannot be reached: the client itself retries for
    minutes on a machine without network."""
    import os
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"{url.scheme}://{url.netloc} cannot be reached ({exc})") from None


def _default_entity() -> str:
    import wandb

    return wandb.Api(timeout=20).default_entity
