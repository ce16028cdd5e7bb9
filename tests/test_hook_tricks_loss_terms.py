"""The 2026 catalog's loss-point arms: DPPO-Binary-TV's trust region (a token mask at the
token_advantages point) and the two loss terms (the loss_term point): the squared log-ratio
to the behaviour policy and the positive-sample NLL. Each against its framework's formula
computed here, token by token in plain Python on a planted batch; then through TRL's own
loss on a fixed off-policy batch, gradients compared."""

from __future__ import annotations

import math

import pytest
import torch
from test_hook_tricks_points import planted_tokens, trl_token_loss
from test_training_variants import fixed_batch  # noqa: F401 (the fixed off-policy batch, a fixture)

from grpo_ablate.config import specs_for
from grpo_ablate.errors import UserError
from grpo_ablate.hook_tricks import HOOKS, TokenBatch, import_modules, measure_of

import_modules([f"grpo_ablate.hook_tricks.{m}" for m in ("dppo_tv", "behaviour_kl",
                                                         "positive_nll")])
LOW, HIGH = 0.2, 0.2


def token_batch(adv, logp, old, mask, rewards=None) -> TokenBatch:
    return TokenBatch(advantages=adv, logps=logp, old_logps=old, mask=mask, epsilon_low=0.2,
                      epsilon_high=0.2, generator=torch.Generator().manual_seed(0),
                      rewards=rewards)


def dppo_keep_by_hand(adv, logp, old) -> list[list[bool]]:
    """prime-rl's and verl's DPPO-Binary-TV mask, per token: with a positive advantage a token
    is masked when p - p_old > high, otherwise when p - p_old < -low."""
    return [[(math.exp(lp) - math.exp(o) <= HIGH) if a > 0 else (math.exp(lp) - math.exp(o) >= -LOW)
             for a, lp, o in zip(ar, lr, orow, strict=True)]
            for ar, lr, orow in zip(adv.tolist(), logp.tolist(), old.tolist(), strict=True)]


def planted_probabilities():
    """Planted tokens whose probability moved by up to 0.5 either way from the sampler's
    (planted_tokens' log-probs are mostly below e^-1: too small to move 0.2)."""
    adv, _, _, mask = planted_tokens(3)
    g = torch.Generator().manual_seed(1)
    old_p = torch.rand(adv.shape, generator=g) * 0.8 + 0.1
    new_p = (old_p + (torch.rand(adv.shape, generator=g) - 0.5)).clamp(0.01, 0.99)
    return adv, new_p.log().requires_grad_(True), old_p.log(), mask


def test_dppo_masks_the_tokens_whose_probability_left_the_trust_region():
    adv, logp, old, mask = planted_probabilities()
    keep = torch.tensor(dppo_keep_by_hand(adv, logp.detach(), old))
    counted = mask.bool()
    assert 0 < int((~keep & counted).sum()) < int(counted.sum())  # the premise: some of each
    new = HOOKS["dppo_tv"].token_advantages(token_batch(adv, logp, old, mask),
                                            {"low": LOW, "high": HIGH})
    assert torch.equal(new, torch.where(keep, adv, torch.zeros(())))


def test_dppo_through_the_unclipped_surrogate_has_prime_rls_gradient():
    """TRL's token loss with the ratio clip off and DPPO's advantages has the gradient of
    prime-rl's policy term, -(keep A r) summed over the counted tokens, token mean."""
    adv, logp, old, mask = planted_probabilities()
    new = HOOKS["dppo_tv"].token_advantages(token_batch(adv, logp, old, mask),
                                            {"low": LOW, "high": HIGH})
    ours = torch.autograd.grad(trl_token_loss(new, logp, old, mask, 1e6, 1e6), logp)[0]
    keep = torch.tensor(dppo_keep_by_hand(adv, logp.detach(), old)).float()
    prime = -(keep * adv * torch.exp(logp - old) * mask).sum() / mask.sum()
    assert torch.allclose(ours, torch.autograd.grad(prime, logp)[0], atol=1e-7)
    clipped = torch.autograd.grad(trl_token_loss(adv, logp, old, mask), logp)[0]
    assert not torch.allclose(ours, clipped, atol=1e-4)  # not the ratio clip's gradient


