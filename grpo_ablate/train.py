"""Train one run: TRL's GRPOTrainer (+ the hooks TRL lacks) -> callbacks -> held-out eval
(raw, and EMA when on) -> a RunRecord. A run never raises: a bad run is a result
(`diverged` or `failed`) with a complete record."""

from __future__ import annotations

import logging
import math
import os
import platform
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path

import torch

from grpo_ablate import __version__
from grpo_ablate.callbacks import (
    HISTORY_KEYS,
    DivergenceGuard,
    EvalCallback,
    HistoryCallback,
    PacingCallback,
)
from grpo_ablate.config import (
    REPO_ROOT,
    RunSpec,
    completions_per_step,
    groups_per_step,
    grpo_kwargs,
)
from grpo_ablate.diagnostics import diagnose, length_growth
from grpo_ablate.pausepoints import pause_point
from grpo_ablate.store import RunRecord
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.evaluation import generation_backend, policy_rewards
from grpo_ablate.tricks import shaping_in_reward_units, shaping_values
from grpo_ablate.wandb_logger import WandbHistoryCallback, finish_run, log_eval, start_run

log = logging.getLogger(__name__)


def resolve_model_path(config: dict, task) -> str:
    """A hub id or local checkpoint as given, or the cached embedded tiny policy."""
    model = config["model"]
    if model.get("path"):
        local = Path(model["path"]).expanduser()
        return str(local) if local.exists() else model["path"]
    from grpo_ablate.policy import ensure_tiny_policy

    return str(ensure_tiny_policy(model["arch"], model["sft"], task))


def make_reward_function(task, faults: dict, cost: dict):
    """The task's reward as a TRL reward function; also counts generation cost."""

    def reward(prompts, completions, completion_ids, trainer_state=None, **kwargs):
        at, rank = faults.get("reward_raises_at_step"), faults.get("reward_raises_on_rank")
        if at is not None and trainer_state is not None and trainer_state.global_step >= at \
                and rank in (None, process_rank()):
            raise RuntimeError(f"injected fault: reward function raised at step "
                               f"{trainer_state.global_step}")
        cost["completions"] += len(completions)
        cost["completion_tokens"] += sum(len(ids) for ids in completion_ids)
        return task.reward(completions, **kwargs)

    reward.__name__ = f"{task.name}_reward"
    return reward


def build_trainer(spec: RunSpec, model_path: str, tokenizer, task, output_dir: str,
                  callbacks: list, cost: dict, wandb_run=None):
    from datasets import Dataset
    from trl import GRPOConfig

    from grpo_ablate.trl_hooks import AblationGRPOTrainer

    cfg = spec.config
    kwargs = grpo_kwargs(cfg, output_dir)
    if wandb_run is not None:
        callbacks = [*callbacks, WandbHistoryCallback(wandb_run, HISTORY_KEYS)]
    pause_point("model_load")
    return AblationGRPOTrainer(
        model=model_path,  # a path: TRL builds the frozen reference from the same checkpoint
        reward_funcs=make_reward_function(task, cfg["faults"], cost),
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_list(task.train_rows()),
        processing_class=tokenizer,
        callbacks=callbacks,
        hooks=cfg["hooks"],
        faults=cfg["faults"],
    )


def process_rank() -> int:
    """This process's rank in a multi-process run (set by `accelerate launch`); 0 alone."""
    return int(os.environ.get("RANK", "0"))


