"""Which arms of a sweep compute the same gradient: a duplicate must never enter a report
under two names. Trains nothing. For every arm whose difference from the baseline lies in
the gradient's computation (its rewards, advantages, kept rows or loss: not what is
sampled, nor the update after the gradient), TRL's own step batch is made from planted
rewards (two reward plans, with different numbers of uniform groups), the arm's advantages
and kept rows included, then its gradient through TRL's compute_loss in four states: on and
off the sampling policy (token ratios within e^±1), and with the KL reference moved from the
policy or equal to it (where the KL term has no gradient). Two arms are

- duplicates: their gradients are one positive constant apart in every state;
- duplicates in the policy term: so where the KL term has no gradient, not elsewhere (only
  for two arms neither of which changes the KL).

A fifth state, halfway through training, separates a trick that acts in a window of the steps
(the low-reward filter of the first 20%) from one that acts on every step.

Each pair found must be declared in one arm's fidelity card (`duplicate_of`, docs/tricks.md);
an undeclared pair fails the check (exit 1), as does a card that declares a pair this
baseline computes differently where its `where` says it holds (the tiny preset).

    python scripts/check_duplicates.py [--sweep variants|catalog|demo] [--quick]

prints `duplicate_pairs=N undeclared=M` last.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Keys whose change is what is sampled or how the update is made, not the gradient of one
# batch: such an arm is never a duplicate of one that computes the gradient differently.
NOT_THE_GRADIENT = (
    "trainer.temperature", "trainer.top_p", "trainer.num_generations",
    "trainer.steps_per_generation", "trainer.num_iterations", "trainer.max_grad_norm",
    "trainer.lr_scheduler_type", "trainer.lr_scheduler_kwargs", "trainer.sync_ref_model",
    "trainer.ref_model_mixup_alpha", "trainer.ref_model_sync_steps",
    "trainer.use_adaptive_entropy", "trainer.cast_lm_head_to_fp32", "hooks.ema",
    "hooks.dynamic_sampling", "hooks.no_positive_resampling")
KL_KEYS = ("trainer.beta", "trainer.use_bias_correction_kl", "hooks.kl_in_reward")
# The quick run: both declared duplicates (in every state, and in the policy term) and an arm
# each of them must not be taken for (CISPO equals DAPO's loss on-policy only).
QUICK = ["baseline", "adv_rloo", "loss_bnpo", "loss_dapo", "loss_cispo", "kl_off"]


def sweep_arms(sweep: str) -> list[str]:
    from grpo_ablate.config.compose import expand_jobs

    jobs = expand_jobs([f"sweep={sweep}", "seed=0"])
    return list(dict.fromkeys(o.split("=", 1)[1] for job in jobs for o in job
                              if o.startswith("trick=")))


def method_keys(meta: dict) -> list[str]:
    premise = set(meta.get("premise") or [])
    return [k for k in meta.get("keys") or [] if k not in premise]


def compared(meta: dict) -> bool:
    """Whether the arm's method lies in the gradient of one batch (the baseline: yes)."""
    return not any(k.startswith(NOT_THE_GRADIENT) for k in method_keys(meta))


def build(arm: str, out: Path):
    from grpo_ablate.training.probe import probe_trainer

    return probe_trainer([f"trick={arm}", "model.sft.steps=2", "seed=0"], str(out))


