"""Every arm is the method it names. Its fidelity card holds (config/fidelity.py); and what the
arm makes TRL compute on a planted batch is the source's equation at the source's settings,
written out here from the paper or the reference code (never from grpo_ablate's modules),
the settings typed in from the source: an arm that leaves one fails here. A ratio method is
tested off-policy (ratios planted on both sides of its clip or cap) and on-policy.

The policy is the embedded one with 2 SFT steps (`CHEAP`): the batch, its advantages and
its old and reference log-probs are planted, so what the policy would generate does not
matter; its gradients are compared through TRL's own `compute_loss`."""

from __future__ import annotations

import math

import pytest
import torch
from planted import planted_groups

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.config.fidelity import card_problems, catalog_cards, file_bodies
from grpo_ablate.errors import UserError

CHEAP = ["model.sft.steps=2"]  # an untrained policy: everything the tests need is planted
BETA = 0.04  # the baseline's KL weight (the review's), in every reference below


# -- the cards -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cards():
    return catalog_cards()


def test_every_arms_card_holds_against_what_it_composes(cards):
    found, problems = cards
    assert problems == []
    assert {c.arm for c in found} == {t["id"] for t in load_catalog()} - {"baseline"}


def test_an_arm_written_as_plain_data_is_its_composed_config_exactly():
    """The cards read each arm as the resolved baseline with its values written in (where
    its file allows it): on a sample of every kind (hook blocks null in the baseline, TRL
    keys, losses, a premise), the same as Hydra's composition, key for key."""
    from grpo_ablate.config.compose import compose
    from grpo_ablate.config.fidelity import composed_arms, plain_arm
    from grpo_ablate.config.pairs import Baseline

    ids = sorted(t["id"] for t in load_catalog() if t["id"] != "baseline")
    base = Baseline.of(compose(["trick=baseline"]))
    sample = sorted({*ids[::6], "loss_cispo", "adv_passk_4", "adv_positive_0.1", "kl_off",
                     "loss_gspo"} & set(ids))
    sample = [arm for arm in sample if plain_arm(arm, base) is not None]  # the road tested
    assert len(sample) >= 12 and plain_arm("group_size_8", base) is None  # it interpolates
    assert composed_arms(sample) == composed_arms(sample, full=True)


def test_a_card_fails_where_the_arm_leaves_a_source_setting_or_hides_a_key(cards):
    """CISPO at the baseline's 0.2 (the arm before this card) is named; so is a key the file
    sets that trick.keys leaves out, and a premise its against arm does not share."""
    found, _ = cards
    meta = {t["id"]: t for t in load_catalog()}
    body = file_bodies()["loss_cispo"]
    from grpo_ablate.config.fidelity import composed_arms

    composed = composed_arms(["loss_cispo", "reuse_2x_dapo", "baseline"])
    arms = {c.arm for c in found} | {"baseline"}
    assert card_problems(meta["loss_cispo"], body, composed["loss_cispo"],
                         composed["reuse_2x_dapo"], arms) == []
    left = {**composed["loss_cispo"], "trainer": {**composed["loss_cispo"]["trainer"],
                                                  "epsilon_high": 0.2}}
    (problem,) = card_problems(meta["loss_cispo"], body, left, composed["reuse_2x_dapo"], arms)
    assert "trainer.epsilon_high composes to 0.2, the source's 5.0" in problem
    hidden = {**meta["loss_cispo"], "keys": ["trainer.loss_type", "trainer.num_iterations"],
              "premise": ["trainer.num_iterations"]}
    assert any("sets trainer.epsilon_high, which trick.keys does not list" in p
               for p in card_problems(hidden, body, composed["loss_cispo"],
                                      composed["reuse_2x_dapo"], arms))
    assert any("premise trainer.num_iterations is 2, its against arm's 1" in p
               for p in card_problems(meta["loss_cispo"], body, composed["loss_cispo"],
                                      composed["baseline"], arms))


# -- planted batches through TRL's own loss ----------------------------------------------------
def trainer_for(overrides: list[str], tmp):
    from test_training_variants import trainer_for as build

    return build([*CHEAP, *overrides], tmp)


def policy_logps(model, batch, temperature):
    from test_training_variants import policy_logps as logps

    return logps(model, batch, temperature)


# Token log-ratios, cycled over a batch's tokens: one in each window where two clips or caps
# differ (below 1 - 0.2; between 1 + 0.2, 0.24, 0.28 and 0.32; between 4 and 5; past 5).
LOG_RATIOS = [-2.0, -0.3, -0.21, 0.0, 0.2, 0.23, 0.26, 0.3, 0.5, 1.45, 1.7, 2.0, -1.0]


