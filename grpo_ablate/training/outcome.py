"""What a run leaves: its record (metrics of the arm's policy, the second study's stability
numbers, the review's monitoring-rule hits, how much the trick acted, the budget), and its
provenance (library versions, the checkout's commit, the machine the numbers came from)."""

from __future__ import annotations

import math
import platform
import statistics
from functools import cache

from grpo_ablate import __version__
from grpo_ablate.config import (
    RunSpec,
    completions_per_step,
    groups_per_step,
    model_label,
)
from grpo_ablate.config.early_stop import pause_step
from grpo_ablate.hook_tricks import HOOKS, counted_details, measure_of, reward_values
from grpo_ablate.records import RunRecord
from grpo_ablate.runtime import device_label, git_sha, machine, package_version
from grpo_ablate.training.diagnostics import diagnose, length_growth
from grpo_ablate.training.run_state import RunState

WEIGHT_MOVED = 1e-3  # an importance weight counts as moved beyond this (float noise aside)


def make_record(spec: RunSpec, status: str, error: str | None, wall: float,
                metrics: dict | None = None, state: RunState | None = None, steps: int = 0,
                hooks: dict | None = None, where: dict | None = None) -> RunRecord:
    """The run's record from its run state (none, for a run that failed before training).
    `state.cost` is the whole run's (summed over processes); `hooks`: the hook tricks'
    values as the trainer used them (in reward units); `where`: the machine it computed on
    (run_machine), None for a run that never started."""
    cfg, state = spec.config, state if state is not None else RunState()
    rows, metrics = state.history, metrics or {}
    gain = metrics.get("eval/accuracy_gain")
    lrs = [r["learning_rate"] for r in rows if "learning_rate" in r]
    return RunRecord(
        run_id=spec.run_id, sweep=cfg["sweep_name"], arm=spec.arm, seed=spec.seed,
        model=model_label(cfg), task=cfg["task"]["name"], status=status, error=error,
        config=cfg, metrics=metrics, stability=stability(rows, state),
        diagnostics=diagnose(rows, cfg["trainer"]["max_steps"], gain,
                             cfg["guard"]["min_accuracy_gain"]),
        steps=steps, wall_seconds=round(wall, 3),
        cost={**state.cost, "optimizer_steps": steps, "total_lr": float(sum(lrs)),
              "completions_per_step": completions_per_step(cfg),
              "groups_per_step": groups_per_step(cfg)},
        activity=trick_activity(cfg, rows, state.activity, hooks),
        versions=versions(), git_sha=git_sha(), machine=where, notes=list(state.notes),
        resumed_from=list(state.resumed_from),
        prompts=state.prompt_outcomes if status != "failed" else None,
    )


def throughput(counts: dict, steps: int, step_seconds: float, generation_seconds: float,
               devices: int) -> dict[str, float]:
    """The run's time per step, split into generation (sampling and scoring: rewards, the
    old and reference log-probs) and training, and its throughput as verl defines
    `perf/throughput`: prompt + completion tokens over step seconds x devices. `counts`
    holds the whole run's prompt and completion tokens; the seconds are the first
    process's."""
    tokens = counts.get("prompt_tokens", 0) + counts.get("completion_tokens", 0)
    per_step = step_seconds / steps if steps else 0.0
    generation = generation_seconds / steps if steps else 0.0
    return {"generation_seconds": round(generation_seconds, 3),
            "step_seconds": round(step_seconds, 3), "devices": devices,
            "generation_seconds_per_step": round(generation, 4),
            "training_seconds_per_step": round(max(0.0, per_step - generation), 4),
            "tokens_per_second_per_device": round(tokens / (step_seconds * devices), 2)
            if step_seconds > 0 else 0.0}


