"""lm-evaluation-harness's per-sample logs as the long form of the results: a team that
trains with any framework and evaluates with the harness (`lm_eval ... --log_samples
--output_path DIR`) reports per prompt from what the harness wrote (docs/contracts.md,
"lm-evaluation-harness sample logs").

The harness writes, per evaluated model, `DIR/<model name>/samples_<task>_<date>.jsonl`:
one JSON object per document and filter, with `doc_id`, `filter`, `metrics` (the names)
and each metric's value for that document. Each becomes a row `arm, seed, task, prompt`
(the doc_id) with one column per metric as the harness's results name it
(`<metric>,<filter>`: `acc,none`, `exact_match,strict-match`). A run's arm and seed come
from the folder it was written to, named `<arm>-seed<N>` (or `_seed<N>`, `-s<N>`), or from
a manifest CSV (`path,arm,seed`, paths relative to the manifest) that names each run folder.
A checkpoint's step comes from a folder within the run's named `checkpoint-<K>`,
`global_step_<K>` or `step<K>` (each part of a harness folder named after a model path,
`ckpts__kl_off-seed0__checkpoint-500`, counts as a folder), or from the manifest's `step`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from grpo_ablate.errors import UserError

RUN_NAME = re.compile(r"^(?P<arm>.+?)[-_](?:seed|s)(?P<seed>\d+)$")
# A checkpoint's folder as trainers name them: the HF Trainer's checkpoint-<N>, verl's
# global_step_<N>, step-<N> or step<N>.
CHECKPOINT_NAME = re.compile(r"^(?:checkpoint|global_step|step)[-_]?(?P<step>\d+)$")
NAMING = ("a run folder named <arm>-seed<N> (or <arm>_seed<N>, <arm>-s<N>), a checkpoint "
          "folder within it named checkpoint-<K>, global_step_<K> or step<K>, or --manifest")


def name_parts(name: str) -> list[str]:
    """A folder name's parts: the harness names its output folder after the model's path,
    each `/` written `__` (pretrained=ckpts/kl_off-seed0/checkpoint-500 ->
    ckpts__kl_off-seed0__checkpoint-500)."""
    return name.split("__")


def task_of(path: Path) -> str:
    """The task of `samples_<task>_<date>.jsonl`, as the harness reads it back."""
    name = path.name.removesuffix(".jsonl")
    return name[name.find("_") + 1:name.rfind("_")]


def date_of(path: Path) -> str:
    return path.name.removesuffix(".jsonl").rsplit("_", 1)[-1]


def read_manifest(path: Path) -> dict[Path, tuple[str, int, int | None]]:
    """A manifest CSV: `path,arm,seed` per run folder, paths relative to the manifest; with
    a `step` column, one row per checkpoint of a run (its step an integer >= 0)."""
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"--manifest {path}: not a readable CSV ({exc.__class__.__name__})") from None
    missing = [c for c in ("path", "arm", "seed") if c not in table.columns]
    if missing:
        raise UserError(f"--manifest {path}: lacks column(s) {', '.join(missing)}; required: "
                        "path, arm, seed (one row per run folder)")
    runs = {}
    for i, row in table.iterrows():
        if not row["seed"].strip().isdigit() or not row["arm"].strip():
            raise UserError(f"--manifest {path}: row {i + 2} needs an arm and an integer seed; "
                            f"holds arm={row['arm']!r} seed={row['seed']!r}")
        step = None
        if "step" in table.columns:
            if not row["step"].strip().isdigit():
                raise UserError(f"--manifest {path}: row {i + 2} needs an integer step >= 0 "
                                f"(the checkpoint's); holds step={row['step']!r}")
            step = int(row["step"])
        runs[(path.parent / row["path"].strip()).resolve()] = (row["arm"].strip(),
                                                               int(row["seed"]), step)
    return runs


def run_of(file: Path, root: Path, manifest: dict[Path, tuple[str, int, int | None]] | None
           ) -> tuple[Path, str, int, int | None]:
    """The run folder a samples file belongs to, its arm and seed, and its checkpoint's step
    (None: the run's final model): the nearest folder above it (up to the folder given)
    that the manifest names, or whose name says them."""
    folder = file.parent.resolve()
    top = root.resolve()
    step, at = None, None  # a checkpoint's step, and the folder that named it
    while True:
        if manifest is not None and folder in manifest:
            return (folder, *manifest[folder])
        for part in reversed(name_parts(folder.name)) if manifest is None else []:
            checkpoint = CHECKPOINT_NAME.match(part)
            if checkpoint and step is None:
                step, at = int(checkpoint.group("step")), folder
                continue
            found = RUN_NAME.match(part)
            if found:
                return at or folder, found.group("arm"), int(found.group("seed")), step
        if folder == top or folder.parent == folder:
            break
        folder = folder.parent
    raise UserError(f"{file}: no run folder above it says its arm and seed; allowed: {NAMING}")


def sample_rows(file: Path) -> pd.DataFrame:
    """One row per document: `prompt` (the doc_id) and each numeric metric per filter."""
    rows: dict[str, dict] = {}
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
            doc, where, names = str(sample["doc_id"]), sample.get("filter", "none"), sample["metrics"]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{file}: line {n} is not a harness sample (a JSON object with "
                            "doc_id and metrics)") from None
        row = rows.setdefault(doc, {"prompt": doc})
        for name in names:
            value = sample.get(name)
            if isinstance(value, bool | int | float) and not isinstance(value, str):
                row[f"{name},{where}"] = float(value) if math.isfinite(value) else math.nan
    return pd.DataFrame(list(rows.values()))


def lm_eval_rows(paths: list[Path], manifest: Path | None = None
                 ) -> tuple[pd.DataFrame, list[str]]:
    """The long table (arm, seed, model, task, status, prompt, metrics...) of every run's
    samples files under `paths`, and the notes (an older file of a run and task set aside)."""
    named = read_manifest(manifest) if manifest else None
    newest: dict[tuple[Path, str], tuple[Path, str, int, int | None]] = {}
    notes, seen = [], 0
    for root in paths:
        if not root.is_dir():
            raise UserError(f"{root}: not a folder; allowed: folders the harness wrote with "
                            "--log_samples --output_path")
        for file in sorted(root.rglob("samples_*.jsonl")):
            seen += 1
            folder, arm, seed, step = run_of(file, root, named)
            key = (folder, task_of(file))
            if key in newest and date_of(newest[key][0]) >= date_of(file):
                notes.append(f"{file}: an older evaluation of {key[1]} in {folder.name}, set aside")
                continue
            if key in newest:
                notes.append(f"{newest[key][0]}: an older evaluation of {key[1]} in "
                             f"{folder.name}, set aside")
            newest[key] = (file, arm, seed, step)
    if not seen:
        raise UserError(f"{', '.join(map(str, paths))}: no samples_*.jsonl under it; allowed: "
                        "folders the harness wrote with --log_samples --output_path")
    frames = []
    steps = any(step is not None for *_, step in newest.values())
    if steps and any(step is None for *_, step in newest.values()):
        file = next(v[0] for v in newest.values() if v[3] is None)
        raise UserError(f"{file}: its run folder names no checkpoint step, and others do; "
                        f"allowed: every run's checkpoints named alike ({NAMING})")
    for (_, task), (file, arm, seed, step) in sorted(newest.items()):
        frame = sample_rows(file).assign(arm=arm, seed=seed, model="-", task=task,
                                         status="completed")
        frames.append(frame.assign(step=step) if steps else frame)
    long = pd.concat(frames, ignore_index=True)
    at = ["task", "arm", "seed", *(["step"] if steps else [])]
    if len(long.drop_duplicates(at)) < len(newest):
        raise UserError("two run folders say the same arm and seed for one task"
                        + (" and step" if steps else "") + "; allowed: one run folder per "
                        f"(arm, seed{', step' if steps else ''}) ({NAMING})")
    ids = ["arm", "seed", "model", "task", "status", *(["step"] if steps else []), "prompt"]
    return long[ids + [c for c in long.columns if c not in ids]], notes