def test_the_behaviour_kl_is_tau_times_the_squared_log_ratio_on_every_token():
    adv, logp, old, mask = planted_tokens(4)
    term, tokens = HOOKS["behaviour_kl"].loss_term(token_batch(adv, logp, old, mask), 1e-3)
    expected = [[1e-3 * (lp - o) ** 2 for lp, o in zip(lr, orow, strict=True)]
                for lr, orow in zip(logp.tolist(), old.tolist(), strict=True)]
    assert torch.allclose(term.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-5)
    assert torch.equal(tokens, mask.bool())
    on_policy, _ = HOOKS["behaviour_kl"].loss_term(token_batch(adv, logp, logp.detach(), mask), 1e-3)
    assert int((on_policy != 0).sum()) == 0  # no pull where the policy sampled the batch


def test_the_positive_nll_covers_the_correct_completions_tokens_alone():
    adv, logp, old, mask = planted_tokens(5)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.5, -1.0, 1.0])
    term, tokens = HOOKS["positive_nll"].loss_term(token_batch(adv, logp, old, mask, rewards),
                                                   {"coef": 0.1, "correct_at": 1.0})
    for r, row in enumerate(mask.tolist()):
        for t, counted in enumerate(row):
            assert bool(tokens[r, t]) == (bool(counted) and rewards[r].item() >= 1.0)
            if tokens[r, t]:
                assert math.isclose(term[r, t].item(), -0.1 * logp[r, t].item(), rel_tol=1e-6)
    with pytest.raises(RuntimeError, match="carries no rewards"):
        HOOKS["positive_nll"].loss_term(token_batch(adv, logp, old, mask), {"coef": 0.1,
                                                                         "correct_at": 1.0})


def test_the_loss_point_arms_say_what_they_count():
    assert measure_of(HOOKS["behaviour_kl"]) == ("behaviour_kl",
                                                 "tokens behaviour_kl's loss term acted on")
    assert HOOKS["positive_nll"].point() == "loss_term"
    assert HOOKS["dppo_tv"].point() == "token_advantages"


@pytest.mark.parametrize(("tricks", "why"), [
    (["trick=dppo_tv", "trainer.delta=4.0"], "allowed: trainer.delta null, not 4.0"),
    (["trick=dppo_tv", "trainer.loss_type=sapo"], "token-level clipped-ratio"),
    (["trick=dppo_tv", "+hooks.kl_cov={ratio:0.1,coef:0.1}"], "both replace the policy loss"),
    (["trick=behaviour_kl", "hooks.behaviour_kl=-1"], "a number > 0"),
    (["trick=positive_nll", "hooks.positive_nll.coef=0"], "a number > 0"),
])
def test_loss_point_arms_refuse_what_they_cannot_run_with(tricks, why):
    with pytest.raises(UserError, match=why):
        specs_for([*tricks, "seed=0"], multirun=False)


# -- through TRL's own loss ------------------------------------------------------------------
TOKEN_MEAN = ["trainer.beta=0", "trainer.loss_type=bnpo"]  # the micro-batch's token mean


