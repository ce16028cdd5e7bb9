"""The words of a grpo-ablate command line, before anything is composed: Hydra's own flags
apart from the config overrides (`run`, `sweep` and the commands that take overrides), and
`--flag N` integer options (`lengths`, `plan`) with their usage texts."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grpo_ablate.config import RunSpec, lora_keys_alone, specs_for
from grpo_ablate.config.catalog import canonical_trick, former_names, load_catalog
from grpo_ablate.errors import UserError
from grpo_ablate.runtime import say
from grpo_ablate.tasks import check_task_configs

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
    verbose: bool = False  # the sweep's report in full in the terminal

    @property
    def search_overrides(self) -> list[str]:
        """The config dirs as a search path, for grpo-ablate's own composition."""
        if not self.config_dirs:
            return []
        paths = ",".join(f"file://{Path(d).resolve()}" for d in self.config_dirs)
        return [f"hydra.searchpath=[{paths}]"]

    @property
    def wants_help(self) -> bool:
        """Hydra's help: printed as Hydra prints it, with no job to list or check."""
        return any(f in self.show for f in ("-h", "--help", "--hydra-help"))

    def flags(self) -> list[str]:
        """The flags for Hydra's own command line (config dirs made absolute)."""
        dirs = [w for d in self.config_dirs for w in ("--config-dir", str(Path(d).resolve()))]
        return [*dirs, *self.show]


def canonical_tricks(word: str) -> str:
    """`trick=GSPO,Loss_CISPO` -> `trick=importance_sampling_sequence,loss_cispo`: a list of
    arm names, each matched case-, space- and dash-insensitively against the arms' names,
    former names and papers' names (`trick.aliases`); a name that matches none is left for
    the composition's one-line error (with its closest name)."""
    m = re.fullmatch(r"([+~]?trick)=([\w.@, -]+)", word)
    if not m:
        return word
    names = [n.strip() for n in m.group(2).split(",")]
    exact = set(former_names()) | {t["id"] for t in load_catalog()}  # Hydra's own choices
    mapped = [n if n in exact else canonical_trick(n) or n for n in names]
    for asked, arm in zip(names, mapped, strict=True):
        if asked != arm:
            say(f"notice: trick={asked} is the arm {arm}")
    return f"{m.group(1)}={','.join(mapped)}"


def parse_hydra_line(args: list[str]) -> HydraLine:
    line = HydraLine()
    words = list(args)
    while words:
        word = words.pop(0)
        if not word.startswith("-") or word == "-":
            # `adaptive=true` is short for adaptive.enabled=true (adaptive is a block), and
            # `early_stop=true` for early_stop.enabled=true
            word = re.sub(r"^(adaptive|early_stop)=(true|false)$", r"\1.enabled=\2", word,
                          flags=re.IGNORECASE)
            line.overrides += lora_keys_alone([canonical_tricks(word)])
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
        elif flag == "--verbose":
            line.verbose = True
        elif flag in ("-cd", "--config-dir"):
            if not Path(value).is_dir():
                raise UserError(f"--config-dir {value}: no such folder; allowed: a folder with "
                                "trick/, task/, model/ or sweep/ subfolders of YAML files")
            line.config_dirs.append(value)
        elif flag in SHOW_FLAGS:
            line.show += [flag, value] if (flag in VALUE_FLAGS or eq) and value else [flag]
        else:
            raise UserError(f"{word}: unknown flag; allowed: Hydra's --cfg, --info, --help, "
                            "--hydra-help, --resolve, --package, -m/--multirun, -cd/--config-dir, "
                            "--verbose")
    return line


LENGTHS_DEFAULTS = {"--prompts": 64, "--cap": 1024}
LENGTHS_USAGE = """usage: grpo-ablate lengths [--prompts N] [--cap T] [overrides]

Completion-length percentiles of the SFT policy on the task's train prompts, and the review's
max completion length (their 95th percentile).

  --prompts N   train prompts sampled, one completion each (default 64)
  --cap T       tokens at most per completion (default 1024, the review's usual maximum);
                completions that reach it are counted and reported
  overrides     Hydra overrides, as for `grpo-ablate run` (model=..., task=..., model.path=...)"""


def flag_values(args: list[str], flags) -> tuple[list[tuple[str, str]], list[str]]:
    """Each `--flag VALUE` / `--flag=VALUE` of `flags` anywhere on the line, in order, and the
    rest of the line."""
    found, rest, words = [], [], list(args)
    while words:
        word = words.pop(0)
        flag, eq, value = word.partition("=")
        if flag not in flags:
            rest.append(word)
            continue
        found.append((flag, value if eq else (words.pop(0) if words else "")))
    return found, rest


def integer_options(command: str, args: list[str], defaults: dict) -> tuple[dict, list[str]]:
    """`--flag N` / `--flag=N` (positive integers) anywhere on the line, and the rest."""
    found, rest = flag_values(args, defaults)
    opts = dict(defaults)
    for flag, value in found:
        if not value.isdigit() or int(value) < 1:
            raise UserError(f"{command} {flag} {value}: needs a positive integer")
        opts[flag] = int(value)
    return opts, rest


