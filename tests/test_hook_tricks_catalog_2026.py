"""The 2026 catalog's hook arms, each against an independent computation of its paper's
formula on a planted batch (plain Python loops and `statistics`, not the module's tensor
code), and the catalog's rows present with their papers. The end-to-end checks through
TRL's own batch are the slow tests at the bottom."""

from __future__ import annotations

import statistics

import pytest
import torch
from planted import planted_groups

from grpo_ablate.config import specs_for
from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.errors import UserError
from grpo_ablate.hook_tricks import HOOKS, DropBatch, StepBatch, check_hooks, import_modules
from grpo_ablate.hook_tricks.adv_clip import clip_advantages
from grpo_ablate.hook_tricks.batch_advantage import batch_advantages
from grpo_ablate.hook_tricks.kl_in_reward import kl_alike, kl_penalised_advantages
from grpo_ablate.hook_tricks.maxrl import maxrl_advantages
from grpo_ablate.hook_tricks.no_positive_resampling import group_pass_rates, prompts_solved
from grpo_ablate.hook_tricks.prompt_loss import prompt_weights
from grpo_ablate.hook_tricks.reward_scale import rescale_reward
from grpo_ablate.hook_tricks.rloo import leave_one_out_advantages
from grpo_ablate.hook_tricks.zero_variance_filter import varied_groups_keep

G = 6
# Planted rewards, 4 groups of 6: all right, none right, one right, mixed with a malformed -1.
REWARDS = torch.tensor(planted_groups(G), dtype=torch.float64)
NEW_ARMS = {"adv_rloo", "adv_maxrl", "adv_batch_mean_std", "adv_clip_2", "reward_scale_pm1",
            "zero_variance_filter", "loss_prompt_level", "lite_ppo", "ratio_clip_high_0.24",
            "ratio_clip_high_0.32", "staleness_2", "staleness_8", "top_p_1.0",
            "kl_in_reward", "no_positive_resampling", "dppo_tv", "behaviour_kl",
            "positive_nll"}


def groups(values: list[float]) -> list[list[float]]:
    return [values[i:i + G] for i in range(0, len(values), G)]


def grpo_by_hand(values: list[float]) -> list[float]:
    """TRL's group z-score: (r - mean) / (Bessel std + 1e-4)."""
    return [(r - statistics.mean(g)) / (statistics.stdev(g) + 1e-4) for g in groups(values)
            for r in g]


def rloo_by_hand(values: list[float], kept: list[bool] | None = None) -> list[float]:
    """Ahmadian et al. Eq. 4, each completion against the mean of the others of its prompt,
    divided by its kept group's std + 1e-4 as TRL scales; 0 for a dropped row."""
    kept = kept or [True] * len(values)
    out = []
    for g, k in zip(groups(values), groups(kept), strict=True):
        members = [r for r, on in zip(g, k, strict=True) if on]
        for r, on in zip(g, k, strict=True):
            if not on or len(members) < 2:
                out.append(0.0)
                continue
            others = list(members)
            others.remove(r)
            out.append((r - sum(others) / len(others)) / (statistics.stdev(members) + 1e-4))
    return out


def test_rloo_is_the_leave_one_out_baseline_and_grpo_times_g_over_g_minus_1():
    got = leave_one_out_advantages(REWARDS, G, "group")
    assert torch.allclose(got, torch.tensor(rloo_by_hand(REWARDS.tolist()), dtype=torch.float64))
    # The near-null control's identity: under group-std scaling, GRPO's advantage x G/(G-1).
    grpo = torch.tensor(grpo_by_hand(REWARDS.tolist()), dtype=torch.float64)
    assert torch.allclose(got, grpo * G / (G - 1))
    # Unscaled (scale_rewards=none): r_i minus the others' mean, nothing else.
    plain = leave_one_out_advantages(REWARDS, G, "none")
    by_hand = [r - (sum(g) - r) / (G - 1) for g in groups(REWARDS.tolist()) for r in g]
    assert torch.allclose(plain, torch.tensor(by_hand, dtype=torch.float64))


def test_rloo_leaves_dropped_rows_out_of_every_baseline():
    kept = [i % 4 != 3 for i in range(len(REWARDS))]  # a filter dropped every 4th row
    got = leave_one_out_advantages(REWARDS, G, "group", torch.tensor(kept)).nan_to_num(nan=0.0)
    assert torch.allclose(got, torch.tensor(rloo_by_hand(REWARDS.tolist(), kept),
                                            dtype=torch.float64))


