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
from pathlib import Path

import torch
from datasets import Dataset
from transformers.trainer_callback import PrinterCallback
from trl import GRPOConfig

from grpo_ablate import hook_tricks
from grpo_ablate.config import RunSpec, grpo_kwargs
from grpo_ablate.config.early_stop import job_pause_step
from grpo_ablate.pausepoints import pause_point
from grpo_ablate.records import RunRecord
from grpo_ablate.runtime import apply_thread_share, process_rank, say, stable_hash
from grpo_ablate.tasks import task_and_tokenizer
from grpo_ablate.tasks.evaluation import generation_backend, policy_rewards
from grpo_ablate.training.callbacks import (
    HISTORY_KEYS,
    DivergenceGuard,
    EvalCallback,
    HistoryCallback,
    StepClock,
)
from grpo_ablate.training.checkpoint import (
    PREFIX,
    CheckpointSchedule,
    RunCheckpoints,
    model_contents,
    resume_lines,
    run_checkpoints,
)
from grpo_ablate.training.faults import FaultInjection, PacingCallback
from grpo_ablate.training.outcome import (
    final_metrics,
    make_record,
    resume_notes,
    run_machine,
    throughput,
)
from grpo_ablate.training.run_state import RunState
from grpo_ablate.training.start_eval import StartEvalCache, start_eval_key
from grpo_ablate.training.trl_layer import AblationGRPOTrainer, with_prompt_index
from grpo_ablate.training.wandb_logger import (
    WandbHistoryCallback,
    finish_run,
    log_eval,
    start_run,
)

log = logging.getLogger(__name__)


def make_reward_function(task, cost: dict):
    """The task's reward as a TRL reward function; also counts generation cost."""

    def reward(prompts, completions, completion_ids, trainer_state=None, **kwargs):
        cost["completions"] += len(completions)
        cost["completion_tokens"] += sum(len(ids) for ids in completion_ids)
        return task.reward(completions, **kwargs)

    reward.__name__ = f"{task.name}_reward"
    return reward


def build_trainer(spec: RunSpec, model_path: str, tokenizer, task, output_dir: str,
                  callbacks: list, state: RunState | None = None, wandb_run=None,
                  checkpoints=None):
    """The run's AblationGRPOTrainer, writing into `state` (a fresh RunState if None)."""
    cfg = spec.config
    hook_tricks.import_modules(cfg["trick"].get("modules"))  # a rank process's own imports
    state = state if state is not None else RunState()
    kwargs = grpo_kwargs(cfg, output_dir)
    if wandb_run is not None:
        callbacks = [*callbacks, WandbHistoryCallback(wandb_run, HISTORY_KEYS, state)]
    if checkpoints is not None:
        callbacks = [*callbacks, checkpoints[1]]
    faults = FaultInjection(cfg["faults"])
    # The clock first (no other callback's work timed), then the faults: a KL blow-up
    # rewrites what the others read.
    callbacks = [StepClock(state), faults, *callbacks]
    rewards = [faults.wrap_reward(make_reward_function(task, state.cost))]
    weights = [1.0]
    for hook, value in hook_tricks.hooks_at("reward_function", cfg["hooks"]):
        function, weight = hook.reward_function(value, cfg, state.activity)
        rewards.append(function)
        weights.append(weight)
    if len(rewards) > 1:  # more reward functions than the task's, each at its weight
        kwargs["reward_weights"] = weights
    pause_point("model_load")
    trainer = AblationGRPOTrainer(
        model=model_path,  # a path: TRL builds the frozen reference from the same checkpoint
        reward_funcs=rewards,
        run_state=state,
        checkpoints=checkpoints,
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_list(with_prompt_index(task.train_rows(), cfg["hooks"])),
        processing_class=tokenizer,
        callbacks=callbacks,
        hooks=cfg["hooks"],
        peft_config=lora_config(cfg["model"].get("lora")),
    )
    faults.attach(trainer)
    return trainer


def lora_config(lora: dict | None):
    """TRL's peft_config for model.lora (peft is imported only when it is on). TRL then
    builds no reference model: the reference log-probs are the adapter-disabled model's."""
    if lora is None:
        return None
    from peft import LoraConfig

    modules = lora["target_modules"]  # None: peft's own modules for the architecture
    return LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                      target_modules=modules if modules in (None, "all-linear") else list(modules),
                      task_type="CAUSAL_LM")


