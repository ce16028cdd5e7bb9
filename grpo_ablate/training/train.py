"""Train one run: TRL's GRPOTrainer (+ the hooks TRL lacks) -> callbacks -> held-out eval
(raw, and EMA when on) -> a RunRecord. A run never raises: a bad run is a result
(`diverged` or `failed`) with a complete record.

The training layer imports torch, transformers and TRL at its top: it is loaded only by a
process that is about to train (grpo_ablate.launch imports it where a run starts)."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections import Counter

import torch
from datasets import Dataset
from transformers import AutoTokenizer
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig

from grpo_ablate.config import RunSpec, grpo_kwargs
from grpo_ablate.models import resolve_model_path
from grpo_ablate.pausepoints import pause_point
from grpo_ablate.records import RunRecord
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.evaluation import generation_backend, policy_rewards
from grpo_ablate.training.callbacks import (
    HISTORY_KEYS,
    DivergenceGuard,
    EvalCallback,
    HistoryCallback,
    PacingCallback,
)
from grpo_ablate.training.outcome import final_metrics, make_record, run_machine
from grpo_ablate.training.start_eval import StartEvalCache, start_eval_key
from grpo_ablate.training.tricks import (
    SoftOverlongReward,
    shaping_in_reward_units,
    shaping_values,
)
from grpo_ablate.training.trl_hooks import AblationGRPOTrainer
from grpo_ablate.training.wandb_logger import (
    WandbHistoryCallback,
    finish_run,
    log_eval,
    start_run,
)

log = logging.getLogger(__name__)


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
    cfg = spec.config
    kwargs = grpo_kwargs(cfg, output_dir)
    if wandb_run is not None:
        callbacks = [*callbacks, WandbHistoryCallback(wandb_run, HISTORY_KEYS)]
    activity: Counter = Counter()
    rewards = [make_reward_function(task, cfg["faults"], cost)]
    soft = cfg["hooks"].get("soft_overlong")
    if soft is not None:  # TRL's function as a second reward, at its weight
        rewards.append(SoftOverlongReward(cfg["trainer"]["max_completion_length"],
                                          soft["cache_fraction"], activity))
        kwargs["reward_weights"] = [1.0, soft["weight"]]
    pause_point("model_load")
    return AblationGRPOTrainer(
        model=model_path,  # a path: TRL builds the frozen reference from the same checkpoint
        reward_funcs=rewards,
        activity=activity,
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_list(task.train_rows()),
        processing_class=tokenizer,
        callbacks=callbacks,
        hooks=cfg["hooks"],
        faults=cfg["faults"],
        peft_config=lora_config(cfg["model"].get("lora")),
    )


def lora_config(lora: dict | None):
    """TRL's peft_config for model.lora (peft is imported only when it is on). TRL then
    builds no reference model: the reference log-probs are the adapter-disabled model's."""
    if lora is None:
        return None
    from peft import LoraConfig

    modules = lora["target_modules"]
    return LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                      target_modules=modules if modules == "all-linear" else list(modules),
                      task_type="CAUSAL_LM")


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
    steps, notes = 0, []
    # One W&B run per run: the first process's.
    wandb_run = start_run(cfg, spec.arm, spec.seed, spec.run_id, str(spec.sweep_dir)) \
        if process_rank() == 0 else None
    try:
        task = get_task(cfg["task"])
        model_path = resolve_model_path(cfg, task)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        task.use_tokenizer(tokenizer)
        tr, ev = cfg["trainer"], cfg["eval"]
        start_cache = start_eval_cache(cfg, model_path)

        def evaluate(model, final: bool, step: int) -> dict[str, float]:
            if step == 0 and not final and start_cache is not None:  # the SFT policy, once
                metrics, origin = start_cache.get_or_compute(lambda: evaluate(model, False, -1))
                if origin and not any(n.startswith("start-of-run") for n in notes):
                    notes.append(f"start-of-run evaluation reused from {origin}")
                return dict(metrics)
            # Every arm is judged at one temperature; an arm that trains at another also gets
            # its own temperature's sampled accuracy, under a separate name, at the end. The
            # evaluations between start and end serve the curves and checkpoint regret of the
            # primary metric: greedy only (sampling is four fifths of an evaluation's cost).
            between = 0 < step and not final
            out = task.evaluate(model, tokenizer, tr["max_completion_length"], ev["temperature"],
                                0 if between else ev["sampled_k"], seed=cfg["seed"])
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
            trainer.remove_callback(PrinterCallback)  # the sweep shows its own progress
            # With vLLM on, held-out evaluations generate on the same engine as training.
            with generation_backend(trainer.vllm_texts if tr["use_vllm"] else None):
                trainer.ablation_hooks = shaping_hooks(cfg, trainer.model, tokenizer, task)
                trainer.train()
            steps = trainer.state.global_step
            cost = sum_over_processes(cost)  # each process counted its own completions
        notes += task.notes()
        cost["eval_seconds"] = round(evals.seconds, 3)
        cost["generation_seconds"] = round(trainer.generation_seconds, 3)
        if torch.cuda.is_available():  # what `grpo-ablate plan` prints beside the device's
            cost["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
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
                         shaping_values(trainer.ablation_hooks) if trainer is not None else {},
                         notes=notes, where=run_machine(cfg))
    finish_run(wandb_run, metrics, status)
    return record, history.rows


def start_eval_cache(cfg: dict, model_path: str) -> StartEvalCache | None:
    """The shared start-of-run evaluation (training/start_eval.py); not for a run on several
    processes (they generate it together, and must agree on computing it), nor where
    GRPO_ABLATE_START_EVAL_CACHE=0."""
    if cfg["launch"]["processes"] > 1 or os.environ.get("GRPO_ABLATE_START_EVAL_CACHE") == "0":
        return None
    return StartEvalCache(start_eval_key(cfg, model_path))


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


