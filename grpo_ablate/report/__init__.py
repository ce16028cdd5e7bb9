"""The report stage: report.md (read top to bottom), report.json (the contract in
docs/contracts.md) and figures/*.png, from a sweep folder or a CSV."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text, jsonable
from grpo_ablate.report.controls import arm_controls, arm_duplicates
from grpo_ablate.report.markdown import render_markdown
from grpo_ablate.report.settings import ReportSettings, parse_min_effect
from grpo_ablate.report.summary import console_summary, contradictions, terminal_lines
from grpo_ablate.results.early_stop import read_stop_plan, with_looks
from grpo_ablate.results.plan_file import read_plan
from grpo_ablate.results.provenance import provenance, with_pool
from grpo_ablate.results.table import load_results, machines_note
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.errors import ResultsError, SettingError

SECONDARY = ["eval/reward_mean", "eval/sampled_accuracy", "eval/sampled_accuracy_train_temp"]


def glob_magic(path: str) -> bool:
    import glob

    return not Path(path).exists() and glob.has_magic(path)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, via UserError
        raise UserError(f"report: {message}")


def parse_args(args: list[str]) -> tuple[list[str], ReportSettings, bool]:
    """The command line: the paths, the report's settings, and whether it only publishes."""
    ns = report_parser().parse_args(args)
    return settings_of(ns)


def report_parser() -> argparse.ArgumentParser:
    """`grpo-ablate report`'s flags (docs/contracts.md's table is generated from them)."""
    d = ReportSettings()
    p = _Parser(prog="grpo-ablate report", add_help=True)
    p.add_argument("path", nargs="*", help="sweep folder(s), or one CSV, or (--from lm-eval) "
                   "the folders lm-evaluation-harness wrote")
    p.add_argument("--design", default=None, metavar="CSV",
                   help="a two-level experiment's table (a column per factor, -1/+1, -/+ or "
                        "off/on; optional block or seed; the --metric column): its screening "
                        "report")
    p.add_argument("--factors", default=None, metavar="A,B,...",
                   help="with --design: the factor columns (default: every column but the "
                        "metric and the block)")
    p.add_argument("--from", dest="source", choices=["lm-eval"], default=d.source,
                   help="lm-eval: read lm-evaluation-harness's --log_samples output, a run per "
                        "folder named <arm>-seed<N> or listed in --manifest (default: sweep "
                        "folders or a CSV)")
    p.add_argument("--manifest", default=d.manifest, metavar="CSV",
                   help="with --from lm-eval: path,arm,seed for each run folder (and step: for each "
                        "checkpoint of a run, its learning curve)")
    p.add_argument("--metric", default=d.metric)
    p.add_argument("--direction", choices=["higher", "lower"], default=d.direction,
                   help="which way is better (default: lower for losses, KL, grad norm, "
                        "regret, volatility; higher otherwise)")
    p.add_argument("--baseline", default=d.baseline)
    p.add_argument("--alpha", type=float, default=d.alpha)
    p.add_argument("--correction", choices=["holm", "bh"], default=d.correction)
    p.add_argument("--scope", choices=["task", "prompts"], default=d.scope,
                   help="task: verdicts that generalise to the task's problems, seeds and "
                        "held-out prompts both as chance; prompts: on these prompts, runs "
                        "alone (default: task for sweep folders; for a CSV, prompts unless "
                        "it declares a prompt pool)")
    p.add_argument("--runs", choices=["matched", "independent"], default=d.runs,
                   help="matched: run s of every arm shares its data (paired tests); "
                        "independent: runs share nothing but a number (Welch) (default: "
                        "matched for sweep folders; for a CSV, its `design` column, else "
                        "independent)")
    p.add_argument("--arms", choices=["tricks", "methods"], default=d.arms,
                   help="methods: a comparison without a recommended recipe (default: tricks "
                        "when every arm is named after a trick file)")
    p.add_argument("--prompts-pool", type=int, default=d.prompts_pool, metavar="N",
                   help="the prompts that exist for the task (caps the prompts route; on a "
                        "CSV it also makes the prompts a sample of that pool)")
    p.add_argument("--min-effect", default=str(d.min_effect),
                   help="smallest effect worth knowing: in metric units (0.01, the default), "
                        "a percentage of the baseline's mean (5%%), or a multiple of its sd "
                        "over runs (0.2sd)")
    p.add_argument("--inert-below", type=float, default=d.inert_below,
                   help="an arm whose trick acted on less than this fraction is 'inert'")
    p.add_argument("--out", default=d.out,
                   help="output folder (default: PATH for one sweep folder, beside a CSV; "
                        "required for several folders)")
    p.add_argument("--components-from", action="append", default=[], metavar="PATH",
                   help="a sweep folder (or CSV) holding the single-trick runs of a combined "
                        "arm (`composed_of`), for its additivity only; repeatable")
    p.add_argument("--beside", default=d.beside, metavar="PATH",
                   help="for a screening sweep: a one-at-a-time sweep of the same recipe "
                        "(its folder or report.json), each trick's verdicts and effect sizes side "
                        "by side")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--verbose", action="store_true",
                   help="print the whole report in the terminal, not its summary")
    p.add_argument("--wandb", choices=["offline", "online"], default=d.wandb,
                   help="also write the W&B summary run (verdict table, figures, report)")
    p.add_argument("--wandb-project", default=d.wandb_project)
    p.add_argument("--wandb-entity", default=d.wandb_entity,
                   help="the W&B entity of the report (default: the runs' logger.entity, "
                        "else the login's when published)")
    p.add_argument("--wandb-publish", action="store_true",
                   help="save the W&B report and workspace written offline under PATH "
                        "(wandb_report.json) to the server, and print their URLs")
    return p