def checkpoint_saving(cfg: dict, checkpoints):
    """(the run's checkpoints, their schedule) when it saves any, else None; what a save that
    was killed left is cleared first."""
    schedule = CheckpointSchedule(cfg["checkpoint"], cfg["trainer"], pause_at=job_pause_step(cfg))
    if process_rank() == 0:
        checkpoints.clean_incoming()
    return (checkpoints, schedule) if schedule.enabled else None


def train_one(spec: RunSpec, raise_errors: bool = False) -> tuple[RunRecord, list[dict]]:
    """Train and evaluate one run, from its newest checkpoint when an earlier attempt left
    one. A run that raises is recorded as failed, unless `raise_errors` (one process of
    several: the launcher ends the others, and the launching process records the failure)."""
    cfg = spec.config
    apply_thread_share()  # GRPO_ABLATE_THREADS, whichever entry point trains this run
    start = time.perf_counter()
    checkpoints = run_checkpoints(spec)
    status, error, trainer, wandb_run, state = "completed", None, None, None, RunState()
    try:  # a checkpoint that cannot be read fails this run only, never the sweep
        task, model_path, tokenizer = task_and_tokenizer(cfg)
        checkpoints.ident["inputs"] = {"model": model_contents(model_path),
                                       "data": stable_hash(task.train_rows(), 64)}
        resume, state = resume_point(spec, checkpoints)
        wandb_run = wandb_for(spec, state)
        evaluate = Evaluator(cfg, task, tokenizer, state, start_eval_cache(cfg, model_path))
        callbacks = run_callbacks(cfg, state, evaluate, wandb_run)
        saving = checkpoint_saving(cfg, checkpoints)
        with tempfile.TemporaryDirectory(prefix="grpo-ablate-") as tmp:
            out = str(checkpoints.incoming) if saving else tmp
            trainer = build_trainer(spec, model_path, tokenizer, task, out, callbacks, state,
                                    wandb_run, saving)
            trainer.remove_callback(PrinterCallback)  # the sweep shows its own progress
            # With vLLM on, held-out evaluations generate on the same engine as training.
            with generation_backend(trainer.vllm_texts if cfg["trainer"]["use_vllm"] else None):
                trainer.ablation_hooks = shaping_hooks(cfg, trainer.model, tokenizer, task)
                trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        if process_rank() == 0:
            checkpoints.clean_incoming()  # TRL's model card, and any save that failed
        state.notes += task.notes()
        if state.guard_reason:
            status, error = "diverged", state.guard_reason
        elif trainer.state.global_step == job_pause_step(cfg):
            status = "paused"  # an early-stop look's: its checkpoint stays, a pause file
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded, the sweep goes on
        if raise_errors:
            finish_run(wandb_run, {}, "failed")
            raise
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        log.warning("run %s (%s seed %s) failed: %s", spec.run_id, spec.arm, spec.seed, error)
    record = finish_record(spec, state, trainer, status, error, time.perf_counter() - start)
    finish_run(wandb_run, record.metrics, status)
    return record, state.history


def wandb_for(spec: RunSpec, state: RunState):
    """One W&B run per run: the first process's (continued under its id when resumed)."""
    if process_rank() != 0:
        return None
    run = start_run(spec.config, spec.arm, spec.seed, spec.run_id, str(spec.sweep_dir), state)
    if run is not None:
        state.wandb_run_id = run.id
    return run


def run_callbacks(cfg: dict, state: RunState, evaluate: Evaluator, wandb_run) -> list:
    """History, the divergence guard, held-out evals (raw and EMA) and pacing, in the order
    they see each step."""
    averages = hook_tricks.hooks_at("policy_average", cfg["hooks"])
    average = None
    if averages:  # the arm's policy is the averaged weights (one average: the first on)
        hook, value = averages[0]

        def average(model, saved):
            return hook.policy_average(value, model, saved)

    evals = EvalCallback(evaluate, state, cfg["eval"]["every_steps"], average,
                         on_eval=lambda *a: log_eval(wandb_run, state, *a),
                         pause_at=job_pause_step(cfg))
    return [HistoryCallback(state), DivergenceGuard(cfg["guard"]["kl_abort"], state), evals,
            PacingCallback(cfg["faults"]["sleep_per_step"])]


