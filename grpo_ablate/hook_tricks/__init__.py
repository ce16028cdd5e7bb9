"""The tricks TRL lacks ("hook tricks"), each declared once: its key under `hooks:`, the rule
for its value, its cross-key rule, how its activity is measured and the functions it acts
with at the trainer's hook points. The config layer checks `hooks.*` against this registry,
the trainer (training/trl_layer/, a dispatcher) calls the functions of the hooks a run
turns on at each point, and the record's activity names each trick's measure.

The hook points, in the order a training step meets them:

    TRL samples and scores  ->  rewards [completions x reward functions]
        `shape_rewards`     before TRL's group advantage (clip, length penalty, a floor)
        `drop_samples`      then, samples left out of the advantage and the loss (filtering)
        `generation`        then, more rounds of sampling (dynamic sampling)
    TRL's group z-score     ->  advantages [completions], the whole step's batch
        `advantages`        after it, before the batch is split (W-REINFORCE, Pass@k)
    TRL's loss              ->  advantages per token, with the policy's log-probs now
        `token_advantages`  inside the loss: a token given 0 carries no policy gradient
                            (Clip-Cov); TRL's clip, KL and normaliser apply as usual
        `loss_term`         after it, a term added to TRL's loss: a token mean over the
                            hook's tokens (an NLL on correct completions, a KL penalty)

and, where the trainer is built, `reward_function`: one more reward function of TRL's, at
its weight (the soft overlong punishment); and, around the held-out evaluation,
`policy_average`: averaged weights evaluated as the arm's policy (EMA).

A new hook trick is one trick YAML plus one module that calls `register(HookTrick(...))`
(docs/guide.md, "Add a trick"); the YAML names the module in `trick.modules`, and every
process that validates the run imports it. The built-in ones are declared the same way, each
in its own module of this package, which the import list at the bottom loads by name.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_ablate.errors import UserError
from grpo_ablate.hook_tricks.points import (  # what each point hands a hook, importable from here
    DropBatch,
    Generation,
    PromptFilter,
    StepBatch,
    TokenBatch,
)
from grpo_ablate.hook_tricks.points import (
    RewardBatch as RewardBatch,
)

Rule = tuple[Callable[[Any], bool], str]  # (check, what is allowed: "a number > 0")


@dataclass(frozen=True)
class HookTrick:
    """One hook trick. `rule` checks a scalar value; `fields` the keys of a block value
    ({low, high}); the value null (or false, or 0) turns the trick off. `check(value, cfg)`
    is its cross-key rule: a message naming what is wrong and what is allowed, or None.

    Its points (any of them, see the module's drawing), each given the hook's value:
    - `shape_rewards(RewardBatch, value) -> (new rewards, changed [completions] bool)`;
    - `advantages(StepBatch, value) -> new advantages [completions]`;
    - `token_advantages(TokenBatch, value) -> new advantages [rows, tokens]`;
    - `loss_term(TokenBatch, value) -> (term [rows, tokens], tokens [rows, tokens] bool)`:
      its coefficient included, the term's mean over `tokens` (of the counted ones) is added
      to TRL's loss of the micro-batch (per accumulation step, as TRL adds its entropy bonus);
    - `reward_function(value, cfg, counts) -> (function, weight)`: one more of TRL's reward
      functions, at its weight (the task's reward has weight 1); it counts for itself;
    - `generation(Generation, value) -> (the step's batch, its rewards)`: what a training
      step trains on, from more rounds of sampling; it counts for itself;
    - `drop_samples(DropBatch, value) -> keep [completions] bool, or None (none dropped this
      step)`: a dropped sample leaves the loss mask and every normaliser; the share dropped
      is logged as `dropped_metric`. Where `drop_from_advantage(value)` is true (the
      default), its rewards also become NaN before TRL's group advantage (TRL leaves it out
      of its group's mean and std); where false, the group's advantages are computed over
      every sample, the dropped ones included, and the drop acts on the loss alone;
    - `policy_average(value, model, saved) -> average`: averaged weights that are the arm's
      policy (EMA), evaluated beside the raw weights: `average.update(model)` after each
      optimizer step, `average.swapped_in(model)` for an evaluation, `average.shadow` what
      a checkpoint keeps (`saved`: a resumed run's).
    The trainer counts, on training batches, how many units each point's function changed
    (counters `<name>_units` and `<name>_changed`: completions, completions, tokens, the
    tokens a loss term is nonzero on); the default `measure` is that share, under the hook's
    name. `measure` names another activity detail and what it counts, and `details(counts)`
    computes it from the run's counters.
    `order`: where it runs at its point among the hooks that are on (lower first, then name).
    `prompt_filter`: a PromptFilter, the prompt-level sampler's rule: the trainer keeps each
    prompt's pass rate (its run state, so a resumed run has it) and each epoch leaves out the
    prompts the rule names as the epoch begins, the epoch's length kept (its other prompts
    cycled); counted as `<name>_prompts` and `<name>_left_out` of the last epoch.
    `kl_from_loss`: the hook takes TRL's KL term out of the loss (trainer.beta then only
    builds the reference model) and its advantages point is given StepBatch.kl_to_ref.
    `applies_to(value, reward_kind)`: why the hook cannot act as its method on a task whose
    rewards are of that kind (binary, graded, fraction, score: tasks.reward_kind), or None;
    such a run is refused in one line when it is composed.
    `ratio_clip_off`: a token_advantages hook that replaces TRL's ratio clip (a trust region
    of its own): inside the loss the clip range is made wide enough to leave it no effect.
    `replaces`: what of GRPO's computation it replaces (two hooks that replace the same thing
    cannot both be on); `excludes`: (another hook, why) for a hook it cannot run beside. A
    run that turns on such a pair is refused in one line (`check_hooks`), whatever composed
    it: a recipe, `sweep=pair`, a confirmation.

    A hook whose value is in reward units can be set as quantiles of the SFT policy's rewards
    (task.shaping.scale=sft_quantiles): `in_reward_units(value, q)` is its value in reward
    units, given q(level), the rewards' quantile; `reward_values(value)` what the record shows
    of it. `added_later`: a key added after records existed, in a run's identity only when
    set, so that older runs keep their ids. `revision`: raised when the hook's computation
    changes for an unchanged config; it joins the identity of every run that turns the hook on,
    so a run cache never hands back a run the code now computes differently."""

    name: str
    doc: str
    rule: Rule | None = None
    fields: dict[str, Rule] = field(default_factory=dict)
    measure: tuple[str, str] | None = None  # None: see measure_of
    shape_rewards: Callable[..., Any] | None = None
    advantages: Callable[[StepBatch, Any], Any] | None = None
    token_advantages: Callable[[TokenBatch, Any], Any] | None = None
    loss_term: Callable[[TokenBatch, Any], tuple[Any, Any]] | None = None
    reward_function: Callable[[Any, dict, Counter], tuple[Callable, float]] | None = None
    generation: Callable[[Generation, Any], tuple[dict, Any]] | None = None
    drop_samples: Callable[[DropBatch, Any], Any] | None = None
    drop_from_advantage: Callable[[Any], bool] | None = None  # None: true
    applies_to: Callable[[Any, str], str | None] | None = None
    policy_average: Callable[[Any, Any, dict | None], Any] | None = None
    dropped_metric: str | None = None
    details: Callable[[Counter], dict] | None = None
    check: Callable[[Any, dict], str | None] | None = None
    order: int = 100
    replaces: str | None = None
    excludes: tuple[tuple[str, str], ...] = ()
    in_reward_units: Callable[[Any, Callable[[float], float]], Any] | None = None
    reward_values: Callable[[Any], dict] | None = None
    added_later: bool = False
    revision: int = 0
    kl_from_loss: bool = False
    ratio_clip_off: bool = False
    prompt_filter: PromptFilter | None = None

    def active(self, value: Any) -> bool:
        return value is not None and value is not False and value != 0

    def drops_from_advantage(self, value: Any) -> bool:
        """Whether the samples it drops also leave their group's advantage statistics."""
        return True if self.drop_from_advantage is None else bool(self.drop_from_advantage(value))

    def point(self) -> str | None:
        """The point whose changes the trainer counts for this hook, if any."""
        return next((p for p in POINTS if getattr(self, p) is not None), None)