def settings_of(ns: argparse.Namespace) -> tuple[list[str], ReportSettings, bool]:
    min_effect, min_effect_of = parse_min_effect(ns.min_effect)
    settings = ReportSettings(
        metric=ns.metric, direction=ns.direction, baseline=ns.baseline, alpha=ns.alpha,
        correction=ns.correction, min_effect=min_effect, min_effect_of=min_effect_of,
        inert_below=ns.inert_below, scope=ns.scope, runs=ns.runs, arms=ns.arms,
        prompts_pool=ns.prompts_pool, source=ns.source, manifest=ns.manifest,
        out=ns.out, figures=not ns.no_figures, wandb=ns.wandb,
        wandb_project=ns.wandb_project, wandb_entity=ns.wandb_entity,
        components_from=tuple(ns.components_from), beside=ns.beside, verbose=ns.verbose,
        design=ns.design, factors=tuple(f.strip() for f in (ns.factors or "").split(",")
                                        if f.strip()))
    if bool(ns.design) == bool(ns.path):
        raise UserError("report: allowed: sweep folders or a CSV (PATH ...), or a two-level "
                        "experiment's table (--design CSV), one of them")
    if ns.factors and not ns.design:
        raise UserError("report: --factors names a --design table's factor columns; allowed "
                        "only with --design")
    if ns.manifest and ns.source != "lm-eval":
        raise UserError("report: --manifest names lm-eval run folders; allowed only with "
                        "--from lm-eval")
    if (len(ns.path) > 1 or any(glob_magic(p) for p in ns.path)) and ns.out is None \
            and ns.source is None:
        raise UserError("report: several sweep folders need --out DIR for the combined report")
    return ns.path, settings, ns.wandb_publish


