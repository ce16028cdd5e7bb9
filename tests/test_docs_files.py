"""Docs that cannot go stale silently: every file, module and function that README.md, docs/
and the package's docstrings and comments name exists."""

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "grpo_ablate"
TOP = ("grpo_ablate", "scripts", "tests", "conf", "docs", "sweeps", "hydra_plugins", ".ci")
LAYERS = ("training", "launch", "stats", "config", "tasks", "models", "report")
EXT = r"(?:py|md|yaml|sh|png|json|jsonl|csv|toml)"
# A path from the repository root, or from the package (training/trl_layer/dispatch.py).
ROOTED = re.compile(rf"(?<![\w/.-])((?:{'|'.join(map(re.escape, TOP))})/[\w./-]*\w\.{EXT})\b")
IN_PACKAGE = re.compile(rf"(?<![\w/.-])((?:{'|'.join(LAYERS)})/[\w/-]*\w\.py)\b")
DOTTED = re.compile(r"(?<![\w.])(grpo_ablate(?:\.\w+)+)")
# "`x.py`'s `name`" and "`name` in `x.py`": a function, class or constant of that module.
OWNED = [re.compile(r"`([\w/]+\.py)`'s `(\w+)`"),
         re.compile(r"`(\w+)(?:\(\))?` (?:in|of|from) `?([\w/]+/[\w]+\.py)`?"),
         re.compile(r"`(\w+)(?:\(\))?` \(`?([\w/]+/[\w]+\.py)`?[,)]")]
# A module list in a package docstring: "name.py   what it holds", one a line.
MODULE_LINE = re.compile(r"^([a-z_]+\.py)\s", re.M)
# Names a page may give for what a user creates (their own folders), not this repository's.
USERS = ("mine/", "conf/trick/kl_0.2.yaml", "docs/figures.md#")


def texts() -> list[tuple[str, str]]:
    out = [("README.md", (ROOT / "README.md").read_text())]
    out += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "docs").glob("*.md"))]
    out += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))]
    out += [(str(p.relative_to(ROOT)), p.read_text())
            for p in sorted((ROOT / "conf").rglob("*.yaml")) + sorted((ROOT / "sweeps").glob("*.yaml"))]
    return out


def exists(path: str) -> bool:
    path = path.rstrip(".")
    candidates = [ROOT / path, PACKAGE / path]
    if path.startswith("conf/"):
        candidates.append(PACKAGE / path)
    return any(c.exists() for c in candidates)


def names_in(path: str) -> set[str]:
    file = next(p for p in (ROOT / path, PACKAGE / path) if p.is_file())
    body = file.read_text()
    return set(re.findall(r"^\s*(?:def|class)\s+(\w+)", body, re.M)) | \
        set(re.findall(r"^(\w+)\s*[:=]", body, re.M))


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def references():
    for where, text in texts():
        for pattern in (ROOTED, IN_PACKAGE):
            for m in pattern.finditer(text):
                if not m.group(1).startswith(USERS):
                    yield where, "path", m.group(1)
        for m in DOTTED.finditer(text):
            yield where, "module", m.group(1)
        for pattern in OWNED:
            for m in pattern.finditer(text):
                path, name = m.groups() if pattern is OWNED[0] else m.groups()[::-1]
                yield where, "name", f"{path}:{name}"


def test_every_named_file_module_and_function_exists():
    missing = set()
    for where, kind, ref in references():
        if kind == "path":
            ok = exists(ref)
        elif kind == "module":
            ok = resolves(ref)
        else:
            path, name = ref.split(":")
            ok = exists(path) and name in names_in(path)
        if not ok:
            missing.add(f"{where}: {ref}")
    assert not missing, "\n".join(sorted(missing))


def test_the_check_finds_a_stale_name(tmp_path, monkeypatch):
    page = "see `training/no_such_module.py`, `grpo_ablate.training.train.no_such` and " \
           "`tasks/base.py`'s `row_problem`"
    monkeypatch.setattr(sys.modules[__name__], "texts", lambda: [("page.md", page)])
    found = {ref for _, _, ref in references()}
    assert {"training/no_such_module.py", "grpo_ablate.training.train.no_such",
            "tasks/base.py:row_problem"} <= found
    assert not resolves("grpo_ablate.training.train.no_such")
    assert "row_problem" not in names_in("tasks/base.py")
    assert not exists("training/no_such_module.py")


@pytest.mark.parametrize("ref", ["training/trl_layer/rows.py", "conf/trick/ema_0.9.yaml", "docs/guide.md"])
def test_the_check_accepts_what_exists(ref):
    assert exists(ref)


