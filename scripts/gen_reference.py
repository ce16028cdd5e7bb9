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
    from grpo_ablate.config.fidelity import catalog_cards, show

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
        for key, e in card.settings.items():
            out.append(f"| `{key}` | {_cell(show(card.composed[key]))} | "
                       f"{_cell(show(e['source']))} | {_cell(e['where'])} |")
        for key, e in card.choices.items():
            out.append(f"| `{key}` | {_cell(show(card.composed[key]))} | (open) | "
                       f"{_cell(e['why'])} |")
        for key, e in card.deviations.items():
            out.append(f"| `{key}` | {_cell(show(card.composed[key]))} | "
                       f"{_cell(show(e['source']))} | **deviates**: {_cell(e['why'])} |")
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


# NAME -> (the doc it is in, the function that writes it)
PARTS: dict[str, tuple[str, Callable[[], list[str]]]] = {
    "fidelity-cards": ("tricks.md", fidelity_cards),
    "variants-table": ("verdicts.md", lambda: catalog_table("variants")),
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