def resume_point(spec: RunSpec, checkpoints: RunCheckpoints) -> tuple[Path | None, RunState]:
    """The newest checkpoint an earlier attempt of this run left whose contents check out
    (None: from step 0), and the run state to continue: that checkpoint's, or a fresh one.
    Each checkpoint passed over (refused, or damaged and set aside) is one line and a note;
    a checkpoint made on another machine is resumed, and the record's notes say so."""
    path, state, passed_over = checkpoints.resumable(process_rank())
    state = state or RunState()
    if path is not None:
        state.resumed_from.append(int(path.name.removeprefix(PREFIX)))
        other_machine = checkpoints.machine_note(path)
        if other_machine:
            passed_over.append(other_machine)
    lines = resume_lines(spec, path, passed_over)
    state.notes += [line for line in lines if not line.startswith("resuming ")]
    if process_rank() == 0:  # a multi-process run's launcher said them (announce_resume)
        for line in lines:
            say(line)
    return path, state


def finish_record(spec: RunSpec, state: RunState, trainer, status: str, error: str | None,
                  wall: float) -> RunRecord:
    """The record from the run state; the counts every process made are summed first."""
    cfg = spec.config
    if trainer is not None and status != "failed":
        state.cost = sum_over_processes(state.cost)  # each process counted its own completions
        state.cost["eval_seconds"] = round(state.eval_seconds, 3)
        state.cost.update(throughput(state.cost, trainer.state.global_step, state.step_seconds,
                                     state.generation_seconds,
                                     trainer.accelerator.num_processes))
        if torch.cuda.is_available():  # what `grpo-ablate plan` prints beside the device's
            state.cost["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    state.notes += resume_notes(cfg, state)
    metrics = final_metrics(state) if state.evals and status not in ("failed", "paused") else {}
    return make_record(spec, status, error, wall, metrics, state,
                       steps=trainer.state.global_step if trainer is not None else 0,
                       hooks=trainer.ablation_hooks if trainer else None,
                       where=run_machine(cfg))


class Evaluator:
    """One held-out evaluation of the policy now in the model: `(model, step, final)`.

    Every arm is judged at one temperature; an arm that trains at another also gets its own
    temperature's sampled accuracy, under a separate name, at the end. The evaluations
    between start and end serve the curves and checkpoint regret of the primary metric:
    greedy only (sampling is four fifths of an evaluation's cost). The start (the SFT
    policy) is shared between runs through the start-of-run cache where it can be."""

    def __init__(self, cfg: dict, task, tokenizer, state: RunState,
                 start_cache: StartEvalCache | None) -> None:
        self.cfg, self.task, self.tokenizer, self.state = cfg, task, tokenizer, state
        self.start_cache = start_cache

    def __call__(self, model, step: int, final: bool) -> dict[str, float]:
        if step == 0 and not final and self.start_cache is not None:
            metrics, origin = self.start_cache.get_or_compute(lambda: self.measure(model, 0, False))
            if origin and not any(n.startswith("start-of-run") for n in self.state.notes):
                self.state.notes.append(f"start-of-run evaluation reused from {origin}")
            return dict(metrics)
        return self.measure(model, step, final)

    def measure(self, model, step: int, final: bool) -> dict[str, float]:
        tr, ev = self.cfg["trainer"], self.cfg["eval"]
        between = 0 < step and not final
        out = self.task.evaluate(model, self.tokenizer, tr["max_completion_length"],
                                 ev["temperature"], 0 if between else ev["sampled_k"],
                                 seed=self.cfg["seed"])
        if final and self.state.prompt_outcomes is None:  # the arm's policy (EMA first)
            self.state.prompt_outcomes = self.task.last_outcomes
        if final and tr["temperature"] != ev["temperature"]:
            own = self.task.evaluate(model, self.tokenizer, tr["max_completion_length"],
                                     tr["temperature"], ev["sampled_k"], seed=self.cfg["seed"])
            out["sampled_accuracy_train_temp"] = own["sampled_accuracy"]
        return out


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
    if shaping.get("scale") != "sft_quantiles" or not hook_tricks.reward_values(hooks):
        return hooks
    tr = cfg["trainer"]
    rewards = policy_rewards(task, model, tokenizer, tr["max_completion_length"],
                             tr["temperature"], shaping["sample"])
    return hook_tricks.in_reward_units(hooks, rewards)


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