@pytest.mark.slow
def test_dppo_through_trls_loss_is_prime_rls_policy_term(fixed_batch, tmp_path):  # noqa: F811
    from test_training_variants import gradient, independent_gradient, policy_logps, trainer_for

    _, batch = fixed_batch
    trainer = trainer_for([*TOKEN_MEAN, "trick=dppo_tv"], tmp_path)
    assert trainer.epsilon_high == 0.2 and trainer.args.num_iterations == 2  # off inside the loss
    with torch.no_grad():
        logp = policy_logps(trainer.model, batch, trainer.args.temperature)
    adv = batch["advantages"].unsqueeze(1).expand_as(logp)
    keep = torch.tensor(dppo_keep_by_hand(adv, logp, batch["old_per_token_logps"]))
    counted = batch["completion_mask"].bool()
    masked = int((~keep & counted).sum())
    assert 0 < masked < int(counted.sum())  # the premise: the planted batch has some of each

    def prime(old, lp, a, mask):
        k = torch.tensor(dppo_keep_by_hand(a, lp.detach(), old)).float()
        return -(k * a * torch.exp(lp - old) * mask).sum() / mask.sum() \
            / trainer.args.steps_per_generation  # undone by independent_gradient (dapo's)

    clip = (trainer.epsilon_low, trainer.epsilon_high)
    assert torch.allclose(gradient(trainer, batch), independent_gradient(trainer, batch, prime),
                          rtol=1e-4, atol=1e-6)
    assert (trainer.epsilon_low, trainer.epsilon_high) == clip  # put back after the loss
    assert (trainer.activity["dppo_tv_changed"], trainer.activity["dppo_tv_units"]) == \
        (masked, int(counted.sum()))


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["behaviour_kl", "positive_nll"])
def test_a_loss_term_through_trls_loss_adds_its_token_mean(arm, fixed_batch,  # noqa: F811
                                                           tmp_path):
    """TRL's bnpo loss (the clipped surrogate's token mean) plus the term's mean over its
    tokens, computed here from the policy's own log-probs: the gradients agree, and the
    arm without its term (its baseline) does not."""
    from test_training_variants import gradient, independent_gradient, trainer_for

    _, fixed = fixed_batch
    rows = fixed["completion_mask"].size(0)
    rewards = torch.tensor([1.0 if r % 3 == 0 else 0.0 for r in range(rows)])
    batch = {**fixed, "grpo_ablate_task_rewards": rewards}
    trainer = trainer_for([*TOKEN_MEAN, f"trick={arm}"], tmp_path)
    spg = trainer.args.steps_per_generation

    def expected(old, logp, adv, mask):
        if arm == "behaviour_kl":
            tokens, term = mask, 1e-3 * (logp - old) ** 2
        else:
            tokens, term = mask * (rewards >= 1.0)[:, None], -0.1 * logp
        return (trl_token_loss(adv, logp, old, mask) + (term * tokens).sum() / tokens.sum()) / spg

    want = independent_gradient(trainer, batch, expected)
    assert torch.allclose(gradient(trainer, batch), want, rtol=1e-4, atol=1e-6)
    tokens = int(fixed["completion_mask"].sum())
    acted = tokens if arm == "behaviour_kl" else \
        int(fixed["completion_mask"][rewards >= 1.0].sum())
    assert (trainer.activity[f"{arm}_changed"], trainer.activity[f"{arm}_units"]) == (acted, tokens)
    plain = trainer_for([*TOKEN_MEAN, "trick=reuse_2x"], tmp_path / "plain")
    assert not torch.allclose(gradient(plain, batch), want, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_each_rows_reward_travels_with_the_row_to_the_loss(tmp_path, tiny_policy):
    """TRL's sampled batch, planted rewards, rescaled to [-1, 1] by a shaping hook: the rows
    the positive NLL reads are the rows' own task rewards (before the shaping), and a batch
    TRL splits and shuffles keeps each with its row."""
    from test_training_variants import generate, planted_rewards, trainer_for
    from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

    trainer = trainer_for(["trick=positive_nll", "+hooks.reward_scale={low:-1.0,high:1.0}",
                           "trick.modules=[grpo_ablate.hook_tricks.positive_nll,"
                           "grpo_ablate.hook_tricks.reward_scale]"], tmp_path)
    plan = planted_rewards(trainer)
    out = generate(trainer)
    planted = torch.tensor(plan)  # float32, as TRL's rewards
    assert torch.equal(out["grpo_ablate_task_rewards"], planted)
    assert trainer.activity["reward_scale_changed"] > 0  # the premise: the rewards were shaped
    out["row"] = torch.arange(len(plan))  # which row each is, to follow through the shuffle
    torch.manual_seed(0)
    shuffled = shuffle_sequence_dict(out)  # as TRL's _prepare_inputs splits a generation
    assert shuffled["row"].tolist() != list(range(len(plan)))
    assert torch.equal(shuffled["grpo_ablate_task_rewards"], planted[shuffled["row"]])
    for part in split_tensor_dict(shuffled, 2):
        assert torch.equal(part["grpo_ablate_task_rewards"], planted[part["row"]])