def build_report(paths: list, asked: ReportSettings) -> tuple[dict, list[str], object]:
    harness = asked.source == "lm-eval"
    df, warnings, prompts = load_results(
        paths, with_prompts=True, lm_eval=harness,
        manifest=Path(asked.manifest) if asked.manifest else None)
    from_records = not harness and all(Path(p).is_dir() for p in paths)
    df = with_pool(df, asked.prompts_pool)
    made = provenance(df, from_records, asked.baseline, asked.runs, asked.scope,
                      asked.prompts_pool, asked.arms, trick_names())
    settings = asked.stats(made.runs, made.scope, made.arms)
    note = machines_note(df)
    if note:
        warnings.append(note)
    settings, note = with_adaptive_plan(paths, settings)
    if note:
        warnings.append(note)
    stop_plan = read_stop_plan(paths[0]) if from_records and len(paths) == 1 else None
    looked = df
    if stop_plan is not None and stop_plan.metric == settings.metric:
        # An early-stop sweep: its verdicts come from its looks, which see the runs that
        # stopped at one (no final metrics: they are left out of the rest of the report).
        looked = with_looks(df, stop_plan, paths)
        settings = replace(settings, sequential=stop_plan)
    elif stop_plan is not None:
        warnings.append(f"the early-stop plan decides on {stop_plan.metric}: verdicts on "
                        f"{settings.metric} are fixed-n on the runs that reached their end")
    try:
        report = analyse(looked, settings, secondary=SECONDARY, prompts=prompts)
        report["design"] = made.as_dict()
        warnings += [st["margin_note"] for st in report["strata"] if st.get("margin_note")][:1]
        return report, warnings, df
    except SettingError as exc:  # the statistics name the setting; the user typed a flag
        raise UserError(f"--{exc.setting.replace('_', '-')} {exc.value}: {exc.problem}") from None
    except ResultsError as exc:
        raise UserError(str(exc)) from None


def trick_names() -> set[str]:
    """The names a CSV's arms may have to count as tricks: every trick file, and former names."""
    from grpo_ablate.config.catalog import former_names, trick_paths

    return set(trick_paths()) | set(former_names())


def with_adaptive_plan(paths: list, settings: Settings) -> tuple[Settings, str | None]:
    """An adaptive sweep's verdicts come from its declared looks, not from a fixed-n test
    of whatever seeds it ended with (that would ignore the optional stopping)."""
    plans = [read_plan(p) if Path(p).is_dir() else None for p in paths]
    if all(p is None for p in plans):
        return settings, None
    if len(set(plans)) > 1:
        return settings, ("the folders do not share one adaptive plan: fixed-n verdicts, which "
                          "ignore the sweeps' optional stopping")
    plan = plans[0]
    if plan.metric != settings.metric:
        return settings, (f"the adaptive plan decides on {plan.metric}: verdicts on "
                          f"{settings.metric} are fixed-n, ignoring the optional stopping")
    return replace(settings, sequential=plan), None


def additivity_of(df, report: dict, settings: ReportSettings) -> list[dict]:
    """Each combined arm's effect beside the sum of its tricks' (stats/additivity.py), the
    single-trick runs from this report's folders and `components_from`."""
    from grpo_ablate.stats.additivity import combinations_in

    components = None
    if settings.components_from:
        components, _ = load_results([Path(p) for p in settings.components_from])
    strata = report["strata"]  # a relative margin, resolved on the (first) stratum's baseline
    margin = strata[0]["min_effect"] if strata else report["min_effect"]
    return combinations_in(df, report["metric"], settings.baseline, margin,
                           report["alpha"], components)


def baseline_departures(df, baseline: str) -> list[str]:
    """Where the baseline runs' config departs from the review's recipe (records only)."""
    if "recipe_departures" not in df.columns:
        return []
    texts = df.loc[df["arm"] == baseline, "recipe_departures"]
    return sorted({d for t in texts.dropna() for d in str(t).split("; ") if d})


def arm_priors(df) -> dict[str, str]:
    """Each arm's prior claim (the review's verdict, or a variant paper's claim), from its
    records' trick files; none for a CSV."""
    if "prior" not in df.columns:
        return {}
    rows = df.dropna(subset=["prior"]).drop_duplicates("arm")
    return {a: p for a, p in zip(rows["arm"], rows["prior"], strict=True) if a != "baseline"}




def expand_paths(given: list[str]) -> list[Path]:
    """Sweep folders as given, or a quoted glob (`'outputs/sweep-*'`) expanded here."""
    import glob

    out: list[Path] = []
    for p in given:
        if not Path(p).exists() and glob.has_magic(p):
            found = sorted(glob.glob(p))
            if not found:
                raise UserError(f"{p}: no folder matches; allowed: sweep folders, a glob of "
                                "them, or one CSV")
            out += [Path(f) for f in found]
        else:
            out.append(Path(p))
    return out