def planted_batch(trainer, old: str, seed: int = 0) -> dict:
    """16 completions of up to 5 tokens (ragged), advantages of both signs, a reference the
    policy moved away from (log-probs within e^±0.5), and the sampler's log-probs `old`:
    `token` gives the tokens the ratios of LOG_RATIOS in turn, so every clip and cap binds on
    some tokens of each advantage sign and not on others; `sequence` gives each row one mean
    log-ratio, 1e-4 (inside GSPO's clip), +2e-3 or -2e-3 (past it on either side); `on`
    leaves them out (on-policy)."""
    g = torch.Generator().manual_seed(seed)
    vocab = trainer.model.config.vocab_size
    rows, width = 16, 5
    mask = torch.ones(rows, width, dtype=torch.long)
    for r in range(rows):
        mask[r, width - r % 3:] = 0
    batch = {"prompt_ids": torch.randint(4, vocab, (rows, 3), generator=g),
             "prompt_mask": torch.ones(rows, 3, dtype=torch.long),
             "completion_ids": torch.randint(4, vocab, (rows, width), generator=g),
             "completion_mask": mask, "num_items_in_batch": mask.sum()}
    rank = torch.arange(rows)
    batch["advantages"] = torch.where(rank % 2 == 0, 1.0, -1.0) * (0.5 + 0.25 * (rank % 4))
    with torch.no_grad():
        logp = policy_logps(trainer.model, batch, trainer.args.temperature)
    batch["ref_per_token_logps"] = logp + (torch.rand(logp.shape, generator=g) - 0.5)
    if old == "token":
        grid = torch.tensor(LOG_RATIOS)
        batch["old_per_token_logps"] = logp - grid[torch.arange(logp.numel()) % len(grid)].view(
            logp.shape)
    elif old == "sequence":
        shift = torch.tensor([1e-4, 1e-4, 2e-3, 2e-3, -2e-3, -2e-3, 1e-4, -2e-3] * 2)
        batch["old_per_token_logps"] = logp - shift[:, None]
    return batch


def k3(logp, ref):
    return torch.exp(ref - logp) - (ref - logp) - 1


def token_mean(per_token, mask):  # DAPO's token-level aggregation
    return (per_token * mask).sum() / mask.sum()


def sequence_mean(per_token, mask):  # GRPO's: each sequence's token mean, then the mean
    return ((per_token * mask).sum(-1) / mask.sum(-1)).mean()


def ppo(ratio, adv, low, high):
    return -torch.min(ratio * adv, ratio.clamp(1 - low, 1 + high) * adv)


def gradients(model, loss) -> torch.Tensor:
    model.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def trl_gradient(trainer, batch) -> torch.Tensor:
    return gradients(trainer.model, trainer.compute_loss(trainer.model, dict(batch)))


def source_gradient(trainer, batch, per_token_loss, aggregate) -> torch.Tensor:
    """The gradient of `aggregate(per_token_loss(logp, old, adv, mask) + beta k3, mask)`,
    from the policy's own log-probs computed here."""
    mask = batch["completion_mask"].float()
    logp = policy_logps(trainer.model, batch, trainer.args.temperature)
    old = batch.get("old_per_token_logps", logp.detach())
    adv = batch["advantages"][:, None].expand_as(logp)
    loss = aggregate(per_token_loss(logp, old, adv, mask)
                     + BETA * k3(logp, batch["ref_per_token_logps"]), mask)
    return gradients(trainer.model, loss)


def close(a, b) -> bool:
    return torch.allclose(a, b, rtol=1e-4, atol=1e-7)


# The sources' equations at the sources' settings (the numbers are the papers', not the arms').
def cispo(logp, old, adv, mask):  # MiniMax-M1 Eq. 4-5, ScaleRL's eps_max = 5, no lower bound
    return -torch.exp(logp - old).clamp(max=5.0).detach() * adv * logp


def gspo(logp, old, adv, mask, low=3e-4, high=4e-4):  # GSPO v2 Eq. 5-7, section 5.1
    s = torch.exp(((logp - old) * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True))
    return ppo(s, adv, low, high)


def length_weighted(per_token, mask):  # LUSPO: a sequence's term summed over its tokens,
    return (per_token * mask).sum(-1).mean()  # i.e. GSPO's times its length, mean over them


def sapo(logp, old, adv, mask):  # SAPO: f(r) = sigmoid(tau (r - 1)) 4 / tau, tau 1.0 / 1.05
    tau = torch.where(adv > 0, 1.0, 1.05)
    return -torch.sigmoid(tau * (torch.exp(logp - old) - 1)) * 4 / tau * adv