def test_maxrl_divides_by_the_groups_mean_and_gives_unsolved_groups_nothing():
    values = [1.0] * G + [0.0] * G + [1.0] + [0.0] * (G - 1) + [1.0, 0.0] * (G // 2)
    got = maxrl_advantages(torch.tensor(values), G)
    by_hand = []
    for g in groups(values):
        mean = sum(g) / len(g)
        by_hand += [(r - mean) / mean if mean > 0 else 0.0 for r in g]
    assert torch.allclose(got, torch.tensor(by_hand, dtype=torch.float64))
    # The hard prompt's one success weighs (1 - 1/G) / (1/G) = G - 1; the half-solved one's 1.
    assert got[2 * G].item() == pytest.approx(G - 1) and got[3 * G].item() == pytest.approx(1.0)


def test_batch_advantages_standardise_over_the_whole_batch():
    values = REWARDS.tolist()
    by_hand = [(r - statistics.mean(values)) / (statistics.stdev(values) + 1e-4) for r in values]
    assert torch.allclose(batch_advantages(REWARDS), torch.tensor(by_hand, dtype=torch.float64))


def test_the_reward_scale_cancels_in_batch_advantages_and_doubles_unscaled_ones():
    """{0,1} -> {-1,1} is affine: under a mean-and-std advantage it moves nothing beyond
    TRL's epsilon (the arm's documented expectation), and without std scaling it doubles it."""
    matrix = REWARDS.clamp(min=0).unsqueeze(1)
    scaled = rescale_reward(matrix, -1.0, 1.0)[:, 0]
    assert scaled.tolist() == [2 * r - 1 for r in matrix[:, 0].tolist()]
    assert torch.allclose(batch_advantages(scaled), batch_advantages(matrix[:, 0]), atol=1e-3)
    unscaled = leave_one_out_advantages(scaled, G, "none")
    assert torch.allclose(unscaled, 2 * leave_one_out_advantages(matrix[:, 0], G, "none"))


def test_zero_variance_filtering_drops_exactly_the_uniform_groups():
    keep = HOOKS["zero_variance_filter"].drop_samples(DropBatch(REWARDS, 0, 10, G), True)
    uniform = [len(set(g)) == 1 for g in groups(REWARDS.tolist())]
    assert keep.tolist() == [not u for u in uniform for _ in range(G)]
    assert uniform == [True, True, False, False]
    assert varied_groups_keep(torch.ones(2 * G), G).sum() == 0


def test_advantage_clipping_clamps_the_rare_success():
    z = torch.tensor(grpo_by_hand(REWARDS.tolist()), dtype=torch.float64)
    assert z.max() > 2  # one right among 0.3s: the premise
    assert torch.equal(clip_advantages(z, 2.0), torch.tensor(
        [min(2.0, max(-2.0, a)) for a in z.tolist()], dtype=torch.float64))


def test_prompt_level_weights_turn_the_token_loss_into_the_prompt_average():
    """The clipped surrogate with the weighted advantages, averaged over all tokens (DAPO's
    token-level loss), equals ScaleRL's prompt-level average of the unweighted surrogate."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([3, 5, 2, 7, 4, 6, 1, 1, 2, 1, 1, 1, 7, 7, 6, 7, 7, 7, 2, 3, 2, 3, 2, 3])
    width = int(lengths.max())
    mask = (torch.arange(width)[None, :] < lengths[:, None]).double()
    ratio = torch.exp(torch.rand(len(lengths), width, generator=g, dtype=torch.float64) - .5)
    advantages = torch.tensor(grpo_by_hand(REWARDS.tolist()), dtype=torch.float64)

    def surrogate(adv):  # per token, -min(r A, clip(r) A)
        a = adv[:, None]
        return -torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)

    weighted = advantages * prompt_weights(lengths, G)
    token_level = (surrogate(weighted) * mask).sum() / mask.sum()
    per_prompt = []
    for p in range(4):
        rows = slice(p * G, (p + 1) * G)
        per_prompt.append(float((surrogate(advantages)[rows] * mask[rows]).sum() / mask[rows].sum()))
    assert token_level.item() == pytest.approx(sum(per_prompt) / 4)
    # and it is not the unweighted token average: the premise (groups' token counts differ)
    assert (surrogate(advantages) * mask).sum() / mask.sum() != pytest.approx(token_level.item())


def test_prompt_level_weights_with_dropped_rows_count_kept_tokens_only():
    lengths = torch.tensor([2, 4] * 6)
    keep = torch.tensor([True] * 6 + [False] * 6)  # the second prompt dropped whole
    w = prompt_weights(lengths, G, keep)
    assert w[:G].tolist() == [1.0] * G and w[G:].tolist() == [0.0] * G


def test_kl_in_the_reward_penalises_each_completion_by_its_summed_k1():
    """verl's use_kl_in_reward for GRPO: r' = r - beta * sum_t k1, then TRL's group z-score
    of r'. Planted: KLs that differ within each group, so that every advantage moves."""
    kl = torch.tensor([0.5 * (i % 4) for i in range(len(REWARDS))], dtype=torch.float64)
    beta = 0.04
    penalised = [r - beta * k for r, k in zip(REWARDS.tolist(), kl.tolist(), strict=True)]
    got = kl_penalised_advantages(REWARDS, kl, beta, G, "group")
    assert torch.allclose(got, torch.tensor(grpo_by_hand(penalised), dtype=torch.float64))
    assert not torch.allclose(got, torch.tensor(grpo_by_hand(REWARDS.tolist()),
                                                dtype=torch.float64), atol=1e-3)
    # Through the hook: a group whose penalty is the same on every row keeps TRL's advantage.
    import_modules(["grpo_ablate.hook_tricks.kl_in_reward"])
    base = torch.tensor(grpo_by_hand(REWARDS.tolist()), dtype=torch.float32)
    # So does one of identical completions, whose float32 sums differ in their last digits.
    flat = kl.clone()
    flat[:G] = 0.7
    flat[G:2 * G] = 42.0 + torch.arange(G, dtype=torch.float64) * 4e-6
    batch = StepBatch(advantages=base, rewards=REWARDS, group_size=G, step=0, kl_to_ref=flat)
    new = HOOKS["kl_in_reward"].advantages(batch, beta)
    assert torch.equal(new[:2 * G], base[:2 * G])
    assert not torch.allclose(new[2 * G:], base[2 * G:], atol=1e-3)


def test_no_positive_resampling_leaves_out_the_prompts_whose_pass_rate_reached_the_bar():
    """Polaris/ScaleRL: a prompt's pass rate is its group's share of completions at the full
    reward; those at 0.9 or above leave the later epochs."""
    value = {"pass_rate": 0.9, "correct_at": 1.0}
    rates = group_pass_rates(REWARDS.view(-1, G), value)
    by_hand = [sum(r >= 1.0 for r in g) / G for g in groups(REWARDS.tolist())]
    assert rates.tolist() == by_hand
    history = {7: 1.0, 3: 0.9, 5: 0.85, 9: 0.0}
    assert sorted(prompts_solved(history, value)) == [3, 7]


def test_an_epoch_without_its_left_out_prompts_keeps_its_length_and_its_shuffle():
    """The sampler: an epoch that leaves prompts out yields only the others, as many as an
    epoch yields (the Trainer's step arithmetic), each repeated G times in TRL's layout, in
    an order that is a function of the seed, the epoch and the prompts left out alone."""
    from trl.trainer.utils import RepeatSampler

    from grpo_ablate.training.trl_layer.resumable import EpochSeededSampler

    def sampler(left_out=None) -> RepeatSampler:
        s = RepeatSampler(list(range(12)), mini_repeat_count=3, batch_size=4, seed=5)
        s.__class__ = EpochSeededSampler
        s.left_out = left_out
        return s

    plain, filtered = sampler(), sampler(lambda epoch: [0, 4, 7] if epoch >= 1 else [])
    for epoch in (0, 1, 2):
        plain.set_epoch(epoch)
        filtered.set_epoch(epoch)
        got = list(filtered)
        assert len(got) == len(plain) == len(list(plain)) == 36
        assert [got[i:i + 3] for i in range(0, 36, 3)] == [[p] * 3 for p in got[::3]]
        if epoch == 0:
            assert got == list(plain)  # nothing left out: TRL's own order
        else:
            assert not {0, 4, 7} & set(got) and set(got) == set(range(12)) - {0, 4, 7}
        again = sampler(filtered.left_out)
        again.set_epoch(epoch)
        assert list(again) == got  # a fresh sampler (a resumed run) draws the same epoch


def test_every_row_of_the_2026_table_is_a_trick_with_its_paper():
    catalog = {t["id"]: t for t in load_catalog()}
    assert NEW_ARMS <= set(catalog)
    for arm in NEW_ARMS:  # a paper, or a claim that says no paper ablates it
        assert catalog[arm]["catalog"] == "variants"
        assert "arXiv" in catalog[arm]["source"] or "no published" in catalog[arm]["claim"]
    assert catalog["adv_rloo"]["control"] == "near_null"
    assert catalog["reward_scale_pm1"]["against"] == "adv_batch_mean_std"


@pytest.mark.parametrize(("tricks", "why"), [
    (["trick=adv_rloo", "+hooks.maxrl=true"], "both replace the group advantage"),
    (["trick=zero_variance_filter", "hooks.dynamic_sampling={max_rounds: 3}"],
     "dynamic sampling resamples"),
    (["trick=loss_prompt_level", "trainer.loss_type=grpo"], "allowed: trainer.loss_type=dapo"),
    (["trick=adv_batch_mean_std", "hooks.global_adv_norm=true"], "both standardise"),
    (["trick=kl_in_reward", "trainer.beta=0"], "trainer.beta, which must be > 0"),
    (["trick=kl_in_reward", "trainer.beta=0", "hooks.kl_in_reward=0.1"],
     "allowed: trainer.beta > 0"),
    (["trick=kl_in_reward", "+hooks.rloo=true"], "both replace the group advantage"),
])
def test_pairs_that_cannot_combine_are_refused_in_one_line(tricks, why):
    with pytest.raises(UserError, match=why):
        specs_for([*tricks, "seed=0"], multirun=False)


def test_the_estimators_replace_one_another_and_clip_after_them():
    import_modules([f"grpo_ablate.hook_tricks.{m}" for m in
                    ("rloo", "maxrl", "batch_advantage", "adv_clip", "prompt_loss")])
    on = {"rloo": True, "adv_clip": 2.0, "prompt_loss": True}
    cfg = {"hooks": on, "trainer": {"loss_type": "dapo", "num_generations": G}}
    assert check_hooks(cfg) is None
    from grpo_ablate.hook_tricks import hooks_at
    assert [h.name for h, _ in hooks_at("advantages", on)] == ["rloo", "adv_clip", "prompt_loss"]
    batch = StepBatch(advantages=torch.zeros(len(REWARDS)), rewards=REWARDS, group_size=G, step=0,
                      lengths=torch.full((len(REWARDS),), 3))
    for hook, value in hooks_at("advantages", on):
        batch.advantages = hook.advantages(batch, value)
    expected = [min(2.0, max(-2.0, a)) for a in rloo_by_hand(REWARDS.tolist())]
    assert torch.allclose(batch.advantages.double(), torch.tensor(expected, dtype=torch.float64),
                          atol=1e-6)


@pytest.mark.slow
def test_the_2026_hook_arms_on_trls_own_batch(tmp_path, tiny_policy):
    """End to end: TRL samples and scores a batch (planted rewards, 4 groups), computes its
    group advantage, and each arm's hook rewrites it (or drops rows) as its formula says;
    each counts what it changed."""
    from test_training_variants import generate, planted_rewards, trainer_for

    runs = {}
    for name in ("baseline", "adv_rloo", "adv_maxrl", "adv_batch_mean_std", "adv_clip_2",
                 "zero_variance_filter", "loss_prompt_level", "reward_scale_pm1"):
        trainer = trainer_for([f"trick={name}"], tmp_path / name)
        plan = planted_rewards(trainer)
        runs[name] = (trainer, generate(trainer))
    g = runs["baseline"][0].num_generations
    rewards = torch.tensor(plan, dtype=torch.float64)
    base = runs["baseline"][1]["advantages"].double()
    # TRL computes in float32: a group of 0.2s keeps ~1.5e-8 after its mean, which its 1e-4
    # turns into -1.5e-4; the arms' formulas move advantages by 1/(G-1) of ~1 and more.
    close = {"atol": 1e-3, "rtol": 0}
    assert torch.allclose(base, torch.tensor(grpo_by_hand_of(plan, g), dtype=torch.float64),
                          **close)
    assert torch.allclose(runs["adv_rloo"][1]["advantages"].double(), base * g / (g - 1),
                          **close)
    assert torch.allclose(runs["adv_maxrl"][1]["advantages"].double(),
                          maxrl_advantages(rewards, g).nan_to_num(nan=0.0), **close)
    assert torch.allclose(runs["adv_batch_mean_std"][1]["advantages"].double(),
                          batch_advantages(rewards), **close)
    assert torch.allclose(runs["adv_clip_2"][1]["advantages"].double(), base.clamp(-2, 2))
    assert runs["adv_clip_2"][0].activity["adv_clip_changed"] == int((base.abs() > 2).sum()) > 0
    # Zero-variance filtering: the two uniform groups leave the loss and its token count.
    dropped = runs["zero_variance_filter"][1]
    assert dropped["completion_mask"][:2 * g].sum() == 0
    assert dropped["completion_mask"][2 * g:].sum() > 0
    assert dropped["num_items_in_batch"] == dropped["completion_mask"].sum()
    counts = runs["zero_variance_filter"][0].activity
    assert (counts["zero_variance_filter_changed"], counts["zero_variance_filter_units"]) == \
        (2 * g, 4 * g)
    # Prompt-level: DAPO's advantages (the same z-scores) times T / (P T_p) of the batch's
    # own completion lengths.
    prompt = runs["loss_prompt_level"][1]
    lengths = prompt["completion_mask"].sum(1)
    assert torch.allclose(prompt["advantages"].double(),
                          base * prompt_weights(lengths, g), **close)
    # The reward scale under batch advantages: the rewards move, the advantages do not.
    scaled = runs["reward_scale_pm1"]
    assert scaled[0].activity["reward_scale_changed"] == sum(r != 1.0 for r in plan)
    assert torch.allclose(scaled[1]["advantages"].double(), batch_advantages(rewards), atol=1e-3)


def grpo_by_hand_of(values: list[float], g: int) -> list[float]:
    return [(r - statistics.mean(values[i:i + g])) / (statistics.stdev(values[i:i + g]) + 1e-4)
            for i in range(0, len(values), g) for r in values[i:i + g]]


@pytest.mark.slow
def test_kl_in_the_reward_on_trls_own_batch(tmp_path, tiny_policy):
    """End to end: the reference planted away from the policy (its output layer moved by a
    seeded noise), so that each completion has a KL; TRL's batch then carries the group
    advantage of r - beta * sum_t (log pi - log pi_ref), computed here from the two models'
    own logits, and its loss has no KL term (beta is 0 inside it, and back after)."""
    from test_training_variants import generate, planted_rewards, trainer_for

    trainer = trainer_for(["trick=kl_in_reward"], tmp_path)
    plan = planted_rewards(trainer)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        head = trainer.ref_model.get_output_embeddings().weight
        head.add_(torch.randn(head.shape, generator=g) * 0.5)
    out = generate(trainer)

    def logps(model) -> torch.Tensor:
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits.double()
        n = out["completion_ids"].size(1)
        logits = logits[:, -n - 1:-1] / trainer.temperature
        return logits.log_softmax(-1).gather(-1, out["completion_ids"][..., None])[..., 0]

    kl = ((logps(trainer.model) - logps(trainer.ref_model)) * out["completion_mask"]).sum(1)
    assert kl.abs().min() > 1e-3  # the premise: every completion has a KL to plant
    beta, g = trainer.beta, trainer.num_generations
    penalised = [r - beta * k for r, k in zip(plan, kl.tolist(), strict=True)]
    # A group of identical completions (the tiny policy samples some) has one KL up to
    # rounding: its penalty is a constant, and its advantages are the rewards' own.
    alike = kl_alike(kl, g).repeat_interleave(g)
    assert not alike.all()  # the premise: some group's KLs differ
    expected = torch.where(alike, torch.tensor(grpo_by_hand_of(plan, g), dtype=torch.float64),
                           torch.tensor(grpo_by_hand_of(penalised, g), dtype=torch.float64))
    assert torch.allclose(out["advantages"].double(), expected, atol=1e-3, rtol=0)
    assert trainer.activity["kl_in_reward_changed"] > 0
    trainer._metrics["train"].clear()
    trainer._compute_loss(trainer.model, out)
    assert "kl" not in trainer._metrics["train"] and trainer.beta == beta > 0


@pytest.mark.slow
def test_dynamic_samplings_extra_rounds_draw_only_the_prompts_in_play(tmp_path, tiny_policy):
    """No-positive-resampling beside dynamic sampling: with all but two prompts left out of
    the current epoch (planted), every extra round samples those two alone."""
    from test_training_variants import generate, trainer_for

    trainer = trainer_for(["trick=no_positive_resampling", "+hooks.dynamic_sampling={max_rounds:4}",
                           "trick.modules=[grpo_ablate.hook_tricks.no_positive_resampling,"
                           "grpo_ablate.hook_tricks.dynamic_sampling]"], tmp_path)
    size = len(trainer.train_dataset)
    in_play = [1, size - 1]
    trainer.run_state.left_out = {0: [], 1: [i for i in range(size) if i not in in_play]}
    assert trainer.prompts_in_play() == in_play
    sampled = []

    def uniform(prompts, completions, **kwargs):  # every group alike: each round resamples
        sampled.append(prompts)
        return [1.0] * len(completions)

    uniform.__name__ = "uniform"
    trainer.reward_funcs[0] = uniform
    generate(trainer)
    assert len(sampled) == 4  # the premise: three extra rounds were drawn
    allowed = {str(trainer.train_dataset[i]["prompt"]) for i in in_play}
    assert {str(p) for rnd in sampled[1:] for p in rnd} <= allowed
