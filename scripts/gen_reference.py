"""The reference in docs/ that restates the code, generated from the code: each generated part
of a doc sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`, and this
script rewrites it. `--check` rewrites nothing and exits 1 naming each part that differs (the
suite runs it: a change to the code that the docs do not follow fails).

    python scripts/gen_reference.py           # regenerate
    python scripts/gen_reference.py --check   # exit 1 where docs/ is stale
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def fidelity_cards() -> list[str]:
    """docs/tricks.md: every arm's fidelity card with what it composes."""
    from grpo_ablate.config.fidelity import card_rows, catalog_cards

    cards, problems = catalog_cards()
    if problems:
        raise SystemExit("gen_reference: the cards do not hold:\n" + "\n".join(problems))
    out: list[str] = []
    for card in cards:
        out += ["", f"### {card.arm}" + (f" (vs {card.against})" if card.against else ""), "",
                f"- source: {card.source}", f"- equation: {card.equation}",
                f"- reference: {card.reference}"]
        if card.premise:
            out.append(f"- premise, shared with {card.against}: {', '.join(card.premise)}")
        if card.duplicate_of:
            out.append(f"- **duplicate of {card.duplicate_of['arm']}**: "
                       f"{card.duplicate_of['where']}")
        out += ["", "| key | the arm | the source | where it is stated, or why not |",
                "|---|---|---|---|"]
        for key, arm, source, note, kind in card_rows(card):
            out.append(f"| `{key}` | {_cell(arm)} | {'(open)' if source is None else _cell(source)} "
                       f"| {'**deviates**: ' if kind == 'deviation' else ''}{_cell(note)} |")
    return out[1:]


def _settings(body: dict) -> str:
    """What a trick file sets, as `key=value` (a hook's block as its fields)."""
    from grpo_ablate.config.fidelity import show

    parts = [f"`{k}={show(v)}`" for k, v in (body.get("trainer") or {}).items()]
    for name, value in (body.get("hooks") or {}).items():
        inner = ", ".join(f"{k}={show(v)}" for k, v in value.items()) \
            if isinstance(value, dict) else show(value)
        parts.append(f"`hooks.{name}` ({inner})")
    return ", ".join(parts).replace("|", "\\|")


def catalog_table(catalog: str) -> list[str]:
    """A catalog's arms: what each trick file sets, and the arm it is compared with."""
    from grpo_ablate.config.catalog import load_catalog
    from grpo_ablate.config.fidelity import file_bodies

    bodies = file_bodies()
    rows = ["| arm | what its trick file sets | compared with |", "|---|---|---|"]
    for t in sorted((t for t in load_catalog() if t.get("catalog", "review") == catalog
                     and t["id"] != "baseline"), key=lambda t: t["id"]):
        rows.append(f"| `{t['id']}` | {_settings(bodies[t['id']])} | "
                    f"{('`' + t['against'] + '`') if t.get('against') else 'baseline'} |")
    return rows


def _first_sentence(doc: str | None) -> str:
    text = " ".join((doc or "").split())
    return text.split(". ")[0].rstrip(".") + "." if text else "-"


def data_flow() -> list[str]:
    """docs/architecture.md: the data-flow line, as the package's docstring says it."""
    import grpo_ablate

    text = " ".join(grpo_ablate.__doc__.split())
    flow = re.search(r"Data flow, one package per stage: (.*?) \(", text).group(1)
    return [f"The data flow, one package per stage: `{flow}`."]


def trl_overrides() -> list[str]:
    """docs/architecture.md: the methods of TRL's GRPOTrainer (and the Trainer under it) that
    AblationGRPOTrainer overrides, and the module that does."""
    import inspect

    from trl import GRPOTrainer

    from grpo_ablate.training.trl_layer import AblationGRPOTrainer

    own = []
    for cls in AblationGRPOTrainer.__mro__:
        if not cls.__module__.startswith("grpo_ablate"):
            continue
        for name, value in vars(cls).items():
            if inspect.isfunction(value) and hasattr(GRPOTrainer, name) and name != "__init__" \
                    and name not in {n for n, _ in own}:
                own.append((name, cls.__module__.rsplit(".", 1)[-1] + ".py"))
    public = sorted(n for n, _ in own if not n.startswith("_"))
    private = sorted(n for n, _ in own if n.startswith("_"))
    where = dict(own)
    return [f"AblationGRPOTrainer overrides {len(own)} of TRL's methods: public "
            + ", ".join(f"`{n}` ({where[n]})" for n in public) + "; private "
            + ", ".join(f"`{n}` ({where[n]})" for n in private) + "."]


def hook_points() -> list[str]:
    """docs/guide.md: each hook point, what it hands a hook, and the built-in tricks at it."""
    import dataclasses

    from grpo_ablate.config.catalog import load_catalog
    from grpo_ablate.hook_tricks import HOOKS, import_modules, points

    import_modules([m for t in load_catalog() for m in t.get("modules") or []])
    batches = {"shape_rewards": points.RewardBatch, "drop_samples": points.DropBatch,
               "generation": points.Generation, "advantages": points.StepBatch,
               "token_advantages": points.TokenBatch, "loss_term": points.TokenBatch,
               "prompt_filter": points.PromptFilter, "reward_function": None,
               "policy_average": None}
    rows = ["| point | a hook gets | built-in tricks at it |", "|---|---|---|"]
    for point, batch in batches.items():
        gets = f"`{batch.__name__}`: " + ", ".join(f"`{f.name}`" for f in dataclasses.fields(batch)) \
            if batch else "its value (and the config, the run's counters or the model)"
        at = sorted(h.name for h in HOOKS.values() if getattr(h, point, None) is not None)
        rows.append(f"| `{point}` | {gets} | {', '.join(at) or '-'} |")
    return rows