def vespo(logp, old, adv, mask):  # VESPO: phi(w) = e^lam w^k e^(-lam w), (k, lam) = (2, 3) / (3, 2)
    log_w = ((logp - old) * mask).sum(-1, keepdim=True)
    k, lam = torch.where(adv >= 0, 2.0, 3.0), torch.where(adv >= 0, 3.0, 2.0)
    phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
    return -phi.detach() * adv * logp


def clip(low, high):  # PPO's clipped surrogate: DAPO's clip-higher is high > low
    return lambda logp, old, adv, mask: ppo(torch.exp(logp - old), adv, low, high)


def two_sided(logp, old, adv, mask):  # INTELLECT-2: the ratio of A < 0 tokens capped at 4
    ratio = torch.exp(logp - old)
    return -torch.min(ratio.clamp(max=4.0) * adv, ratio.clamp(0.8, 1.2) * adv)


def summed_over(length):  # Dr. GRPO: the token sum over a constant, B x the maximum length
    return lambda per_token, mask: (per_token * mask).sum() / (mask.size(0) * length)


LOSSES = {  # arm: (the source's per-token loss, its aggregation, the arm it is compared with)
    "loss_cispo": (cispo, token_mean, "reuse_2x_dapo"),
    "importance_sampling_sequence": (gspo, sequence_mean, "reuse_2x"),
    "loss_luspo": (gspo, length_weighted, "importance_sampling_sequence"),
    "loss_sapo": (sapo, sequence_mean, "reuse_2x"),
    "loss_vespo": (vespo, token_mean, "reuse_2x_dapo"),
    "ratio_clip_high_0.28": (clip(0.2, 0.28), sequence_mean, "reuse_2x"),
    "ratio_clip_delta_4": (two_sided, sequence_mean, "reuse_2x"),
    "loss_dapo": (clip(0.2, 0.2), token_mean, None),
    "reuse_2x": (clip(0.2, 0.2), sequence_mean, None),
    "reuse_2x_dapo": (clip(0.2, 0.2), token_mean, None),
}


@pytest.fixture(scope="module")
def trainers(tmp_path_factory):
    """One trainer per arm, all on the same weights (the same cached checkpoint)."""
    built: dict = {}

    def get(arm):
        if arm not in built:
            built[arm] = trainer_for([f"trick={arm}"], tmp_path_factory.mktemp(arm))
        return built[arm]
    return get


@pytest.mark.slow  # a trainer per arm and ratio kind: the quick tier keeps the planted ones
@pytest.mark.parametrize("arm", sorted(LOSSES))
@pytest.mark.parametrize("old", ["token", "sequence", "on"])
def test_the_arms_loss_is_its_sources_equation(arm, old, trainers):
    per_token, aggregate, _ = LOSSES[arm]
    trainer = trainers(arm)
    batch = planted_batch(trainer, old)
    assert close(trl_gradient(trainer, batch), source_gradient(trainer, batch, per_token, aggregate))


def test_dr_grpo_sums_tokens_over_a_constant(trainers):
    trainer = trainers("loss_dr_grpo")
    batch = planted_batch(trainer, "on")
    want = source_gradient(trainer, batch, clip(0.2, 0.2),
                           summed_over(trainer.args.max_completion_length))
    assert close(trl_gradient(trainer, batch), want)


def test_cispos_weights_are_one_on_policy_and_capped_at_five_off_it(trainers):
    """On-policy CISPO is its against arm's gradient (DAPO's token loss, every weight 1); off
    it, the tokens past the PPO clip keep their gradient (weights up to 5): not the clip's."""
    cispo_t, dapo_t = trainers("loss_cispo"), trainers("reuse_2x_dapo")
    on = planted_batch(cispo_t, "on")
    assert close(trl_gradient(cispo_t, on), trl_gradient(dapo_t, on))
    off = planted_batch(cispo_t, "token")
    assert not close(trl_gradient(cispo_t, off), trl_gradient(dapo_t, off))
    capped = source_gradient(cispo_t, off, lambda lp, o, a, m: -torch.exp(lp - o).clamp(
        max=0.2).detach() * a * lp, token_mean)  # the baseline's 0.2 read as the cap
    assert not close(trl_gradient(cispo_t, off), capped)


