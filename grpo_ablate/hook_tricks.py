"""The tricks TRL lacks ("hook tricks"), each declared once: its key under `hooks:`, the rule
for its value, its cross-key rule, how its activity is measured and the functions it acts
with at the trainer's hook points. The config layer checks `hooks.*` against this registry,
the trainer (training/trl_hooks.py, a dispatcher) calls the functions of the hooks a run
turns on at each point, and the record's activity names each trick's measure.

The hook points, in the order a training step meets them:

    TRL samples and scores  ->  rewards [completions x reward functions]
        `shape_rewards`     before TRL's group advantage (clip, length penalty, a floor)
    TRL's group z-score     ->  advantages [completions], the whole step's batch
        `advantages`        after it, before the batch is split (W-REINFORCE, Pass@k)
    TRL's loss              ->  advantages per token, with the policy's log-probs now
        `token_advantages`  inside the loss: a token given 0 carries no policy gradient
                            (Clip-Cov); TRL's clip, KL and normaliser apply as usual

A new hook trick is one trick YAML plus one module that calls `register(HookTrick(...))`
(docs/guide.md, "Add a trick"); the YAML names the module in `trick.modules`, and every
process that validates the run imports it. The built-in ones are declared at the bottom; their
tensor code is in training/tricks/.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_ablate.errors import UserError
from grpo_ablate.values import is_fraction, is_int, is_number

Rule = tuple[Callable[[Any], bool], str]  # (check, what is allowed: "a number > 0")


@dataclass
class StepBatch:
    """What the `advantages` point sees: one training step's batch, every process's share
    (tensors on the trainer's device)."""

    advantages: Any   # [completions] TRL's group advantages (after any earlier hook)
    rewards: Any      # [completions] the weighted rewards the advantage saw
    group_size: int
    step: int


@dataclass
class TokenBatch:
    """What the `token_advantages` point sees: one micro-batch inside TRL's loss."""

    advantages: Any   # [rows, tokens] per token (TRL's per-sequence ones, broadcast)
    logps: Any        # [rows, tokens] the policy's log-probs now (they carry the gradient)
    old_logps: Any    # [rows, tokens] the sampling policy's (TRL's old_per_token_logps)
    mask: Any         # [rows, tokens] 1 for a completion token the loss counts
    epsilon_low: float
    epsilon_high: float
    generator: Any    # a torch.Generator seeded by the run's seed, step and micro-batch


@dataclass(frozen=True)
class HookTrick:
    """One hook trick. `rule` checks a scalar value; `fields` the keys of a block value
    ({low, high}); the value null (or false, or 0) turns the trick off. `check(value, cfg)`
    is its cross-key rule: a message naming what is wrong and what is allowed, or None.

    Its points (any of them, see the module's drawing), each given the hook's value:
    - `shape_rewards(rewards [completions x functions], lengths [completions], value,
      group_size) -> (new rewards, changed [completions] bool)`;
    - `advantages(StepBatch, value) -> new advantages [completions]`;
    - `token_advantages(TokenBatch, value) -> new advantages [rows, tokens]`.
    The trainer counts, on training batches, how many units each point's function changed
    (completions, completions, tokens); the default `measure` is that share, under the hook's
    name. `measure` names another activity detail and what it counts; `details(counts)` gives
    details from the run's counters for a hook that counts for itself. `order`: where it runs
    at its point among the hooks that are on (lower first, then by name)."""

    name: str
    doc: str
    rule: Rule | None = None
    fields: dict[str, Rule] = field(default_factory=dict)
    measure: tuple[str, str] | None = None  # None: see measure_of
    shape_rewards: Callable[..., Any] | None = None
    advantages: Callable[[StepBatch, Any], Any] | None = None
    token_advantages: Callable[[TokenBatch, Any], Any] | None = None
    details: Callable[[Counter], dict] | None = None
    check: Callable[[Any, dict], str | None] | None = None
    order: int = 100

    def active(self, value: Any) -> bool:
        return value is not None and value is not False and value != 0

    def point(self) -> str | None:
        """The point whose changes the trainer counts for this hook, if any."""
        return next((p for p in POINTS if getattr(self, p) is not None), None)


# The points with a counted function, and what each counts.
POINTS = {"shape_rewards": "completions whose reward {name} changed",
          "advantages": "completions whose advantage {name} changed",
          "token_advantages": "tokens whose advantage {name} changed"}


HOOKS: dict[str, HookTrick] = {}


def register(hook: HookTrick) -> HookTrick:
    """Make a hook trick known; registering the same name again replaces it (a module
    imported twice)."""
    if not hook.name.isidentifier():
        raise ValueError(f"hook trick name {hook.name!r}: must be a Python identifier")
    HOOKS[hook.name] = hook
    return hook


def import_modules(modules: list[str] | None) -> None:
    """Import the modules a trick file names (`trick.modules`), which register their hooks."""
    if not isinstance(modules, list):  # the rule for trick.modules says what is allowed
        return
    for name in (m for m in modules if isinstance(m, str) and m):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise UserError(f"trick.modules: {name}: cannot be imported ({exc}); allowed: a "
                            "module on the Python path that registers a hook trick") from None


def schema() -> dict[str, Any]:
    """The `hooks:` block's keys: a hook's fields, or None for a scalar value."""
    return {h.name: (dict.fromkeys(h.fields) if h.fields else None) for h in HOOKS.values()}


def rules() -> dict[str, Rule]:
    """`hooks.<name>[.<field>]` -> its rule."""
    out: dict[str, Rule] = {}
    for h in HOOKS.values():
        if h.rule is not None:
            out[f"hooks.{h.name}"] = h.rule
        out.update({f"hooks.{h.name}.{k}": r for k, r in h.fields.items()})
    return out


def measure_of(hook: HookTrick) -> tuple[str | None, str]:
    """The activity detail a hook's arm is judged by, and what it counts."""
    if hook.measure is not None:
        return hook.measure
    if hook.point() is not None:
        return hook.name, POINTS[hook.point()].format(name=hook.name)
    return None, "a config value: acts on every step"


def hooks_at(point: str, hooks: dict) -> list[tuple[HookTrick, Any]]:
    """The registered hooks a run's `hooks:` turns on that act at `point`, in their order."""
    on = [(HOOKS[k], v) for k, v in hooks.items()
          if k in HOOKS and getattr(HOOKS[k], point) is not None and HOOKS[k].active(v)]
    return sorted(on, key=lambda hv: (hv[0].order, hv[0].name))


def reward_hooks(hooks: dict) -> list[tuple[HookTrick, Any]]:
    """The registered reward functions a run's `hooks:` turns on."""
    return hooks_at("shape_rewards", hooks)


def counted_details(hooks: dict, counts: dict) -> dict:
    """The activity details of the hooks a run turns on: each counted point's changed share
    (counters `<name>_changed` over `<name>_units`), and each hook's own `details`."""
    out: dict = {}
    for name, value in hooks.items():
        hook = HOOKS.get(name)
        if hook is None or not hook.active(value):
            continue
        if hook.point() is not None:
            units = counts.get(f"{name}_units", 0)
            out[name] = counts.get(f"{name}_changed", 0) / units if units else None
        if hook.details is not None:
            out.update(hook.details(counts))
    return out


# TRL's clipped-ratio surrogates, -min(r A, clip(r) A), at token level: where a hook at the
# loss point that rewrites a token's advantage changes exactly that token's term.
RATIO_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo")


def token_ratio_loss(cfg: dict) -> str | None:
    """A loss-point hook's common rule: the run's loss is a token-level clipped ratio."""
    tr = cfg["trainer"]
    if tr["loss_type"] not in RATIO_LOSSES or tr["importance_sampling_level"] != "token":
        return (f"acts on the token-level clipped-ratio surrogate; allowed: trainer.loss_type in "
                f"{list(RATIO_LOSSES)} with trainer.importance_sampling_level=token, not "
                f"{tr['loss_type']} at {tr['importance_sampling_level']} level")
    return None


def check_hooks(data: dict) -> str | None:
    """The first cross-key rule a run's hooks break, as its message; None if none."""
    for name, value in (data.get("hooks") or {}).items():
        hook = HOOKS.get(name)
        if hook is not None and hook.check is not None and hook.active(value):
            problem = hook.check(value, data)
            if problem:
                return f"hooks.{name}: {problem}"
    return None


_num, _int, _unit = is_number, is_int, is_fraction

for _hook in (
    HookTrick("reward_clip", "clamp rewards to [low, high] before the group advantage",
              fields={"low": (_num, "a number below hooks.reward_clip.high"),
                      "high": (_num, "a number above hooks.reward_clip.low")},
              measure=("reward_clip_samples", "samples whose reward the clip changed")),
    HookTrick("length_penalty", "reward -= coef * completion_length / max_completion_length",
              rule=(lambda x: _num(x) and x >= 0, "a number >= 0"),
              measure=("length_penalty_groups",
                       "groups whose advantages the length penalty changed")),
    HookTrick("filter_low_reward", "drop samples under threshold in [start, end) of training",
              fields={"threshold": (_num, "a number"),
                      "start": (_unit, "a fraction of training in [0, 1]"),
                      "end": (_unit, "a fraction of training in [0, 1]")},
              measure=("filter_dropped_in_window", "samples dropped, in the filter's window")),
    HookTrick("global_adv_norm", "re-standardise advantages over the batch after the group "
              "z-score", rule=(lambda x: isinstance(x, bool), "true or false")),
    HookTrick("ema", "averaged weights; the arm's policy (its primary metric)",
              fields={"decay": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)")}),
    HookTrick("dynamic_sampling", "DAPO's dynamic sampling: keep groups whose rewards differ",
              fields={"max_rounds": (lambda x: _int(x) and 1 <= x <= 100,
                                     "an integer in [1, 100] (generation rounds a step)")},
              measure=("dynamic_filtered_groups", "groups filtered out (all rewards equal)")),
    HookTrick("soft_overlong", "TRL's soft overlong punishment (DAPO Eq. 13) as a second reward",
              fields={"cache_fraction": (lambda x: _num(x) and 0 < x < 1,
                                         "a fraction of max_completion_length in (0, 1)"),
                      "weight": (lambda x: _num(x) and x > 0, "a number > 0")},
              measure=("overlong_punished", "completions punished for length")),
):
    register(_hook)