def make_targets() -> list[str]:
    """docs/tests.md: the Makefile's targets, what each installs and what it runs."""
    text = (ROOT / "Makefile").read_text()
    stamps = dict(re.findall(r"^(\w+_STAMP) := (\S+)", text, re.M))
    installs = {}
    for stamp in stamps:
        body = re.search(rf"^\$\({stamp}\):.*?\n((?:\t.*\n)+)", text, re.M)
        extra = re.search(r'install -q -e "?\.(\[[^\]"]*\])', body.group(1)) if body else None
        installs[stamp] = f"`pip install -e .{extra.group(1)}`" if extra else "-"
    rows = ["| target | installs (into .venv, with torch==2.13.0 if none) | runs |", "|---|---|---|"]
    for target, deps, body in re.findall(r"^(\w+):\s*(.*?)\n((?:\t.*\n)*)", text, re.M):
        if target.isupper() or target.endswith("STAMP"):
            continue
        stamp = next((st for st in stamps if f"$({st})" in deps), None)
        lines = [" ".join(line.split("#")[0].split()).rstrip(" \\") for line in body.splitlines()]
        runs = [f"`{c}`" for c in lines if c and not c.startswith(("@if", "||", "-n", "echo"))]
        rows.append(f"| `make {target}` | {installs.get(stamp, '-')} | "
                    f"{_cell('; '.join(runs)) or '-'} |")
    return rows


def cli_commands() -> list[str]:
    """docs/contracts.md: every command of the command line and what it does."""
    from grpo_ablate.cli import COMMANDS

    rows = ["| command | what it does |", "|---|---|"]
    rows += [f"| `grpo-ablate {name}` | {_cell(_first_sentence(fn.__doc__))} |"
             for name, fn in COMMANDS.items()]
    return rows


def report_flags() -> list[str]:
    """docs/contracts.md: `grpo-ablate report`'s flags, from its parser."""
    from grpo_ablate.report import report_parser

    rows = ["| flag | values (default) | what |", "|---|---|---|"]
    for action in report_parser()._actions:
        if not action.option_strings or "-h" in action.option_strings:
            continue
        values = "/".join(action.choices) if action.choices else \
            ("-" if action.nargs == 0 else (action.metavar or "VALUE"))
        default = "" if action.default in (None, False, [], "") else f" ({action.default})"
        rows.append(f"| `{action.option_strings[-1]}` | {_cell(values + default)} | "
                    f"{_cell(' '.join((action.help or '-').split()))} |")
    return rows


def designs() -> list[str]:
    """docs/guide.md: the sweep files (the designs and catalogs a sweep can run)."""
    from grpo_ablate.config.paths import SWEEPS_DIR

    rows = ["| `sweep=` | what it runs |", "|---|---|"]
    for path in sorted(SWEEPS_DIR.glob("*.yaml")):
        head = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            if not line.startswith("# @package"):
                head.append(line[1:].strip())
        rows.append(f"| `{path.stem}` | {_cell(_first_sentence(' '.join(head)))} |")
    return rows


# NAME -> (the doc it is in, the function that writes it)
PARTS: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "fidelity-cards": ("tricks.md", fidelity_cards),
    "variants-table": ("verdicts.md", lambda: catalog_table("variants")),
    "data-flow": ("architecture.md", data_flow),
    "trl-overrides": ("architecture.md", trl_overrides),
    "hook-points": ("guide.md", hook_points),
    "designs": ("guide.md", designs),
    "make-targets": ("tests.md", make_targets),
    "cli-commands": ("contracts.md", cli_commands),
    "report-flags": ("contracts.md", report_flags),
}


def regenerate(text: str, name: str, body: list[str]) -> str:
    begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"gen_reference: {name}: no `{begin}` ... `{end}` block in its doc")
    return pattern.sub(lambda _: "\n".join([begin, *body, end]), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where docs/ is stale")
    args = parser.parse_args(argv)
    stale = []
    for doc in sorted({doc for doc, _ in PARTS.values()}):
        path = DOCS / doc
        text = path.read_text()
        new = text
        for name, (where, write) in PARTS.items():
            if where == doc:
                new = regenerate(new, name, write())
        if new != text:
            stale.append(doc)
            if args.check:
                diff = difflib.unified_diff(text.splitlines(), new.splitlines(), f"docs/{doc}",
                                            "regenerated", n=1, lineterm="")
                print("\n".join(list(diff)[:40]), file=sys.stderr)
            else:
                path.write_text(new)
    if args.check and stale:
        print(f"gen_reference: stale: {', '.join(stale)}: run python scripts/gen_reference.py",
              file=sys.stderr)
        return 1
    print(f"gen_reference: {'checked' if args.check else 'wrote'} "
          f"{len({d for d, _ in PARTS.values()})} docs, {len(stale)} "
          f"{'stale' if args.check else 'changed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