def test_gspos_clip_binds_at_the_papers_scale_on_a_planted_off_policy_batch(trainers):
    """Sequences whose mean log-ratio is 2e-3 are past [1-3e-4, 1+4e-4] and lose their
    gradient on the clipped side; under the baseline's 0.2 none would."""
    trainer = trainers("importance_sampling_sequence")
    batch = planted_batch(trainer, "sequence")
    at_02 = source_gradient(trainer, batch, lambda *a: gspo(*a, low=0.2, high=0.2), sequence_mean)
    assert not close(trl_gradient(trainer, batch), at_02)
    assert close(trl_gradient(trainer, batch), source_gradient(trainer, batch, gspo, sequence_mean))


# -- the advantages an arm makes TRL compute, from planted rewards ----------------------------
def scored(trainer, plan: list[float]) -> dict:
    """TRL's sampled batch of the trainer's first 4 prompts, the task's reward replaced by
    `plan` (a graded task's values: groups all right, all partial, one right, half malformed)."""
    def reward(prompts, completions, **kwargs):
        return plan[:len(completions)]

    reward.__name__ = "planted"
    trainer.reward_funcs[0] = reward
    rows = [trainer.train_dataset[i] for i in range(4) for _ in range(trainer.num_generations)]
    torch.manual_seed(0)
    return trainer._generate_and_score_completions(rows)


def grouped(values, g):
    return [values[i:i + g] for i in range(0, len(values), g)]


def mean(xs):
    return sum(xs) / len(xs)


def sample_std(xs):  # torch.std's (Bessel's), as TRL and verl use
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def grpo_z(group):
    return [(r - mean(group)) / (sample_std(group) + 1e-4) for r in group]


def advantages_by_source(arm: str, plan: list[float], g: int) -> list[float]:
    """Each arm's advantage by its source (TRL's 1e-4 where TRL divides by a std)."""
    groups = grouped(plan, g)
    if arm == "loss_dr_grpo":  # Dr. GRPO: r - mean, no std
        return [r - mean(gr) for gr in groups for r in gr]
    if arm == "scale_rewards_batch":  # group mean, batch std
        return [(r - mean(gr)) / (sample_std(plan) + 1e-4) for gr in groups for r in gr]
    if arm in ("adv_batch_mean_std", "reward_scale_pm1"):  # REINFORCE++: whitened over the batch
        values = [2 * r - 1 for r in plan] if arm == "reward_scale_pm1" else plan
        return [(r - mean(values)) / (sample_std(values) + 1e-4) for r in values]
    if arm == "adv_rloo":  # verl's rloo: r n/(n-1) - mean n/(n-1), then TRL's group std
        return [(r * g / (g - 1) - mean(gr) * g / (g - 1)) / (sample_std(gr) + 1e-4)
                for gr in groups for r in gr]
    if arm == "adv_maxrl":  # MaxRL: (r - mean) / mean, 0 where the mean is not positive
        return [(r - mean(gr)) / mean(gr) if mean(gr) > 0 else 0.0 for gr in groups for r in gr]
    if arm == "adv_positive_0.1":  # W-REINFORCE: +lambda right, -1 wrong
        return [0.1 if r >= 1.0 else -1.0 for r in plan]
    if arm == "adv_clip_2":  # the z-score clamped to [-2, 2]
        return [max(-2.0, min(2.0, a)) for gr in groups for a in grpo_z(gr)]
    raise KeyError(arm)


ADVANTAGE_ARMS = ["loss_dr_grpo", "scale_rewards_batch", "adv_batch_mean_std",
                  "reward_scale_pm1", "adv_rloo", "adv_maxrl", "adv_positive_0.1", "adv_clip_2"]


@pytest.mark.slow  # a trainer per arm
@pytest.mark.parametrize("arm", ADVANTAGE_ARMS)
def test_the_arms_advantages_are_its_sources(arm, trainers):
    trainer = trainers(arm)
    g = trainer.num_generations
    plan = planted_groups(g)
    if arm == "adv_maxrl":  # MaxRL is defined on success probabilities: rewards in [0, 1]
        plan = [max(r, 0.0) for r in plan]
    out = scored(trainer, plan)
    want = torch.tensor(advantages_by_source(arm, plan, g))
    # TRL takes a group's mean in float32: a group of sixteen 0.2s is 1.5e-8 off, which its
    # 1e-4 (the std is 0) turns into an advantage of 1.5e-4 where the source's is 0.
    assert torch.allclose(out["advantages"], want.to(out["advantages"].dtype), rtol=1e-4,
                          atol=5e-4), arm
    base = scored(trainers("baseline"), plan)["advantages"]
    assert not torch.allclose(out["advantages"], base, atol=1e-5)  # it is not GRPO's


