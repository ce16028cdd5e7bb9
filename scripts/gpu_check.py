"""The GPU check's steps in Python (scripts/gpu_check.sh runs them, each under a time limit,
and documents the whole check: docs/gpu.md). Each step prints `name=value` figure lines.

    python scripts/gpu_check.py dry-run [WHEEL_DIR]   the steps, and the wheels against pins
    python scripts/gpu_check.py scale                 the review's recipe at 1.5B scale, 2 steps
    python scripts/gpu_check.py sweep                 2 arms x 2 seeds, joblib, one GPU per run
    python scripts/gpu_check.py refusals              what one GPU must refuse; ZeRO configs

`--rehearse` runs scale, sweep and refusals on a CPU at toy sizes: the same code paths, so a
script error shows before a GPU machine is used (`bash scripts/gpu_check.sh --rehearse` runs
every step of the check that way)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = Path(os.environ.get("GPU_WHEELS_LIST", ROOT / "scripts" / "gpu_wheels.txt"))
STEPS = [
    ("1 install", "pip install --no-index --no-deps --target $SITE $WHEELS/*.whl; "
                  "python3 -m grpo_ablate.cli --version"),
    ("2 gpu tests", "pytest -m gpu tests/test_training_gpu.py (GPU training unchanged by evaluations; "
                    "a tiny Qwen2 checkpoint in bf16)"),
    ("3 overhead", "scripts/bench_overhead.py on CUDA in bf16: trainer_overhead_ratio, "
                   "overhead_ratio against bare TRL"),
    ("4 scale", "the review's recipe on a Qwen2.5-1.5B-shaped model (random weights): 64 groups "
                "of 16, 1024 tokens, bf16, gradient checkpointing, 2 steps on gsm8k rows"),
    ("5 sweep", "2 arms x 2 seeds under joblib with launch.gpus_per_job=1: one run at a time "
                "on the one GPU, then the report"),
    ("6 refusals", "launch.processes=2 on one GPU refused with one line; the ZeRO configs load; "
                   "DeepSpeed runs skipped without deepspeed"),
]
# The published Qwen2.5-1.5B architecture (its config.json on the hub).
QWEN_1P5B = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                 max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                 tie_word_embeddings=True)
TOY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, vocab_size=151936, max_position_embeddings=512,
           tie_word_embeddings=True)
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
REVIEW_STEPS = 1000  # the recipe's max_steps (conf/recipe/baseline.yaml)
CATALOG_SEEDS = 5


def figure(name: str, value) -> None:
    print(f"{name}={value}", flush=True)


# ---------------------------------------------------------------------------- dry run
def wheel_name(filename: str) -> tuple[str, str, str]:
    """(normalised name, version, tags) of a wheel file."""
    parts = filename[:-len(".whl")].split("-")
    return re.sub(r"[-_.]+", "-", parts[0]).lower(), parts[1], "-".join(parts[-3:])


def fits_target(tags: str) -> bool:
    """Installable on CPython 3.12, manylinux x86_64."""
    py, abi, plat = tags.split("-")
    return any(p in ("py3", "cp312", "py2.py3") or p.startswith("py3") for p in py.split(".")) \
        and any(a in ("none", "cp312", "abi3") for a in abi.split(".")) \
        and any(p == "any" or (p.startswith("manylinux") and p.endswith("x86_64"))
                for p in plat.split("."))


def pins() -> dict[str, object]:
    """pyproject's requirement specifiers by normalised name (dependencies and extras)."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += [x for x in extra if not x.startswith("grpo-ablate")]
    out = {}
    for line in lines:
        req = Requirement(line)
        out[re.sub(r"[-_.]+", "-", req.name).lower()] = req.specifier
    return out


