"""grpo-ablate's command line (the contract in shared/DESIGN.md).

  grpo-ablate run [overrides]        one run          grpo-ablate tricks     the catalog
  grpo-ablate sweep [overrides]      a multirun       grpo-ablate demo       the default end to end
  grpo-ablate report PATH [...]      the statistics stage on a sweep folder or CSV

Bad input exits 2 with one line, before anything is trained or written.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings

from grpo_ablate.errors import UserError

USAGE = __doc__.split("\n\n")[1]
# Where Hydra owns the command line, its own flags pass straight through.
HYDRA_FLAGS = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--resolve",
               "-p", "--package", "-sc", "--shell-completion", "--version")


def _quiet_libraries() -> None:
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def _hydra(args: list[str], multirun: bool) -> None:
    from grpo_ablate.app import hydra_main

    sys.argv = ["grpo-ablate", *(["--multirun"] if multirun else []), *args]
    hydra_main()


def _passthrough(args: list[str]) -> bool:
    return any(a.split("=")[0] in HYDRA_FLAGS for a in args)


def cmd_run(args: list[str]) -> int:
    from grpo_ablate import sweep
    from grpo_ablate.config import specs_for
    from grpo_ablate.store import RECORD_NAME, read_record

    if _passthrough(args):
        _hydra(args, multirun=False)
        return 0
    if "-m" in args or "--multirun" in args:
        return cmd_sweep([a for a in args if a not in ("-m", "--multirun")])
    (spec,) = specs_for(args, multirun=False)
    _quiet_libraries()
    sweep.PROGRESS = sweep.Progress(total=1)
    _hydra(args, multirun=False)
    record = read_record(spec.run_dir / RECORD_NAME)
    print(f"record: {spec.run_dir / RECORD_NAME}")
    print(f"status={record.status} " + " ".join(
        f"{k}={v:.4f}" for k, v in sorted(record.metrics.items()) if v is not None))
    return 0


def cmd_sweep(args: list[str], report_args: list[str] | None = None) -> int:
    from grpo_ablate import sweep
    from grpo_ablate.config import specs_for

    if _passthrough(args):
        _hydra(args, multirun=True)
        return 0
    if not any(a.split("=")[0] in ("sweep", "+sweep") for a in args):
        args = ["sweep=catalog", *args]
    specs = specs_for(args, multirun=True)
    sweep_dirs = sorted({str(s.sweep_dir) for s in specs})
    _quiet_libraries()
    sweep.PROGRESS = sweep.Progress(total=len(specs))
    print(f"sweep: {len(specs)} runs ({len({s.arm for s in specs})} arms x "
          f"{len({s.seed for s in specs})} seeds) -> {', '.join(sweep_dirs)}", file=sys.stderr)
    t0 = time.perf_counter()
    _hydra(args, multirun=True)
    print(f"sweep finished in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    for sweep_dir in sweep_dirs:
        try:
            cmd_report([sweep_dir, *(report_args or [])])
        except UserError as exc:  # the runs are done and recorded; only the report could not be
            print(f"grpo-ablate: report skipped: {exc}", file=sys.stderr)
    return 0


def cmd_report(args: list[str]) -> int:
    from grpo_ablate.report import main as report_main

    return report_main(args)


def cmd_tricks(args: list[str]) -> int:
    from grpo_ablate.catalog import load_catalog

    rows = [("id", "family", "what it changes", "review's verdict")]
    rows += [(t["id"], t["family"], t["changes"], t["verdict"]) for t in load_catalog()]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    return 0


def cmd_demo(args: list[str]) -> int:
    t0 = time.perf_counter()
    code = cmd_sweep(["sweep=demo", *args])
    print(f"demo finished in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    return code


COMMANDS = {"run": cmd_run, "sweep": cmd_sweep, "report": cmd_report, "tricks": cmd_tricks,
            "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"grpo-ablate: error: command {cmd!r} unknown; allowed: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # Library deprecation chatter (transformers' renamed fields) is not for our users.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    try:
        return COMMANDS[cmd](rest)
    except UserError as exc:
        print(f"grpo-ablate: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