# The points with a counted function, and what each counts.
POINTS = {"shape_rewards": "completions whose reward {name} changed",
          "drop_samples": "completions {name} dropped",
          "advantages": "completions whose advantage {name} changed",
          "token_advantages": "tokens whose advantage {name} changed",
          "loss_term": "tokens {name}'s loss term acted on"}


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


def counted_details(hooks: dict, counts: dict) -> dict:
    """The activity details of the hooks a run turns on: each counted point's changed share
    (counters `<name>_changed` over `<name>_units`), and each hook's own `details`."""
    out: dict = {}
    for name, value in hooks.items():
        hook = HOOKS.get(name)
        if hook is None or not hook.active(value):
            continue
        if hook.point() is not None and hook.measure is None:
            out[name] = counted_share(counts, name)
        if hook.details is not None:
            out.update(hook.details(counts))
    return out


def counted_share(counts: dict, name: str) -> float | None:
    """The share of the units a hook's point function changed, from the run's counters."""
    units = counts.get(f"{name}_units", 0)
    return counts.get(f"{name}_changed", 0) / units if units else None


def check_hooks(data: dict) -> str | None:
    """The first cross-key rule a run's hooks break, as its one-line message; None if none:
    each hook's own rule, then each pair of hooks that are on."""
    on = [HOOKS[name] for name, value in (data.get("hooks") or {}).items()
          if name in HOOKS and HOOKS[name].active(value)]
    for hook in on:
        value = (data.get("hooks") or {})[hook.name]
        missing = [f for f in hook.fields if not isinstance(value, dict) or f not in value]
        if hook.fields and missing:
            return (f"hooks.{hook.name}.{missing[0]}: missing; allowed: a block with every one "
                    f"of {', '.join(hook.fields)} ({hook.fields[missing[0]][1]} for "
                    f"{missing[0]})")
        if hook.check is not None:
            problem = hook.check((data.get("hooks") or {})[hook.name], data)
            if problem:
                return problem
    for i, first in enumerate(on):
        for second in on[i + 1:]:
            problem = pair_problem(first, second)
            if problem:
                return problem
    return None