def dry_run(folder: Path) -> int:
    for name, what in STEPS:
        print(f"step {name}: {what}")
    wanted = [line.split()[0] for line in WHEELS.read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    have = {}
    for path in folder.glob("*.whl"):
        name, version, tags = wheel_name(path.name)
        have.setdefault(name, []).append((version, tags, path.name))
    specifiers = pins()
    total = 0
    for req in wanted:
        raw, version = req.split("==")
        name = re.sub(r"[-_.]+", "-", raw).lower()
        found = [h for h in have.get(name, []) if h[0] == version]
        if not found:
            print(f"gpu_check: missing wheel {req} in {folder} (run: bash scripts/gpu_wheels.sh)")
            return 1
        if not fits_target(found[0][1]):
            print(f"gpu_check: {found[0][2]} does not install on CPython 3.12 manylinux x86_64")
            return 1
        if name in specifiers and not specifiers[name].contains(version, prereleases=True):
            print(f"gpu_check: {req} is outside pyproject's pin {name}{specifiers[name]}")
            return 1
        if len(have[name]) > 1:
            print(f"gpu_check: {len(have[name])} wheels of {name} in {folder}: keep one")
            return 1
        total += (folder / found[0][2]).stat().st_size
        print(f"wheel {found[0][2]}: ok")
    figure("gpu_wheels", len(wanted))
    figure("gpu_wheels_mib", f"{total / 2**20:.1f}")
    return 0


# ---------------------------------------------------------------------------- 4: scale
def build_checkpoint(folder: Path, arch: dict, on_gpu: bool) -> Path:
    """A Qwen2 model with random weights and a word-level tokenizer over the full vocabulary
    (special tokens where Qwen2.5's are), with ChatML: no download."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if (folder / "config.json").is_file():
        return folder
    vocab = {f"w{i}": i for i in range(arch["vocab_size"] - 3)}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab.update({tok: arch["vocab_size"] - 3 + i for i, tok in enumerate(specials)})
    words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template=CHATML)
    config = Qwen2Config(**arch, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device("cuda" if on_gpu else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16 if on_gpu else torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def scale(rehearse: bool) -> int:
    import torch
    from transformers import AutoTokenizer, TrainerCallback

    from grpo_ablate.config import check_trainable, specs_for
    from grpo_ablate.runtime import quiet_libraries
    from grpo_ablate.tasks import get_task
    from grpo_ablate.training.train import build_trainer

    quiet_libraries()
    on_gpu = torch.cuda.is_available() and not rehearse
    t0 = time.perf_counter()
    folder = build_checkpoint(Path(os.environ.get("GPU_CHECK_TMP", "/tmp")) / "qwen-1p5b-random",
                              TOY if rehearse else QWEN_1P5B, on_gpu)
    figure("gpu_build_seconds", f"{time.perf_counter() - t0:.1f}")
    sizes = (["recipe.prompts_per_step=2", "recipe.group_size=4",
              "trainer.max_completion_length=16"] if rehearse else [])
    (spec,) = specs_for(["model=qwen2.5-1.5b", f"model.path={folder}", "task=gsm8k",
                         "task.dataset.train=fixture:math_train.jsonl",
                         "task.dataset.eval=fixture:math_test.jsonl", "task.dataset.subset=null",
                         "task.chat=true", "trainer.max_steps=2", "run_cache=null",
                         *(["trainer.use_cpu=true", "trainer.gradient_checkpointing=false"]
                           if rehearse else []), *sizes], multirun=False)
    check_trainable([spec])
    cfg = spec.config
    task = get_task(cfg["task"])
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    task.use_tokenizer(tokenizer)

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.times, self.start = [], 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.start)

    steps = StepTimes()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(spec, str(folder), tokenizer, task, tmp, [steps])
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
    per_step = sum(steps.times) / len(steps.times)
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history
               if "completions/mean_length" in h]
    cost = trainer.run_state.cost
    figure("gpu_groups_per_step", cost["completions"] // cfg["trainer"]["num_generations"]
           // max(1, len(steps.times)))
    figure("gpu_completions_per_step", cost["completions"] // max(1, len(steps.times)))
    figure("gpu_completion_mean_length", f"{max(lengths):.0f} (max_completion_length "
           f"{cfg['trainer']['max_completion_length']})")
    figure("gpu_seconds_per_step", f"{per_step:.1f}")
    figure("gpu_generation_share", f"{trainer.generation_seconds / sum(steps.times):.2f}")
    figure("gpu_peak_memory_gib", f"{torch.cuda.max_memory_allocated() / 2**30:.1f}" if on_gpu
           else "skipped (no CUDA device: a rehearsal)")
    arms = 25  # the catalog's 24 tricks and the baseline
    hours = per_step * REVIEW_STEPS * arms * CATALOG_SEEDS / 3600
    figure("catalog_gpu_hours_1p5b", f"{hours:.0f} ({arms} arms x {CATALOG_SEEDS} seeds x "
           f"{REVIEW_STEPS} steps at {per_step:.1f} s, one GPU, training only)")
    ok = max(lengths) <= cfg["trainer"]["max_completion_length"]
    return 0 if ok else 1


# ---------------------------------------------------------------------------- 5: sweep
def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpo_ablate.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "WANDB_MODE": "offline"})


def sweep(rehearse: bool) -> int:
    out = Path(os.environ.get("GPU_CHECK_TMP", "/tmp")) / "gpu-sweep"
    shutil.rmtree(out, ignore_errors=True)  # an earlier check's records would be reused
    device = ["trainer.use_cpu=true"] if rehearse else \
        ["trainer.use_cpu=false", "trainer.bf16=null", "launch.gpus_per_job=1"]
    t0 = time.perf_counter()
    res = cli("sweep", "sweep=smoke", "trick=baseline,kl_off", "seed=0,1", "launcher=joblib",
              "hydra.launcher.n_jobs=2", "trainer.max_steps=3", "eval.every_steps=0",
              "run_cache=null", f"out_root={out}", *device)
    wall = time.perf_counter() - t0
    print(res.stderr[-3000:], file=sys.stderr)
    paths = sorted((out / "smoke").glob("runs/*/record.json"))
    records = [json.loads(p.read_text()) for p in paths]
    figure("gpu_sweep_runs", f"{sum(r['status'] == 'completed' for r in records)}/4 completed")
    figure("gpu_sweep_seconds", f"{wall:.1f}")
    # One GPU, one run at a time: each run's span (its record's write time, back by its wall
    # time, which counts its processes' start) overlaps no other's.
    spans = sorted((p.stat().st_mtime - r["wall_seconds"], p.stat().st_mtime)
                   for p, r in zip(paths, records, strict=True))
    overlaps = sum(b[0] < a[1] - 0.5 for a, b in zip(spans, spans[1:], strict=False))
    figure("gpu_sweep_overlapping_runs", f"{overlaps} (0: the GPU reservation held them to one at "
           "a time)" if not rehearse else f"{overlaps} (a CPU rehearsal: 2 workers overlap)")
    figure("gpu_sweep_report", (out / "smoke" / "report.json").is_file())
    return 0 if res.returncode == 0 and len(records) == 4 else 1


# ---------------------------------------------------------------------------- 6: refusals
def refusals(rehearse: bool) -> int:
    from accelerate.commands.config.config_args import load_config_from_file

    from grpo_ablate.config.paths import ACCELERATE_DIR

    code = 0
    res = cli("run", "launch.processes=2", "trainer.use_cpu=false" if not rehearse else
              "launch.accelerate=zero2", "trainer.max_steps=1")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    figure("gpu_two_processes_refused", f"exit {res.returncode}: {lines[-1] if lines else ''}")
    code |= int(res.returncode != 2 or len(lines) != 1)
    for path in sorted(ACCELERATE_DIR.glob("*.yaml")):
        kind = load_config_from_file(str(path)).distributed_type.name
        figure(f"accelerate_{path.stem}", kind)
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        figure("deepspeed_runs", "skipped (deepspeed is not installed on this machine)")
    return code


def main() -> int:
    args = sys.argv[1:]
    rehearse = "--rehearse" in args
    args = [a for a in args if a != "--rehearse"]
    step = args[0] if args else "dry-run"
    if step == "dry-run":
        return dry_run(Path(args[1]) if len(args) > 1 else ROOT / ".whl")
    return {"scale": scale, "sweep": sweep, "refusals": refusals}[step](rehearse)


if __name__ == "__main__":
    sys.exit(main())
