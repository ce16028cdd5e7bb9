"""The TRL layer's shape (quick, no TRL run): no value of a step's rows left on the trainer
by one override for another to read, and no module of it over about 250 lines."""

import ast
from pathlib import Path

LAYER = Path(__file__).resolve().parents[1] / "grpo_ablate" / "training" / "trl_layer"


def self_attributes(fn: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """The `self.<name>` a method (closures included) assigns, and those it reads."""
    written, read = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "self":
            (written if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return written, read


def test_no_trainer_attribute_carries_a_value_from_one_method_to_another():
    """An attribute assigned outside __init__ is assigned and read by one method alone:
    which batch a value belongs to cannot depend on the order TRL calls its methods in."""
    classes = [n for p in sorted(LAYER.glob("*.py")) for n in ast.parse(p.read_text()).body
               if isinstance(n, ast.ClassDef)]
    trainers = {"GRPOTrainer"}  # and every class of the layer built on it
    while new := {c.name for c in classes if c.name not in trainers
                  and {b.id for b in c.bases if isinstance(b, ast.Name)} & trainers}:
        trainers |= new
    writers: dict[str, set[str]] = {}
    readers: dict[str, set[str]] = {}
    for cls in (c for c in classes if c.name in trainers):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            if fn.name == "__init__":
                continue
            written, read = self_attributes(fn)
            for name in written:
                writers.setdefault(name, set()).add(f"{cls.name}.{fn.name}")
            for name in read:
                readers.setdefault(name, set()).add(f"{cls.name}.{fn.name}")
    crossing = {name: sorted(by | readers.get(name, set())) for name, by in writers.items()
                if len(by | readers.get(name, set())) > 1}
    assert crossing == {}
    assert {"HookDispatch", "LossPoint", "ResumableTraining", "AblationGRPOTrainer"} <= trainers
    assert writers  # the walk saw the layer's assignments (the check can fail)


def test_the_layer_is_a_folder_of_small_modules():
    sizes = {p.name: len(p.read_text().splitlines()) for p in LAYER.glob("*.py")}
    assert {"compat.py", "rows.py", "dispatch.py", "loss_point.py", "resumable.py", "vllm.py",
            "trainer.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > 250} == {}
