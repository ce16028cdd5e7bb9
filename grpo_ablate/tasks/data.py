"""Task data through `datasets.load_dataset`: a hub name, or a local JSON / JSONL / parquet
file, with split and field names from the task config. Problems are one line each (exit 2),
found before anything trains."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.errors import UserError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def is_local(source: str) -> bool:
    return source.startswith(("/", ".", "~")) or Path(source).suffix in LOCAL_BUILDERS


def resolve_source(source: str) -> str:
    """`fixture:<name>` is a file shipped in grpo_ablate/tasks/fixtures/."""
    if source.startswith("fixture:"):
        return str(FIXTURES / source.split(":", 1)[1])
    return source


def check_local(source: str, key: str, fields: list[str]) -> None:
    """Validation-time check of a local file: it exists, has rows, and every row has the
    fields (hub datasets are checked when the run loads them)."""
    import json

    source = resolve_source(source)
    if not is_local(source):
        return
    path = Path(source).expanduser()
    if path.suffix not in LOCAL_BUILDERS:
        raise UserError(f"{key}={source}: unknown file type; allowed: .json, .jsonl, .parquet, "
                        "or a hub dataset name")
    if not path.is_file():
        raise UserError(f"{key}={source}: no such file; allowed: a .json/.jsonl/.parquet file "
                        "or a hub dataset name")
    if path.suffix == ".jsonl":
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        if not lines:
            raise UserError(f"{key}={source}: the file has no rows")
        for n, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
            except ValueError:
                raise UserError(f"{key}={source}: line {n} is not JSON") from None
            missing = [f for f in fields if not isinstance(row, dict) or f not in row]
            if missing:
                raise UserError(f"{key}={source}: line {n} has no field {missing[0]!r}; "
                                f"fields there: {', '.join(row) if isinstance(row, dict) else '-'}")


def load_rows(source: str, split: str, fields: list[str], key: str, subset: str | None = None,
              limit: int | None = None) -> list[dict]:
    """Rows of one split, as dicts holding at least `fields`."""
    import datasets

    datasets.disable_progress_bars()  # the sweep shows its own progress
    source = resolve_source(source)
    try:
        if is_local(source):
            path = Path(source).expanduser()
            builder = LOCAL_BUILDERS.get(path.suffix)
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
    if limit:
        ds = ds.select(range(min(limit, len(ds))))
    return [dict(r) for r in ds]
