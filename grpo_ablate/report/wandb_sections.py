"""The W&B report's panels read from the summary run (report/wandb_summary.py): a screening's
effects, design and plots, and the learning curves' ceiling-or-speed tables and figures.
Each takes wandb-workspaces' reports module (`wr`) so that importing this costs nothing."""

from __future__ import annotations

from pathlib import Path


def screening_blocks(wr, report: dict, summary_runset, figures: list[str]) -> list:
    """A screening's panels: its design line, the effects and design tables, the Pareto
    chart, the half-normal plot and each interaction plot (the summary run's)."""
    names = [Path(f).stem for f in figures]
    media = [wr.MediaBrowser(title=n.replace("screening_", "").replace("_", " "),
                             media_keys=[f"figures/{n}"]) for n in names]
    return [wr.P(f"Screening of {len(report['factors'])} tricks on {report['metric']} "
                 f"({report['direction']} is better): a resolution {report['resolution']} "
                 f"design of {len(report['points'])} points x {len(report['replicates'])} "
                 f"seed(s). Each effect is {report['estimand']}."),
            wr.H2("Effects"),
            wr.PanelGrid(runsets=[summary_runset],
                         panels=[wr.WeavePanelSummaryTable(table_name="effects"), *media]),
            wr.H2("Design"),
            wr.PanelGrid(runsets=[summary_runset],
                         panels=[wr.WeavePanelSummaryTable(table_name="design")])]


def curve_blocks(wr, report: dict, summary_runset, figures: list[str]) -> list:
    """The learning curves: the summary run's ceiling-or-speed table, its per-run fits, and
    the figure of each arm's runs and fitted curves beside the baseline's."""
    if not report.get("curves"):
        return []
    panels = [wr.WeavePanelSummaryTable(table_name="curves"),
              wr.WeavePanelSummaryTable(table_name="curve_fits")]
    drawn = [f"figures/{Path(f).stem}" for f in figures if f.startswith("ceiling_speed")]
    if drawn:
        panels.append(wr.MediaBrowser(title="fitted learning curves", media_keys=drawn))
    return [wr.H2("Ceiling or speed: the learning curves"),
            wr.PanelGrid(runsets=[summary_runset], panels=panels)]