@pytest.mark.parametrize("package", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")
                                           if MODULE_LINE.search(p.read_text())))
def test_a_packages_module_list_is_its_folder(package):
    """A package docstring that lists its modules lists every one, and no other."""
    folder = PACKAGE / package
    listed = set(MODULE_LINE.findall((folder / "__init__.py").read_text()))
    assert listed == {p.name for p in folder.glob("*.py")} - {"__init__.py"}


def test_the_records_metric_prefixes_are_the_ones_written():
    """docs/contracts.md's `metrics` row names the prefixes the evaluations write
    (training/wandb_logger.py's EVAL_PREFIXES, which the record and W&B share)."""
    import ast

    source = (PACKAGE / "training" / "wandb_logger.py").read_text()
    (written,) = [ast.literal_eval(node.value) for node in ast.parse(source).body
                  if isinstance(node, ast.Assign) and node.targets[0].id == "EVAL_PREFIXES"]
    (row,) = [ln for ln in (ROOT / "docs" / "contracts.md").read_text().splitlines()
              if ln.startswith("| `metrics` |")]
    assert set(re.findall(r"`([\w/]+/)<name>`", row)) == set(written)


def test_the_lower_is_better_names_are_the_codes():
    """docs/verdicts.md names every part of a metric's name that makes lower better by
    default (stats/decide.py's LOWER_IS_BETTER), and no other."""
    from grpo_ablate.stats.verdicts import LOWER_IS_BETTER

    text = (ROOT / "docs" / "verdicts.md").read_text()
    sentence = text[text.index("by default lower for"):].split(", higher otherwise")[0]
    assert set(re.findall(r"`(\w+)`", sentence)) == set(LOWER_IS_BETTER)


def test_the_readmes_install_line_is_the_makefiles():
    """README.md says what `make demo` and `make test` install: each `pip install -e` of the
    Makefile, with its extras."""
    installs = re.findall(r'install -q -e "(\.\[[\w,]+\])"', (ROOT / "Makefile").read_text())
    readme = (ROOT / "README.md").read_text()
    assert len(installs) == 2 and all(f"`pip install -e {x}`" in readme for x in installs)


def test_the_architecture_tree_names_every_module_of_the_package_once():
    """docs/architecture.md's tree: one entry (or `a | b` siblings) at the start of a line
    for each subpackage and top-level module of grpo_ablate, none missing, none extra."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = text[text.index("```\ngrpo_ablate/\n") + 4:].split("```")[0]
    entries = [e.strip() for line in re.findall(r"^  (\S.*?)\s{2,}", tree, re.M)
               for e in line.split("|")]
    have = sorted([p.parent.name + "/" for p in PACKAGE.glob("*/__init__.py")]
                  + [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"])
    assert sorted(entries) == have


def test_the_packages_data_flow_names_its_packages():
    """grpo_ablate/__init__.py's data-flow line names stages that are packages or modules."""
    line = re.search(r"Data flow.*?: (.*?)\(", (PACKAGE / "__init__.py").read_text(), re.S)
    stages = [s.strip() for s in line.group(1).split("->")]
    assert len(stages) >= 5 and all((PACKAGE / s).is_dir() or (PACKAGE / f"{s}.py").is_file()
                                    for s in stages), stages


def test_the_generated_reference_is_current():
    """Every table of docs/ that restates the code (hook points, the arm cards, the variants,
    the designs, the make targets, the data flow, the TRL methods overridden, the commands
    and the report's flags) is what scripts/gen_reference.py makes of the code now: a change
    to the code that the docs do not follow fails here, with the diff."""
    import runpy
    import sys

    script = ROOT / "scripts" / "gen_reference.py"
    argv, sys.argv = sys.argv, [str(script), "--check"]
    try:
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    assert done.value.code == 0


LAYERS = ("cli", "launch", "training", "report", "results", "stats", "config", "tasks",
          "hook_tricks", "sandbox", "records", "runtime", "docs", "scripts", "install")


def test_each_test_file_says_the_layer_it_tests():
    """tests/ shows the package: test_<layer>_<what>.py, the layer one of the package's
    (docs/tests.md), and no test file named after a module that does not exist."""
    files = sorted(p.stem for p in (ROOT / "tests").glob("test_*.py"))
    odd = [f for f in files if not any(f == f"test_{layer}" or f.startswith(f"test_{layer}_")
                                       for layer in LAYERS)]
    assert odd == []
    package = ROOT / "grpo_ablate"
    for layer in LAYERS[:12]:
        assert (package / layer).is_dir() or (package / f"{layer}.py").is_file() \
            or layer == "cli", layer