def path_options(command: str, args: list[str], flag: str) -> tuple[list[Path], list[str]]:
    """`--flag PATH` / `--flag=PATH` (repeatable) anywhere on the line, and the rest."""
    found, rest = flag_values(args, (flag,))
    for _, value in found:
        if not value or value.startswith("-") or "=" in value:
            raise UserError(f"{command} {flag} {value}: needs a folder of records")
    return [Path(value).expanduser() for _, value in found], rest


WANDB_SYNC_USAGE = """usage: grpo-ablate wandb-sync PATH [--dry-run]

Upload the offline W&B runs under PATH (a sweep folder): for each run, the newest of its
offline-run folders, which holds its whole history when it was interrupted and resumed (each
attempt writes its own folder under the run's id; docs/wandb.md). Older attempts are named,
not uploaded. Runs `wandb sync` (log in first); --dry-run prints what it would upload."""


PLAN_DEFAULTS = {"--pilot-steps": 3, "--length": None, "--sims": 200}
PLAN_USAGE = """usage: grpo-ablate plan [--pilot-steps K] [--length L] [--sims N] [--from PATH]
                        [--pilot-here] [overrides]

What a sweep (the same overrides as `grpo-ablate sweep`) will train and cost, before anything
trains: its jobs, those recorded or in the run cache, an adaptive ladder's expected runs, one
run's cost and throughput (from finished runs of the baseline's config, else a pilot where the
sweep's runs would go: Slurm jobs with launcher=slurm, else this machine) and the predicted
wall time, GPU-hours and tokens under the chosen launcher (docs/guide.md, "Plan").

  --from PATH      cost one run from the finished records of the same model under PATH (an
                   earlier sweep, e.g. on the cluster) instead of a pilot; repeatable
  --pilot-here     pilot on this machine even with launcher=slurm

  --pilot-steps K  optimizer steps of the longer pilot run (default 3; the shorter has 1)
  --length L       the expected mean completion length at scale, e.g. the 95th percentile
                   from `grpo-ablate lengths` (default: the pilot's own)
  --sims N         simulated sweeps per scenario for the adaptive ladder (default 200)"""


RECIPE_USAGE = """usage: grpo-ablate recipe PATH [--config-dir DIR]

The recommended recipe of the finished sweep in PATH (its report.json), as one trick file: the
baseline with every trick the report keeps (it improves) and without every component it shows
safe to drop where that removal is a trick (`kl_off`: the recipe runs without KL). Of two arms
of one family the better-supported one is applied. Prints the file (keep it as
DIR/trick/recipe_<sweep>.yaml) and the same settings as overrides (docs/verdicts.md,
"The recipe, confirmed")."""

CONFIRM_USAGE = """usage: grpo-ablate confirm PATH [--config-dir DIR] [overrides]

Runs the recommended recipe of the finished sweep in PATH against its baseline, on the
baseline's seeds (an adaptive sweep: its ladder), with the sweep's own model, task, launcher
and run cache, into PATH/confirm/ (the sweep's W&B group). Its report gives the recipe's
verdict and whether the tricks add up: its effect beside the sum of their single-trick
effects. Overrides after PATH change the confirmation (seed=range(0,10), launcher=slurm)."""


def path_and_line(command: str, args: list[str], usage: str) -> tuple[Path, HydraLine]:
    """PATH first, then a Hydra line (--config-dir DIR and overrides)."""
    if not args or args[0].startswith("-") or "=" in args[0]:
        raise UserError(f"{command}: a sweep folder first; {usage.splitlines()[0]}")
    path = Path(args[0])
    if not path.is_dir():
        raise UserError(f"{command} {path}: no such folder; allowed: a finished sweep's folder")
    return path, parse_hydra_line(args[1:])


def asked_for_help(args: list[str], usage: str) -> bool:
    """`-h`/`--help` anywhere on the line: the usage is printed."""
    if any(a in ("-h", "--help") for a in args):
        print(usage)
        return True
    return False


def with_default_sweep(overrides: list[str]) -> list[str]:
    """`sweep` and `plan` without a sweep file run the catalog."""
    if any(o.split("=")[0] in ("sweep", "+sweep") for o in overrides):
        return list(overrides)
    return ["sweep=catalog", *overrides]


def one_run_spec(command: str, args: list[str], allowed: str) -> RunSpec:
    """The one run a command's overrides describe (no Hydra flags, no sweep)."""
    line = parse_hydra_line(args)
    if line.show or line.multirun:
        raise UserError(f"{command}: allowed: {allowed}")
    (spec,) = specs_for([*line.search_overrides, *line.overrides], multirun=False)
    check_task_configs([spec.config["task"]])
    return spec


def job_listing(jobs: list[list[str]]) -> list[str]:
    """`sweep --cfg job`: the sweep's jobs, one comment line each, before the first's config."""
    lines = [f"# {len(jobs)} jobs; the first one's config follows"]
    return lines + [f"#   {i}: {' '.join(job)}" for i, job in enumerate(jobs)]


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


def report_overrides(settings: dict) -> list[str]:
    """The settings of a sweep's own report (ReportSettings fields, e.g. a confirmation's
    statistics) as overrides of its sweeper's `hydra.sweeper.report`."""
    return [f"++hydra.sweeper.report.{key}={_hydra_value(value)}"
            for key, value in settings.items()]


def _hydra_value(value) -> str:
    """A value in Hydra's override grammar: strings quoted, so a path's characters stay."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