def final_metrics(state: RunState) -> dict[str, float]:
    """eval/<name> of the arm's policy at the last eval (the EMA weights when EMA is on),
    the SFT start for reference, and raw/eval/<name> for the raw weights beside EMA."""
    (_, first), (_, last) = state.evals[0], state.evals[-1]
    out = {f"eval/{k}": v for k, v in last.items()}
    out.update({f"eval/start_{k}": v for k, v in first.items()
                if k != "sampled_accuracy_train_temp"})
    out["eval/accuracy_gain"] = last["accuracy"] - first["accuracy"]
    if state.raw_evals:
        out.update({f"raw/eval/{k}": v for k, v in state.raw_evals[-1][1].items()})
    return out


def stability(rows: list[dict], state: RunState) -> dict[str, float | None]:
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
        "reward_volatility": statistics.stdev(diffs) if len(diffs) > 1 else None,
        "checkpoint_regret": regret(state.evals) if state.evals else None,
    }
    if state.raw_evals:
        out["checkpoint_regret_raw"] = regret(state.raw_evals)
    return out


def _fraction(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def trick_activity(cfg: dict, rows: list[dict], counts: dict, hooks: dict | None = None) -> dict:
    """How much the arm's trick acted: the share of the units it could change that it did
    change (samples clipped, groups whose advantages the length penalty moved, samples
    dropped, steps whose gradient clipping differed from the baseline's). A trick that only
    sets a config value acts on every step by construction. The baseline arm: empty."""
    # A premise (the off-policy data its method acts on, shared with its against arm) is not
    # the arm's activity: its method's keys are.
    premise = set(cfg["trick"].get("premise") or [])
    keys = [k for k in cfg["trick"]["keys"] if k not in premise]
    if not keys:
        return {}
    details = {**counted_details(cfg["hooks"], counts), **trainer_details(cfg, rows),
               **variant_counters(counts)}
    # The reward tricks' values in reward units (after any quantile measurement), for the
    # arm's own keys: the report says which values were used.
    values = reward_values(hooks or {}, [k.removeprefix("hooks.") for k in keys])
    return _activity_of(keys, details, values, cfg["trainer"]["loss_type"])


def variant_counters(counts: dict) -> dict:
    """The activity of TRL's variants that log nothing of it, from the trainer's counters."""
    details = {}
    if counts.get("off_policy_sequences"):
        details["off_policy_masked_sequences"] = (counts.get("off_policy_masked", 0)
                                                  / counts["off_policy_sequences"])
    if counts.get("vespo_sequences"):
        details["vespo_reweighted_sequences"] = (counts.get("vespo_reweighted", 0)
                                                 / counts["vespo_sequences"])
    if counts.get("lm_head_processes"):
        details["lm_head_below_fp32"] = counts["lm_head_below_fp32"] / counts["lm_head_processes"]
    return details


def trainer_details(cfg: dict, rows: list[dict]) -> dict:
    """TRL-native tricks' activity, from the logged history (gradient norms, ratio clipping,
    truncation) or by construction (the entropy quantile)."""
    tr, details = cfg["trainer"], {}
    norms = [r["grad_norm"] for r in rows if r.get("grad_norm") is not None]
    own, base = tr["max_grad_norm"] or math.inf, cfg["recipe"]["max_grad_norm"] or math.inf
    if norms:
        details["grad_clip_steps"] = sum(g > own for g in norms) / len(norms)
        if own != base:  # they clip differently only where the norm passes the lower bound
            details["grad_clip_differs_steps"] = sum(g > min(own, base) for g in norms) / len(norms)
    if tr["num_iterations"] > 1:
        clip = [r.get("clip_ratio/region_mean", 0.0) or 0.0 for r in rows if "loss" in r]
        details["ratio_clip_steps"] = _fraction(sum(c > 0 for c in clip), len(clip))
        details["ratio_clip_tokens"] = _fraction(sum(clip), len(clip))
        high = [r.get("clip_ratio/high_mean", 0.0) or 0.0 for r in rows if "loss" in r]
        details["ratio_clip_high_tokens"] = _fraction(sum(high), len(high))
    truncated = [r["completions/clipped_ratio"] for r in rows
                 if r.get("completions/clipped_ratio") is not None]
    if tr.get("mask_truncated_completions") and truncated:
        details["truncated_masked"] = sum(truncated) / len(truncated)
    if tr.get("top_entropy_quantile", 1.0) < 1.0:  # by construction: the rest of the tokens
        details["entropy_masked_tokens"] = 1.0 - tr["top_entropy_quantile"]
    details.update(variant_details(tr, rows))
    return details


def variant_details(tr: dict, rows: list[dict]) -> dict:
    """The activity of TRL's newer variants that their logs show (or that holds by
    construction where the run's shape decides it)."""
    details, steps = {}, [r for r in rows if "loss" in r]
    if tr["loss_type"] in ("sapo", "cispo"):  # each departs from the clip only off-policy
        details["reused_updates"] = (tr["num_iterations"] - 1) / tr["num_iterations"]
    if tr["loss_type"] == "luspo":  # a length weight changes nothing where lengths are equal
        spread = [r["completions/max_length"] > r["completions/min_length"] for r in steps
                  if "completions/max_length" in r and "completions/min_length" in r]
        details["unequal_length_steps"] = _fraction(sum(spread), len(spread))
    if tr.get("use_adaptive_entropy"):
        low = [r["entropy"] <= tr["entropy_target"] for r in steps if "entropy" in r]
        details["entropy_at_target_steps"] = _fraction(sum(low), len(low))
    if tr.get("sync_ref_model") and steps:
        last, every = max(r["step"] for r in steps), tr["ref_model_sync_steps"]
        details["reset_reference_steps"] = max(0, last - every) / last if last else None
    if tr.get("use_vllm") and tr.get("vllm_importance_sampling_correction"):
        moved = [r["sampling/importance_sampling_ratio/min"] < 1 - WEIGHT_MOVED
                 or r["sampling/importance_sampling_ratio/max"] > 1 + WEIGHT_MOVED
                 for r in steps if "sampling/importance_sampling_ratio/min" in r]
        details["importance_corrected_steps"] = _fraction(sum(moved), len(moved))
    return details


# trainer.loss_type's measure, by the loss it selects (the others: a config value).
LOSS_MEASURES = {
    "sapo": {"trainer.loss_type": ("reused_updates", "updates on a reused batch, where the "
                                   "soft gate departs from GRPO's clip")},
    # CISPO departs from the clipped surrogate where a batch is reused (the ratio leaves 1);
    # for it epsilon_high is the weight's cap, not the clip's upper bound.
    "cispo": dict.fromkeys(("trainer.loss_type", "trainer.epsilon_high"),
                           ("reused_updates", "updates on a reused batch, where CISPO's "
                            "capped weight departs from the clipped surrogate")),
    "vespo": {"trainer.loss_type": ("vespo_reweighted_sequences",
                                    "sequences whose Gamma weight left 1")},
    "luspo": {"trainer.loss_type": ("unequal_length_steps", "steps whose completions differ in "
                                    "length (where the length weight changes the update)")},
}


def _activity_of(keys: list[str], details: dict, values: dict | None,
                 loss_type: str = "grpo") -> dict:
    """The arm's activity: its most active key's measure, and all the details."""
    measured = {
        **{f"hooks.{name}": measure_of(hook) for name, hook in HOOKS.items()},
        "trainer.max_grad_norm": ("grad_clip_differs_steps",
                                  "steps where its gradient clipping differs from the baseline's"),
        "trainer.epsilon_high": ("ratio_clip_high_tokens",
                                 "tokens clipped at the upper bound 1+epsilon_high"),
        # The cap and sequence-level ratios can only act where a token's ratio leaves 1.
        "trainer.delta": ("ratio_clip_tokens", "tokens whose importance ratio left the clip "
                          "range (where the two-sided cap can bind)"),
        "trainer.epsilon": ("ratio_clip_tokens", "tokens whose importance ratio left the clip "
                            "range"),
        "trainer.importance_sampling_level": ("ratio_clip_tokens", "tokens whose importance "
                                              "ratio left the clip range (off-policy updates)"),
        "trainer.mask_truncated_completions": ("truncated_masked",
                                               "completions masked as truncated"),
        "trainer.top_entropy_quantile": ("entropy_masked_tokens",
                                         "tokens left out by the entropy quantile"),
        "trainer.off_policy_mask_threshold": ("off_policy_masked_sequences",
                                              "sequences masked as too far off-policy"),
        "trainer.cast_lm_head_to_fp32": ("lm_head_below_fp32", "runs whose policy computes "
                                         "below fp32 (a fp32 policy's logits are fp32 already)"),
        "trainer.use_adaptive_entropy": ("entropy_at_target_steps", "steps whose entropy was "
                                         "at or below the target (the bonus applies next)"),
        **dict.fromkeys(("trainer.sync_ref_model", "trainer.ref_model_mixup_alpha",
                         "trainer.ref_model_sync_steps"),
                        ("reset_reference_steps", "steps trained against a reset reference")),
        **dict.fromkeys(("trainer.vllm_importance_sampling_correction",
                         "trainer.vllm_importance_sampling_mode",
                         "trainer.vllm_importance_sampling_clip_max"),
                        ("importance_corrected_steps", "steps where vLLM's sampling "
                         "probabilities differed from the trainer's (the correction reweights "
                         "them)")),
    }
    measured.update(LOSS_MEASURES.get(loss_type, {}))
    acted, measures = [], []
    for key in keys:
        name, what = measured.get(key, (None, "a config value: acts on every step"))
        value = details.get(name) if name else 1.0
        acted.append(value if value is not None else 0.0)
        measures.append(what)
    best = max(range(len(acted)), key=acted.__getitem__)
    out = {"acted": acted[best], "measure": measures[best],
           "details": {k: v for k, v in details.items() if v is not None},
           # each key's own share: a combined arm's (a screening point's) per trick
           "by_key": dict(zip(keys, acted, strict=True))}
    if values:
        out["values"] = values
    return out


@cache
def versions() -> dict[str, str | None]:
    return {"python": platform.python_version(), "torch": package_version("torch"),
            "transformers": package_version("transformers"), "trl": package_version("trl"),
            "grpo_ablate": __version__}


def run_machine(config: dict) -> dict:
    """Where this run computes: the CPU, or the CUDA device it trains on, and torch's threads."""
    import torch  # heavy: only called by a process that trains

    return machine(device_label(config["trainer"]["use_cpu"]), threads=torch.get_num_threads())


def resume_notes(cfg: dict, state: RunState) -> list[str]:
    """What the record says of the checkpoints the run went on from: early-stop looks it
    paused at, interruptions, and where its W&B history is."""
    es = cfg.get("early_stop") or {}
    looks = {pause_step(cfg, f) for f in es.get("looks", [])} if es.get("enabled") else set()
    paused = [s for s in state.resumed_from if s in looks]
    killed = [s for s in state.resumed_from if s not in looks]
    notes = []
    if paused:
        notes.append(f"paused for the early-stop look(s) at step(s) {', '.join(map(str, paused))}"
                     " and went on from the checkpoint there (the same computation as a run "
                     "that never paused)")
    if killed:
        notes.append(f"interrupted {len(killed)} time(s); resumed from the checkpoint at "
                     f"step(s) {', '.join(map(str, killed))}")
    lg = cfg["logger"]
    if notes and state.wandb_run_id and lg["backend"] == "wandb" and lg["mode"] == "offline":
        notes[-1] += (f"; W&B: each attempt is an offline-run folder of id {state.wandb_run_id}, "
                      "and the newest holds the whole history: upload it alone (`grpo-ablate "
                      "wandb-sync <sweep folder>`)")
    return notes