def reward_kind_problem(hooks: dict, kind: str, task: str) -> str | None:
    """Why a run's hooks cannot act as their methods on a task whose rewards are of `kind`
    (one line), or None."""
    for name, value in (hooks or {}).items():
        hook = HOOKS.get(name)
        if hook is None or hook.applies_to is None or not hook.active(value):
            continue
        why = hook.applies_to(value, kind)
        if why:
            return (f"hooks.{name} on task {task} ({kind} rewards): {why}; allowed: a task whose "
                    "rewards it is defined on, or another arm")
    return None


def pair_problem(first: HookTrick, second: HookTrick) -> str | None:
    """Why two hook tricks cannot both be on (one line), or None: they combine, each at its
    point in the declared order."""
    why = dict(first.excludes).get(second.name) or dict(second.excludes).get(first.name)
    if why is None and first.replaces is not None and first.replaces == second.replaces:
        why = f"both replace {first.replaces}"
    if why is None:
        return None
    return (f"hooks.{first.name} and hooks.{second.name} cannot both be on: {why}; allowed: "
            "one of them")


def in_reward_units(hooks: dict, rewards: list[float]) -> dict:
    """A run's hooks with the values set as quantiles of the SFT policy's `rewards` in reward
    units (task.shaping.scale=sft_quantiles)."""
    import torch

    r = torch.tensor(rewards, dtype=torch.float64)

    def q(level: float) -> float:
        return float(torch.quantile(r, level))

    out = dict(hooks)
    for name, value in hooks.items():
        hook = HOOKS.get(name)
        if hook is not None and hook.in_reward_units is not None and hook.active(value):
            out[name] = hook.in_reward_units(value, q)
    return out


def reward_values(hooks: dict, names: list[str] | None = None) -> dict[str, float]:
    """The values in reward units of the hooks that have them (those in `names` only, when
    given), as the trainer used them: what the record shows."""
    out: dict[str, float] = {}
    for name, value in hooks.items():
        hook = HOOKS.get(name)
        if hook is not None and hook.reward_values is not None and hook.active(value) \
                and (names is None or name in names):
            out.update(hook.reward_values(value))
    return out


def added_later(name: str) -> bool:
    return name in HOOKS and HOOKS[name].added_later


def revisions(data: dict) -> dict[str, int]:
    """The revisions (HookTrick.revision) of the hooks a run's `hooks:` turns on. The modules
    its trick names are imported first, so a run id never depends on what else this process
    happened to import."""
    import_modules((data.get("trick") or {}).get("modules"))
    return {k: HOOKS[k].revision for k, v in (data.get("hooks") or {}).items()
            if k in HOOKS and HOOKS[k].revision and HOOKS[k].active(v)}


# The built-in hook tricks, each declared in its own module: imported here, after the registry
# exists (each module imports it to register itself), by name, so that importing the registry
# stays cheap (each module loads torch when it computes).
BUILT_IN = tuple(f"grpo_ablate.hook_tricks.{name}" for name in (
    "reward_clip", "length_penalty", "filter_low_reward", "global_adv_norm", "ema",
    "dynamic_sampling", "soft_overlong"))
for _module in BUILT_IN:
    importlib.import_module(_module)
