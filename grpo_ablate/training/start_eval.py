"""The start-of-run evaluation, computed once. Every arm of a seed starts from the same SFT
policy and evaluates it the same way (the same held-out prompts, sampling settings and seed,
in an isolated RNG), so its start-of-run evaluation is the same number for all of them: it
is computed by the first run that needs it and reused by the others, from the cache folder.

The key holds everything the numbers depend on: the checkpoint (its files' sizes and times,
or the hub id), the task section, the evaluation settings, the seed, the number of
processes, the device and precision, and the machine's numeric identity (another CPU model
computes other last digits: docs/determinism.md). A reused evaluation is what this run would
have computed, so records are the same with or without the cache; the record's notes say
where it came from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from grpo_ablate.records import write_cache_file
from grpo_ablate.runtime import cache_root, numeric_id, stable_hash


def checkpoint_fingerprint(path: str) -> str:
    """A local checkpoint's files (name, size, modification time); a hub id as given."""
    local = Path(path)
    if not local.is_dir():
        return path
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in local.iterdir()
                   if p.is_file())
    return stable_hash([str(local.resolve()), files], 64)


def start_eval_key(config: dict, model_path: str) -> str:
    tr = config["trainer"]
    parts = {"checkpoint": checkpoint_fingerprint(model_path), "task": config["task"],
             "eval": {k: config["eval"][k] for k in ("sampled_k", "temperature")},
             "max_new_tokens": tr["max_completion_length"], "seed": config["seed"],
             "processes": config["launch"]["processes"], "bf16": tr["bf16"],
             "use_vllm": tr["use_vllm"], "machine": numeric_id(tr["use_cpu"]), "v": 1}
    if config["model"].get("lora"):  # an adapter's start is its base, but is keyed apart
        parts["lora"] = config["model"]["lora"]
    return stable_hash(parts, 20)


class StartEvalCache:
    """get_or_compute(compute) -> (metrics, origin): origin is None when computed here, else
    the cache file it came from. A lock per key: concurrent runs of one seed compute it once."""

    def __init__(self, key: str, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "start-evals"
        self.path = self.root / f"{key}.json"

    def get_or_compute(self, compute: Callable[[], dict]) -> tuple[dict, str | None]:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError:  # no writable cache: compute, as without one
            return compute(), None
        with FileLock(str(self.path.with_suffix(".lock"))):
            try:
                return json.loads(self.path.read_text())["metrics"], str(self.path)
            except (OSError, ValueError, KeyError):
                pass
            metrics = compute()
            write_cache_file(self.path, json.dumps({"metrics": metrics}))
            return metrics, None
