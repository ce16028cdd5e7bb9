"""What grpo-ablate itself accumulates while one run trains, beside the Trainer's own state
(weights, optimizer, scheduler, RNG streams, step counter): the per-step history, the
held-out evaluations, the EMA weights, the trick activity and cost counters, the divergence
guard's verdict and the run's notes.

The callbacks and the trainer write into one `RunState`; the record is made from it; a
checkpoint holds it whole (training/checkpoint.py), and a resumed run starts from it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any


def _no_cost() -> dict[str, int]:
    return {"completions": 0, "completion_tokens": 0, "prompt_tokens": 0}


@dataclass
class RunState:
    history: list[dict] = field(default_factory=list)        # history.jsonl's rows
    evals: list[tuple[int, dict]] = field(default_factory=list)      # the arm's policy
    raw_evals: list[tuple[int, dict]] = field(default_factory=list)  # raw weights beside EMA
    ema_shadow: dict[str, Any] | None = None   # the policy average's weights (EMA; tensors)
    activity: Counter = field(default_factory=Counter)   # how often each hook trick acted
    cost: dict[str, int] = field(default_factory=_no_cost)  # this process's completions, tokens
    eval_seconds: float = 0.0
    generation_seconds: float = 0.0            # sampling and scoring, inside the steps
    step_seconds: float = 0.0                  # inside optimizer steps (generation included)
    guard_reason: str | None = None            # why the divergence guard stopped the run
    notes: list[str] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)  # steps of the checkpoints resumed
    wandb_run_id: str | None = None            # the W&B run its curves go to
    wandb_step: int | None = None              # W&B's step counter after the last row logged
    prompt_outcomes: dict | None = None        # the final evaluation of the arm's policy, per prompt
    # A prompt filter's history (hook_tricks PromptFilter): each training prompt's latest pass
    # rate, and the prompts each epoch left out, fixed as it began (a resumed epoch keeps them).
    pass_rates: dict[int, float] = field(default_factory=dict)
    left_out: dict[int, list[int]] = field(default_factory=dict)

    def add_eval(self, step: int, prefix: str, metrics: dict[str, float], raw: bool) -> None:
        (self.raw_evals if raw else self.evals).append((step, metrics))
        self.history.append({"step": step, **{f"{prefix}{k}": v for k, v in metrics.items()}})

    def payload(self) -> dict[str, Any]:
        """Plain containers and tensors only: `torch.load(weights_only=True)` reads it back."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["activity"] = dict(self.activity)
        out["evals"] = [list(e) for e in self.evals]
        out["raw_evals"] = [list(e) for e in self.raw_evals]
        return out

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> RunState:
        known = {f.name for f in fields(cls)}
        state = cls(**{k: v for k, v in data.items() if k in known})
        state.activity = Counter(state.activity)
        state.evals = [(int(s), dict(m)) for s, m in state.evals]
        state.raw_evals = [(int(s), dict(m)) for s, m in state.raw_evals]
        return state