# Per group of G: right, partial, malformed; uniform groups in different numbers. Binary
# fractions, so that TRL's float32 group means are exact (a uniform group of 0.2s is 1.5e-8 off
# in float32, which TRL's 1e-4 turns into advantages of 1.5e-4: a difference of rounding).
PLANS = {
    "A": lambda g: [1.0] * g + [0.25] * g + [1.0] + [0.5] * (g - 1) + [1.0, -1.0] * (g // 2),
    "B": lambda g: [1.0, 0.0] * (g // 2) + [0.5] + [0.0] * (g - 1)
    + [1.0, 0.5, 0.0, 1.0] * (g // 4) + [0.0] * g,
}


def gradients(trainer) -> dict[str, object]:
    """The arm's gradient in each planted state: plan x (on, off) x (ref moved, ref = policy),
    at the first step; and plan A on-policy halfway through training (a trick that acts in a
    window of the steps is off there)."""
    import torch

    def planted_reward(plan):
        def reward(prompts, completions, **kwargs):
            return plan[:len(completions)]
        reward.__name__ = "planted"
        return reward

    rows = [trainer.train_dataset[i] for i in range(4) for _ in range(trainer.num_generations)]
    out = {}
    for name, plan_of in PLANS.items():
        for when in ("first", "halfway") if name == "A" else ("first",):
            trainer.state.global_step, trainer.state.max_steps = \
                (0, 10) if when == "first" else (5, 10)
            trainer.reward_funcs[0] = planted_reward(plan_of(trainer.num_generations))
            torch.manual_seed(0)
            batch = trainer.step_batch(rows)
            for state, planted in planted_states(trainer, batch, when == "first"):
                trainer.model.zero_grad()
                trainer.compute_loss(trainer.model, planted).backward()
                out[f"{name}/{when}/{state}"] = torch.cat(
                    [p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    trainer.state.global_step = 0
    return out


# The planted off-policy log-ratios, cycled over the tokens: one in each window where two
# methods differ (below PPO's 1 - 0.2; between 1 + 0.2, 0.24, 0.28 and 0.32; between the caps
# 4 and 5; past 5); and every fifth row a sequence the sampler liked about 1 nat a token more
# than the policy (past the off-policy mask's 0.5) with some tokens inside PPO's clip, whose
# gradient only the mask removes.
LOG_RATIOS = [-2.0, -0.3, -0.21, 0.0, 0.2, 0.23, 0.26, 0.3, 0.5, 1.45, 1.7, 2.0, -1.0]
DRIFTED_ROW = [-2.0, -2.0, 0.1, 0.0]


def planted_states(trainer, batch: dict, off: bool):
    """(name, batch) on the sampling policy and (if `off`) off it, x the KL reference moved
    from the policy or equal to it."""
    import torch

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    width = batch["completion_ids"].size(1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=attention).logits
        logp = (logits[:, -width - 1:-1] / trainer.args.temperature).log_softmax(-1).gather(
            -1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
    g = torch.Generator().manual_seed(1)
    moved = logp + (torch.rand(logp.shape, generator=g) - 0.5)
    grid = torch.tensor(LOG_RATIOS)
    shift = grid[torch.arange(logp.numel()) % len(grid)].view(logp.shape).to(logp.dtype)
    shift[::5] = torch.tensor(DRIFTED_ROW)[torch.arange(logp.size(1)) % len(DRIFTED_ROW)]
    for policy in ("on", "off") if off else ("on",):
        for ref in ("moved", "same"):
            planted = dict(batch)
            planted.pop("old_per_token_logps", None)
            if policy == "off":
                planted["old_per_token_logps"] = logp - shift
            if "ref_per_token_logps" in batch or trainer.beta != 0:
                planted["ref_per_token_logps"] = moved if ref == "moved" else logp
            yield f"{policy}/{ref}", planted


def constant_apart(a: dict, b: dict, states: list[str]) -> float | None:
    """The one positive constant c with a = c b in every state (None: there is none)."""
    import torch

    scales = []
    for s in states:
        x, y = a[s].double(), b[s].double()
        if y.norm() == 0 or x.norm() == 0:
            if x.norm() == y.norm() == 0:
                continue
            return None
        # float32 gradients of one computation agree to about 1e-13 in cosine; a KL term of
        # weight 0.04 beside a near-duplicate's policy term moves it by about 1e-6.
        cos = torch.dot(x, y) / (x.norm() * y.norm())
        if cos < 1 - 1e-9:
            return None
        scales.append(float(x.norm() / y.norm()))
    if not scales or max(scales) - min(scales) > 1e-5 * max(scales):
        return None
    return sum(scales) / len(scales)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="arms of a sweep that compute one gradient")
    parser.add_argument("--sweep", default="variants")
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    args = parser.parse_args(argv)
    from grpo_ablate.config.catalog import load_catalog

    metas = {t["id"]: t for t in load_catalog()}
    arms = QUICK if args.quick else sweep_arms(args.sweep)
    arms = list(dict.fromkeys([*arms, *(metas[a]["against"] for a in arms
                                        if metas[a].get("against"))]))
    chosen = [a for a in arms if compared(metas[a])]
    print(f"arms: {len(arms)}, compared: {len(chosen)} (the others change what is sampled or "
          f"the update: {', '.join(a for a in arms if a not in chosen) or 'none'})")
    with tempfile.TemporaryDirectory() as tmp:
        grads = {arm: gradients(build(arm, Path(tmp) / arm)) for arm in chosen}
    states = sorted(next(iter(grads.values())))
    policy_states = [s for s in states if s.endswith("/same")]  # no KL gradient there
    found = []
    for a, b in combinations(chosen, 2):
        scale = constant_apart(grads[a], grads[b], states)
        term = "all"
        if scale is None and not any(k in KL_KEYS for k in method_keys(metas[a])
                                     + method_keys(metas[b])):
            scale, term = constant_apart(grads[a], grads[b], policy_states), "policy"
        if scale is not None:
            found.append((a, b, scale, term))
    declared = {(a, (metas[a].get("fidelity") or {}).get("duplicate_of", {}).get("arm"))
                for a in chosen if (metas[a].get("fidelity") or {}).get("duplicate_of")}
    undeclared = 0
    for a, b, scale, term in found:
        ok = (a, b) in declared or (b, a) in declared
        undeclared += not ok
        what = "duplicates" if term == "all" else "duplicates in the policy term"
        print(f"{a} = {b} x {scale:.4f}: {what}"
              + ("" if ok else "  UNDECLARED: declare it in a fidelity card (duplicate_of)"))
    missing = [(a, b) for a, b in declared if b in chosen
               and not any({a, b} == {x, y} for x, y, _, _ in found)]
    for a, b in missing:
        print(f"{a} declares itself a duplicate of {b}, which this baseline does not compute: "
              "its card's `where` must say on which baseline it holds")
    print(f"duplicate_pairs={len(found)} undeclared={undeclared}")
    return 1 if undeclared or missing else 0


if __name__ == "__main__":
    sys.exit(main())