def train_one(spec: RunSpec, raise_errors: bool = False) -> tuple[RunRecord, list[dict]]:
    """Train and evaluate one run. A run that raises is recorded as failed, unless
    `raise_errors` (one process of several: the launcher ends the others, and the launching
    process records the failure)."""
    cfg = spec.config
    start = time.perf_counter()
    history = HistoryCallback()
    guard = DivergenceGuard(cfg["guard"]["kl_abort"])
    cost = {"completions": 0, "completion_tokens": 0}
    status, error, evals, trainer = "completed", None, None, None
    steps = 0
    # One W&B run per run: the first process's.
    wandb_run = start_run(cfg, spec.arm, spec.seed, spec.run_id, str(spec.sweep_dir)) \
        if process_rank() == 0 else None
    try:
        from transformers import AutoTokenizer

        task = get_task(cfg["task"])
        model_path = resolve_model_path(cfg, task)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        task.use_tokenizer(tokenizer)
        tr, ev = cfg["trainer"], cfg["eval"]

        def evaluate(model, final: bool) -> dict[str, float]:
            # Every arm is judged at one temperature; an arm that trains at another also gets
            # its own temperature's sampled accuracy, under a separate name, at the end.
            out = task.evaluate(model, tokenizer, tr["max_completion_length"], ev["temperature"],
                                ev["sampled_k"], seed=cfg["seed"])
            if final and tr["temperature"] != ev["temperature"]:
                own = task.evaluate(model, tokenizer, tr["max_completion_length"],
                                    tr["temperature"], ev["sampled_k"], seed=cfg["seed"])
                out["sampled_accuracy_train_temp"] = own["sampled_accuracy"]
            return out

        ema = cfg["hooks"].get("ema")
        evals = EvalCallback(evaluate, history, ev["every_steps"], ema["decay"] if ema else None,
                             guard, on_eval=lambda *a: log_eval(wandb_run, *a))
        callbacks = [history, guard, evals, PacingCallback(cfg["faults"]["sleep_per_step"])]
        with tempfile.TemporaryDirectory(prefix="grpo-ablate-") as tmp:
            trainer = build_trainer(spec, model_path, tokenizer, task, tmp, callbacks, cost,
                                    wandb_run)
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)  # the sweep shows its own progress
            # With vLLM on, held-out evaluations generate on the same engine as training.
            with generation_backend(trainer.vllm_texts if tr["use_vllm"] else None):
                trainer.ablation_hooks = shaping_hooks(cfg, trainer.model, tokenizer, task)
                trainer.train()
            steps = trainer.state.global_step
            cost = sum_over_processes(cost)  # each process counted its own completions
        if guard.reason:
            status, error = "diverged", guard.reason
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        if raise_errors:
            finish_run(wandb_run, {}, "failed")
            raise
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        log.warning("run %s (%s seed %s) failed: %s", spec.run_id, spec.arm, spec.seed, error)
    wall = time.perf_counter() - start
    metrics = final_metrics(evals) if evals is not None and evals.evals and status != "failed" \
        else {}
    record = make_record(spec, status, error, wall, metrics, history.rows, evals, steps, cost,
                         trainer.activity if trainer is not None else {},
                         shaping_values(trainer.ablation_hooks) if trainer is not None else {})
    finish_run(wandb_run, metrics, status)
    return record, history.rows


def shaping_hooks(cfg: dict, model, tokenizer, task) -> dict:
    """The hooks in reward units. Reward tricks set as quantiles of the SFT policy's rewards
    (task.shaping.scale=sft_quantiles, e.g. a reward model's scores) are measured here, on the
    policy before its first step, from one sample on task.shaping.sample training prompts."""
    hooks, shaping = cfg["hooks"], cfg["task"].get("shaping") or {}
    if shaping.get("scale") != "sft_quantiles" or not shaping_values(hooks):
        return hooks
    tr = cfg["trainer"]
    rewards = policy_rewards(task, model, tokenizer, tr["max_completion_length"],
                             tr["temperature"], shaping["sample"])
    return shaping_in_reward_units(hooks, rewards)


def make_record(spec: RunSpec, status: str, error: str | None, wall: float,
                metrics: dict | None = None, rows: list[dict] | None = None,
                evals: EvalCallback | None = None, steps: int = 0, cost: dict | None = None,
                counts: dict | None = None, values: dict | None = None) -> RunRecord:
    """The run's record from what training left (nothing, for a run that failed early)."""
    cfg, rows = spec.config, rows or []
    metrics = metrics or {}
    cost = cost or {"completions": 0, "completion_tokens": 0}
    gain = metrics.get("eval/accuracy_gain")
    lrs = [r["learning_rate"] for r in rows if "learning_rate" in r]
    return RunRecord(
        run_id=spec.run_id, sweep=cfg["sweep_name"], arm=spec.arm, seed=spec.seed,
        model=cfg["model"]["name"], task=cfg["task"]["name"], status=status, error=error,
        config=cfg, metrics=metrics, stability=stability(rows, evals),
        diagnostics=diagnose(rows, cfg["trainer"]["max_steps"], gain,
                             cfg["guard"]["min_accuracy_gain"]),
        steps=steps, wall_seconds=round(wall, 3),
        cost={**cost, "optimizer_steps": steps, "total_lr": float(sum(lrs)),
              "completions_per_step": completions_per_step(cfg),
              "groups_per_step": groups_per_step(cfg)},
        activity=trick_activity(cfg, rows, counts or {}, values or {}),
        versions=versions(), git_sha=git_sha(),
    )