def main(args: list[str]) -> int:
    given, settings, publish_only = parse_args(args)
    if publish_only:  # nothing is computed again: the spec written offline is saved
        from grpo_ablate.report.wandb_dashboard import publish

        src = Path(settings.out or given[0])
        publish(src if src.is_dir() else src.parent / f"{src.stem}-report")
        return 0
    if settings.design:
        from grpo_ablate.report.design_table import write_design_table_report

        write_design_table_report(Path(settings.design), settings, list(settings.factors) or None)
        return 0
    write_report(expand_paths(given), settings)
    return 0


def write_report(paths: list[Path], settings: ReportSettings) -> Path:
    """report.md, report.json and the figures (and the W&B summary when asked) for these
    sweep folders or this CSV; returns the folder they are in. A screening sweep's folder
    (design.json) gets the screening report (report/screening.py)."""
    from grpo_ablate.config.screening import read_design

    design = read_design(paths[0]) if len(paths) == 1 and paths[0].is_dir() else None
    if design is not None:
        from grpo_ablate.report.screening import write_screening_report

        return write_screening_report(paths[0], design, settings)
    if settings.beside:
        raise UserError("report: --beside sets a one-at-a-time report beside a screening "
                        "sweep's; allowed only for a sweep folder holding design.json")
    report, warnings, df = build_report(paths, settings)
    src = paths[0]
    out = Path(settings.out) if settings.out else Path("lm-eval-report") \
        if settings.source == "lm-eval" else \
        (src if src.is_dir() else src.parent / f"{src.stem}-report")
    warnings = [*warnings, *contradictions(report)]
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    report["warnings"] = warnings
    report["recipe_departures"] = baseline_departures(df, settings.baseline)
    report["priors"] = arm_priors(df)
    report["controls"] = arm_controls(df)
    report["duplicates"] = arm_duplicates(sorted(set(df["arm"])))
    report["additivity"] = additivity_of(df, report, settings)
    from grpo_ablate.report.curves import curves_of, has_curves, render_curves
    from grpo_ablate.results.curves import curve_table

    # Every run's curve read once, for the section and its figure.
    curves = curve_table(df[df["status"] != "failed"], report["metric"]) \
        if has_curves(df) else None
    report["curves"] = curves_of(df, report, curves)
    figures = []
    if settings.figures:
        from grpo_ablate.report.figures import write_figures

        figures = write_figures(report, df, out / "figures", curves)
    md = render_markdown(report, figures, path=str(src))
    md = md.rstrip("\n") + "\n" + "\n".join(render_curves(report["curves"])) + "\n" \
        if report["curves"] else md
    atomic_write_text(out / "report.json", json.dumps(jsonable(report), indent=1,
                                                      allow_nan=False) + "\n")
    atomic_write_text(out / "report.md", md)
    if settings.verbose:
        print(console_summary(md))
        print(f"\nreport: {out / 'report.md'}  json: {out / 'report.json'}")
    else:
        print("\n".join(terminal_lines(report, str(out))))
    if settings.wandb:
        from grpo_ablate.report.wandb_dashboard import write_dashboard
        from grpo_ablate.report.wandb_summary import log_summary

        group = src.name if src.is_dir() else src.stem
        run_id = log_summary(report, out, figures, group=group, project=settings.wandb_project,
                             entity=settings.wandb_entity, mode=settings.wandb)
        if run_id:
            print(f"W&B summary run: {run_id} ({settings.wandb}, under {out / 'wandb'})")
        write_dashboard(report, out, paths, group, settings.wandb_project,
                        settings.wandb_entity, run_id, figures,
                        online=settings.wandb == "online")
    return out


def report_or_skip(sweep_dir: str | Path, settings: ReportSettings) -> None:
    """The statistics stage after a sweep: the runs are done and recorded, so a report that
    cannot be made (e.g. every baseline run failed) is one "report skipped" line, not an
    error."""
    try:
        write_report([Path(sweep_dir)], settings)
    except UserError as exc:
        print(f"grpo-ablate: report skipped: {exc}", file=sys.stderr)