def test_the_low_reward_filter_keeps_the_groups_advantages_on_the_rows_it_keeps(trainers):
    """On 0/1 rewards (the case that had no gradient): the rows under the threshold leave the
    loss, and the kept rows keep GRPO's advantage over the whole group, not 0."""
    trainer = trainers("filter_low_reward_all")
    g = trainer.num_generations
    plan = [1.0, 0.0] * (g // 2) + [1.0] + [0.0] * (g - 1) + [1.0] * g + [0.0] * g
    out = scored(trainer, plan)
    kept = torch.tensor([r >= 0.25 for r in plan])
    assert torch.equal(out["completion_mask"].sum(1) > 0, kept & (out["completion_mask"].sum(1) > 0))
    assert (out["completion_mask"][~kept] == 0).all()
    want = torch.tensor([a for gr in grouped(plan, g) for a in grpo_z(gr)])
    assert torch.allclose(out["advantages"][kept], want[kept], rtol=1e-4, atol=5e-4)
    assert (out["advantages"][kept][: g // 2] > 0.5).all()  # a gradient: the right ones rise


def test_advantage_over_kept_is_refused_on_a_0_1_task():
    from grpo_ablate.config import specs_for

    with pytest.raises(UserError, match="hooks.filter_low_reward on task gsm8k .binary rewards.: "
                                        "advantage_over=kept") as refused:
        specs_for(["task=math", "trick=filter_low_reward_all",
                   "hooks.filter_low_reward.advantage_over=kept", "seed=0"], multirun=False)
    assert "\n" not in str(refused.value)


# -- no arm degenerates on a shipped task -------------------------------------------------------
KIND_TASKS = {"binary": "math", "graded": "arithmetic", "fraction": "code", "score": "chat"}
KIND_REWARDS = {  # per group, cycled to G: mixed groups, then a uniform one, as the kind makes them
    "binary": [[1.0, 0.0], [1.0] + [0.0] * 7, [1.0], [0.0]],
    "graded": [[1.0, 0.3, -1.0, 0.45], [1.0, 0.2], [0.2], [1.0, -1.0]],
    "fraction": [[0.0, 0.25, 0.5, 1.0], [1.0, 0.75], [0.5], [0.0] * 3 + [1.0]],
    "score": [[-1.3, 0.4, 2.2, -0.7], [0.9, 1.6, -2.5], [0.9], [3.1, -0.2]],
}
# Written from the sources: a method that splits completions into right and wrong (W-REINFORCE,
# Pass@k, the positive-sample NLL, no-positive-resampling's pass rate) or reads the group mean
# as a success probability (MaxRL) is not defined on a reward model's score.
REFUSED = {(arm, "score") for arm in ("adv_positive_0.1", "adv_passk_4", "adv_maxrl",
                                      "positive_nll", "no_positive_resampling")}


def reads_rewards(trick: dict) -> bool:
    """Whether an arm's method reads the rewards (a hook at the rewards, drop, generation or
    advantages point, or TRL's reward scaling). Any other arm computes its gradient from the
    baseline's advantages, which the baseline's case tests on every kind."""
    premise = set(trick.get("premise") or [])
    keys = [k for k in trick.get("keys") or [] if k not in premise]
    return trick["id"] == "baseline" or any(
        k.startswith("hooks.") and k != "hooks.ema" or k == "trainer.scale_rewards" for k in keys)


ARMS = sorted(t["id"] for t in load_catalog() if reads_rewards(t))


def kind_plan(kind: str, g: int) -> list[float]:
    return [base[i % len(base)] for base in KIND_REWARDS[kind] for i in range(g)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KIND_TASKS))
def test_no_arm_loses_its_gradient_on_a_shipped_tasks_rewards(kind, tmp_path):
    """On a planted batch of the kind's rewards (mixed groups and a uniform one), each arm
    whose method reads the rewards has a non-zero policy gradient through TRL's step; or it is
    refused in one line, naming its hook, the task and why, exactly where its source is not
    defined on such rewards."""
    refused, trained = [], []
    for arm in ARMS:
        try:
            trainer = trainer_for([f"task={KIND_TASKS[kind]}", f"trick={arm}"], tmp_path / arm)
        except UserError as exc:
            text = str(exc)
            assert "\n" not in text and f"({kind} rewards)" in text and len(text) < 400, text
            refused.append(arm)
            continue
        batch = scored(trainer, kind_plan(kind, trainer.num_generations))
        assert batch["completion_mask"].sum() > 0, arm
        if trl_gradient(trainer, batch).abs().max() > 0:
            trained.append(arm)
    assert set(refused) == {a for a, k in REFUSED if k == kind}
    assert sorted(trained) == sorted(set(ARMS) - set(refused))  # every other one has a gradient