def sum_over_processes(counts: dict[str, int]) -> dict[str, int]:
    """Counts summed over the processes of a multi-process run (unchanged when alone)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return counts
    keys = sorted(counts)
    device = f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
    total = torch.tensor([counts[k] for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return {k: int(v) for k, v in zip(keys, total.tolist(), strict=True)}


def final_metrics(evals: EvalCallback) -> dict[str, float]:
    """eval/<name> of the arm's policy at the last eval (the EMA weights when EMA is on),
    the SFT start for reference, and raw/eval/<name> for the raw weights beside EMA."""
    (_, first), (_, last) = evals.evals[0], evals.evals[-1]
    out = {f"eval/{k}": v for k, v in last.items()}
    out.update({f"eval/start_{k}": v for k, v in first.items()
                if k != "sampled_accuracy_train_temp"})
    out["eval/accuracy_gain"] = last["accuracy"] - first["accuracy"]
    if evals.raw_evals:
        out.update({f"raw/eval/{k}": v for k, v in evals.raw_evals[-1][1].items()})
    return out


def stability(rows: list[dict], evals: EvalCallback | None) -> dict[str, float | None]:
    """The second study's per-run stability numbers, from the history."""

    def series(key):
        return [r[key] for r in rows if key in r and r[key] is not None and math.isfinite(r[key])]

    def regret(evs):
        acc = [m["accuracy"] for _, m in evs]
        return max(acc) - acc[-1] if acc else None

    kl, ent, gn, rew = (series(k) for k in ("kl", "entropy", "grad_norm", "reward"))
    half = rew[len(rew) // 2:]
    diffs = [b - a for a, b in zip(half, half[1:], strict=False)]
    out = {
        "kl_final": kl[-1] if kl else None,
        "kl_max": max(kl) if kl else None,
        "entropy_ratio_final": ent[-1] / ent[0] if ent and ent[0] > 0 else None,
        "length_growth": length_growth(rows),
        "grad_norm_max": max(gn) if gn else None,
        "reward_volatility": float(torch.tensor(diffs).std()) if len(diffs) > 1 else None,
        "checkpoint_regret": regret(evals.evals) if evals is not None else None,
    }
    if evals is not None and evals.raw_evals:
        out["checkpoint_regret_raw"] = regret(evals.raw_evals)
    return out


def _fraction(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def trick_activity(cfg: dict, rows: list[dict], counts: dict, values: dict | None = None) -> dict:
    """How much the arm's trick acted: the share of the units it could change that it did
    change (samples clipped, groups whose advantages the length penalty moved, samples
    dropped, steps whose gradient clipping differed from the baseline's). A trick that only
    sets a config value acts on every step by construction. The baseline arm: empty."""
    keys = cfg["trick"]["keys"]
    if not keys:
        return {}
    tr = cfg["trainer"]
    norms = [r["grad_norm"] for r in rows if r.get("grad_norm") is not None]
    details = {
        "reward_clip_samples": _fraction(counts.get("clip_changed", 0), counts.get("clip_samples", 0)),
        "length_penalty_groups": _fraction(counts.get("length_groups_changed", 0),
                                           counts.get("length_groups", 0)),
        "filter_dropped_in_window": _fraction(counts.get("filter_dropped", 0),
                                              counts.get("filter_samples", 0)),
    }
    own, base = tr["max_grad_norm"] or math.inf, cfg["recipe"]["max_grad_norm"] or math.inf
    if norms:
        details["grad_clip_steps"] = sum(g > own for g in norms) / len(norms)
        if own != base:  # they clip differently only where the norm passes the lower bound
            details["grad_clip_differs_steps"] = sum(g > min(own, base) for g in norms) / len(norms)
    if tr["num_iterations"] > 1:
        clip = [r.get("clip_ratio/region_mean", 0.0) or 0.0 for r in rows if "loss" in r]
        details["ratio_clip_steps"] = _fraction(sum(c > 0 for c in clip), len(clip))
        details["ratio_clip_tokens"] = _fraction(sum(clip), len(clip))
    measured = {
        "hooks.reward_clip": ("reward_clip_samples", "samples whose reward the clip changed"),
        "hooks.length_penalty": ("length_penalty_groups",
                                 "groups whose advantages the length penalty changed"),
        "hooks.filter_low_reward": ("filter_dropped_in_window",
                                    "samples dropped, in the filter's window"),
        "trainer.max_grad_norm": ("grad_clip_differs_steps",
                                  "steps where its gradient clipping differs from the baseline's"),
    }
    acted, measures = [], []
    for key in keys:
        name, what = measured.get(key, (None, "a config value: acts on every step"))
        value = details.get(name) if name else 1.0
        acted.append(value if value is not None else 0.0)
        measures.append(what)
    best = max(range(len(acted)), key=acted.__getitem__)
    out = {"acted": acted[best], "measure": measures[best],
           "details": {k: v for k, v in details.items() if v is not None}}
    # The reward tricks' values in reward units (after any quantile measurement), for the
    # arm's own keys: the report says which values were used.
    own = {k: v for k, v in (values or {}).items()
           if f"hooks.{k.removesuffix('_low').removesuffix('_high')}" in keys
           or (k == "filter_threshold" and "hooks.filter_low_reward" in keys)}
    if own:
        out["values"] = own
    return out


@cache
def versions() -> dict[str, str]:
    import transformers
    import trl

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "trl": trl.__version__,
            "grpo_ablate": __version__}


@cache
def git_sha() -> str | None:
    """The checkout's commit; None for an installed wheel (no .git beside the package)."""
    if not (REPO_ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
