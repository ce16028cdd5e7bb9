"""Task data through `datasets.load_dataset`: a hub name, or a local JSON / JSONL (also
gzipped) / parquet file, with split and field names from the task config. Problems are one
line each (exit 2): local files are checked before anything trains, hub datasets when the
run loads them.

When the train and eval sources name the same dataset and split (MATH-500 and HumanEval ship
one split), the held-out rows are the first `eval_size` and the train rows the rest: the two
never overlap."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

from grpo_ablate.errors import UserError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL_BUILDERS = {".json": "json", ".jsonl": "json", ".json.gz": "json", ".jsonl.gz": "json",
                  ".parquet": "parquet"}
# What is wrong with one row (None: nothing), for validation.
RowCheck = Callable[[dict], "str | None"]


def suffix(path: Path) -> str:
    """`.jsonl.gz` for a gzipped file, else the last suffix."""
    return "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix


def is_local(source: str) -> bool:
    return source.startswith(("/", ".", "~")) or suffix(Path(source)) in LOCAL_BUILDERS


def resolve_source(source: str) -> str:
    """`fixture:<name>` is a file shipped in grpo_ablate/tasks/fixtures/."""
    if source.startswith("fixture:"):
        return str(FIXTURES / source.split(":", 1)[1])
    return source


def read_local(path: Path) -> list:
    """The rows of a local file, without `datasets` (validation must stay cheap)."""
    kind = suffix(path)
    if kind == ".parquet":
        import pyarrow.parquet as pq  # installed with datasets; only for a parquet file

        return pq.read_table(path).to_pylist()
    opener = gzip.open if kind.endswith(".gz") else open
    with opener(path, "rt") as fh:
        text = fh.read()
    if kind.startswith(".json") and not kind.startswith(".jsonl") and text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def check_local(source: str, key: str, fields: list[str], row_check: RowCheck | None = None,
                preset: str | None = None) -> None:
    """Validation-time check of a local file: it exists, has rows, and every row has the
    fields (and passes the preset's own row check)."""
    source = resolve_source(source)
    if not is_local(source):
        return
    path = Path(source).expanduser()
    allowed = "a .json/.jsonl (optionally .gz) or .parquet file, or a hub dataset name"
    if suffix(path) not in LOCAL_BUILDERS:
        raise UserError(f"{key}={source}: unknown file type; allowed: {allowed}")
    if not path.is_file():
        raise UserError(f"{key}={source}: no such file; allowed: {allowed}")
    try:
        rows = read_local(path)
    except (OSError, ValueError, EOFError) as exc:
        raise UserError(f"{key}={source}: not readable ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:120] if str(exc) else ''}); allowed: {allowed}") \
            from None
    if not rows:
        raise UserError(f"{key}={source}: the file has no rows")
    what = f"{preset} row" if preset else "row"
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise UserError(f"{key}={source}: row {n} is not a JSON object")
        missing = [f for f in fields if f not in row]
        if missing:
            raise UserError(f"{key}={source}: row {n} has no field {missing[0]!r}; "
                            f"fields there: {', '.join(row)}")
        problem = row_check(row) if row_check else None
        if problem:
            raise UserError(f"{key}={source}: {what} {n}: {problem}")


def load_rows(source: str, split: str, fields: list[str], key: str, subset: str | None = None,
              limit: int | None = None, row_check: RowCheck | None = None
              ) -> tuple[list[dict], int]:
    """Rows of one split, as dicts holding at least `fields`, and the split's size."""
    import datasets  # heavy: loaded where a run reads its data

    datasets.disable_progress_bars()  # the sweep shows its own progress
    source = resolve_source(source)
    try:
        if is_local(source):
            path = Path(source).expanduser()
            builder = LOCAL_BUILDERS.get(suffix(path))
            if builder is None or not path.is_file():
                raise UserError(f"{key}={source}: no such .json/.jsonl/.parquet file")
            ds = datasets.load_dataset(builder, data_files=str(path), split="train")
        else:
            ds = datasets.load_dataset(source, subset, split=split)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; one line for all
        raise UserError(f"{key}={source}: could not load split {split!r}: "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    missing = [f for f in fields if f not in ds.column_names]
    if missing:
        raise UserError(f"{key}={source}: no field {missing[0]!r}; fields: "
                        f"{', '.join(ds.column_names)}")
    if len(ds) == 0:
        raise UserError(f"{key}={source}: split {split!r} is empty")
    size = len(ds)
    if limit:
        ds = ds.select(range(min(limit, len(ds))))
    rows = [dict(r) for r in ds]
    for n, row in enumerate(rows, 1):
        problem = row_check(row) if row_check else None
        if problem:
            raise UserError(f"{key}={source}: row {n}: {problem}")
    return rows, size


def same_split(data: dict) -> bool:
    """Whether train and eval name one dataset split (then they are split disjointly)."""
    def where(part: str) -> tuple:
        return resolve_source(str(data[part])), data.get(f"{part}_split") \
            if not is_local(resolve_source(str(data[part]))) else None

    return where("train") == where("eval")


def load_task_rows(data: dict, fields: list[str], row_check: RowCheck | None = None
                   ) -> tuple[list[dict], list[dict], int]:
    """(train rows, held-out rows, the held-out pool) of a task's dataset section. The pool is
    how many prompts could be held out with the training rows as they are: the eval split's
    size, or, when train and eval share one split, its rows less those that train."""
    common = dict(fields=fields, subset=data.get("subset"), row_check=row_check)
    if same_split(data):
        rows, _ = load_rows(data["eval"], data["eval_split"], key="task.dataset.eval", **common)
        n_eval = min(data.get("eval_size") or len(rows) // 2, len(rows) - 1)
        if n_eval < 1:
            raise UserError(f"task.dataset.eval={data['eval']}: {len(rows)} row(s) cannot be split "
                            "into disjoint train and held-out rows; allowed: at least 2 rows")
        train = rows[n_eval:]
        if data.get("train_size"):
            train = train[:data["train_size"]]
        return train, rows[:n_eval], len(rows) - len(train)
    train, _ = load_rows(data["train"], data["train_split"], key="task.dataset.train",
                         limit=data.get("train_size"), **common)
    held_out, pool = load_rows(data["eval"], data["eval_split"], key="task.dataset.eval",
                               limit=data.get("eval_size"), **common)
    return train, held_out, pool
