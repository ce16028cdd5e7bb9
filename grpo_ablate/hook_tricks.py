"""The tricks TRL lacks ("hook tricks"), each declared once: its key under `hooks:`, the rule
for its value, how its activity is measured and, for a trick that reshapes rewards, the
tensor function. The config layer checks `hooks.*` against this registry, the trainer calls
the registered reward functions, and the record's activity names each trick's measure.

A new hook trick is one trick YAML plus one module that calls `register(HookTrick(...))`
(docs/guide.md, "Add a trick"); the YAML names the module in `trick.modules`, and every
process that validates the run imports it. The built-in ones are declared at the bottom; their
tensor code is in training/tricks/ and is wired into TRL by training/trl_hooks.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_ablate.errors import UserError
from grpo_ablate.values import is_fraction, is_int, is_number

Rule = tuple[Callable[[Any], bool], str]  # (check, what is allowed: "a number > 0")


@dataclass(frozen=True)
class HookTrick:
    """One hook trick. `rule` checks a scalar value; `fields` the keys of a block value
    ({low, high}); the value null (or false, or 0) turns the trick off. `measure` is the
    activity detail the report reads and what it counts (a hook with `shape_rewards` gets
    the share of completions it changed, under its own name, when it names none).
    `shape_rewards`, when given, is called on the training batch's rewards before TRL's group advantage:
    `(rewards [completions x reward functions], lengths [completions], value, group_size)
    -> (new rewards, changed [completions] bool)`; the trainer counts the changed share."""

    name: str
    doc: str
    rule: Rule | None = None
    fields: dict[str, Rule] = field(default_factory=dict)
    measure: tuple[str, str] | None = None  # None: a config value, acting on every step
    shape_rewards: Callable[..., Any] | None = None

    def active(self, value: Any) -> bool:
        return value is not None and value is not False and value != 0


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
    if hook.shape_rewards is not None:
        return hook.name, f"completions whose reward {hook.name} changed"
    return None, "a config value: acts on every step"


def reward_hooks(hooks: dict) -> list[tuple[HookTrick, Any]]:
    """The registered reward functions a run's `hooks:` turns on, in the config's order."""
    return [(HOOKS[k], v) for k, v in hooks.items()
            if k in HOOKS and HOOKS[k].shape_rewards is not None and HOOKS[k].active(v)]


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
