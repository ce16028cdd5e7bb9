"""The 2025-26 variants reach TRL and change what TRL computes, on the embedded tiny policy:
each loss-side variant on one fixed batch (TRL's own `compute_loss`, the batch generated
once, with planted off-policy log-probs and varied completion lengths so that every
normaliser and clip can differ), the advantage- and mask-side ones on the same completions
(the same sampling seed), and the soft overlong punishment against an independent Eq. 13.
The TRL internals these tests call (`_generate_and_score_completions`,
`current_gradient_accumulation_steps`) are the ones grpo_ablate/training/trl_layer/
already pins."""

from collections import Counter

import pytest
import torch
from planted import planted, planted_groups

from grpo_ablate.hook_tricks.dynamic_sampling import keep_groups
from grpo_ablate.hook_tricks.soft_overlong import SoftOverlongReward, soft_overlong_cache

pytestmark = pytest.mark.slow
OFF_POLICY = ["trainer.num_iterations=2"]


def trainer_for(overrides: list[str], tmp):
    from grpo_ablate.training.probe import probe_trainer

    return probe_trainer(overrides, str(tmp))


def generate(trainer, seed: int = 0) -> dict:
    rows = [trainer.train_dataset[i] for i in range(4) for _ in range(trainer.num_generations)]
    torch.manual_seed(seed)
    return trainer._generate_and_score_completions(rows)


@pytest.fixture(scope="module")
def fixed_batch(tiny_policy, tmp_path_factory):
    """One generated batch with its premise planted, so that no CPU's policy decides it:
    advantages of both signs on every row (+ on even rows, - on odd, 0.5 to 1.5), old
    log-probs moved off the policy's by a seeded e^±3 (the sampler 1 nat above the policy on
    rows 0-1, 1 nat below on rows 2-3: Eq. 9 has a sequence to drop and one to keep), and
    completion lengths that differ (odd rows lose their last token)."""
    base = trainer_for(OFF_POLICY, tmp_path_factory.mktemp("base"))
    batch = generate(base)
    g = torch.Generator().manual_seed(0)
    old = batch["old_per_token_logps"]
    noise = (torch.rand(old.shape, generator=g) - 0.5) * 6.0
    noise[0:2], noise[2:4] = 1.0, -1.0
    batch["old_per_token_logps"] = old + noise
    rows = torch.arange(old.size(0))
    batch["advantages"] = torch.where(rows % 2 == 0, 1.0, -1.0) * (0.5 + 0.25 * (rows % 5))
    mask = batch["completion_mask"].clone()
    mask[1::2, -1] = 0
    batch["completion_mask"] = mask
    batch["num_items_in_batch"] = mask.sum()
    return base, batch


@pytest.mark.parametrize("variant", [
    ["trick=loss_dr_grpo", *OFF_POLICY], ["trick=loss_dapo", *OFF_POLICY],
    ["trick=loss_bnpo", *OFF_POLICY], ["trick=loss_cispo", *OFF_POLICY],
    ["trick=entropy_tokens_0.2", *OFF_POLICY], ["trick=ratio_clip_high_0.28"],
    ["trick=ratio_clip_delta_4"], ["trick=importance_sampling_sequence"],
    ["trick=loss_sapo"], ["trick=loss_vespo"], ["trick=loss_luspo", *OFF_POLICY],
    ["trick=off_policy_mask_0.5"],
])
def test_a_loss_variant_changes_trls_loss_on_a_fixed_batch(variant, fixed_batch, tmp_path):
    base, batch = fixed_batch
    trainer = trainer_for(variant, tmp_path)
    with torch.no_grad():
        reference = base.compute_loss(base.model, dict(batch)).item()
        got = trainer.compute_loss(trainer.model, dict(batch)).item()
        again = trainer.compute_loss(trainer.model, dict(batch)).item()
    assert got == again  # TRL's computation, deterministic on the batch
    assert got != reference, variant


def policy_logps(model, batch, temperature: float) -> torch.Tensor:
    """The policy's per-token log-probabilities of the batch's completions, computed here."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].size(1)
    logits = model(input_ids=ids, attention_mask=attention).logits[:, -width - 1:-1] / temperature
    return logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def test_the_off_policy_mask_drops_what_eq_9_drops_and_nothing_on_policy(fixed_batch, tmp_path):
    """DeepSeek-V3.2's Eq. 9, computed here from the batch: a sequence is dropped when its
    advantage is negative and its mean per-token log-ratio of the sampler to the policy passes
    0.5. The arm's counters say how many TRL's loss dropped: the same ones; on-policy, none."""
    _, batch = fixed_batch
    trainer = trainer_for(["trick=off_policy_mask_0.5"], tmp_path)
    with torch.no_grad():
        logp = policy_logps(trainer.model, batch, trainer.args.temperature)
        trainer.compute_loss(trainer.model, dict(batch))
    mask = batch["completion_mask"]
    kl = ((batch["old_per_token_logps"] - logp) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    dropped = int(((batch["advantages"] < 0) & (kl > 0.5)).sum())
    assert 0 < dropped < mask.size(0)  # the planted batch has some of each
    assert (trainer.activity["off_policy_masked"], trainer.activity["off_policy_sequences"]) \
        == (dropped, mask.size(0))
    on_policy = {k: v for k, v in batch.items() if k != "old_per_token_logps"}
    with torch.no_grad():
        trainer.compute_loss(trainer.model, on_policy)
    assert trainer.activity["off_policy_masked"] == dropped  # nothing more
    assert trainer.activity["off_policy_sequences"] == 2 * mask.size(0)


def test_vespo_reweights_off_policy_sequences_and_none_on_policy(fixed_batch, tmp_path):
    _, batch = fixed_batch
    trainer = trainer_for(["trick=loss_vespo"], tmp_path)
    on_policy = {k: v for k, v in batch.items() if k != "old_per_token_logps"}
    with torch.no_grad():
        trainer.compute_loss(trainer.model, on_policy)
        assert (trainer.activity["vespo_reweighted"], trainer.activity["vespo_sequences"]) \
            == (0, len(batch["advantages"]))
        trainer.compute_loss(trainer.model, dict(batch))
    assert trainer.activity["vespo_reweighted"] > 0


def test_adaptive_entropy_applies_its_bonus_from_the_step_after_entropy_meets_its_target(
        fixed_batch, tmp_path):
    """Skywork-OR1's controller through TRL's loss: the coefficient starts at 0 (the first
    step's loss is the baseline's); entropy at or below the target raises it by 0.005, and
    the next step's loss carries the bonus. A target the entropy never meets leaves it off."""
    base, batch = fixed_batch
    with torch.no_grad():
        reference = base.compute_loss(base.model, dict(batch)).item()
        for target, acts in ((100.0, True), (1e-6, False)):
            trainer = trainer_for([*OFF_POLICY, "trick=entropy_adaptive",
                                   f"trainer.entropy_target={target}"], tmp_path / str(target))
            first = trainer.compute_loss(trainer.model, dict(batch)).item()
            raised = trainer.entropy_coef
            second = trainer.compute_loss(trainer.model, dict(batch)).item()
            assert first == reference
            assert raised == (0.005 if acts else 0.0)
            assert (second != reference) is acts


def test_the_fp32_lm_head_acts_on_a_bf16_policy_and_says_it_did_not_on_a_fp32_one(
        fixed_batch, tmp_path):
    """ScaleRL's fp32 head: on the tiny policy loaded in bf16, TRL's loss on the batch moves
    and the arm counts as acting; on the fp32 policy the logits are fp32 already, the loss is
    the baseline's to the bit, and its activity is 0."""
    base, batch = fixed_batch
    bf16 = "trainer.model_init_kwargs={dtype:bfloat16}"
    plain = trainer_for([*OFF_POLICY, bf16], tmp_path / "bf16")
    head = trainer_for([*OFF_POLICY, bf16, "trick=lm_head_fp32"], tmp_path / "bf16-head")
    fp32_head = trainer_for([*OFF_POLICY, "trick=lm_head_fp32"], tmp_path / "fp32-head")
    assert next(plain.model.parameters()).dtype == torch.bfloat16
    assert head.model.lm_head.weight.dtype == torch.float32
    with torch.no_grad():
        low = plain.compute_loss(plain.model, dict(batch)).item()
        cast = head.compute_loss(head.model, dict(batch)).item()
        assert fp32_head.compute_loss(fp32_head.model, dict(batch)).item() == \
            base.compute_loss(base.model, dict(batch)).item()
    assert cast != low
    assert head.activity["lm_head_below_fp32"] == 1 and fp32_head.activity["lm_head_below_fp32"] == 0


def gradient(trainer, batch) -> torch.Tensor:
    """TRL's own loss on the batch, backpropagated: every parameter's gradient, flattened."""
    trainer.model.zero_grad()
    trainer.compute_loss(trainer.model, dict(batch)).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


def kl_gradient(model, batch, beta: float, temperature: float, estimator: str = "k3"
                ) -> torch.Tensor:
    """The review's (and DeepSeekMath's) KL term, computed here without TRL: beta times the
    per-token k3 estimate exp(ref - logp) - (ref - logp) - 1 (or Schulman's k2,
    (logp - ref)^2 / 2, the estimator it must be told apart from), averaged over each
    completion's tokens, then over completions (loss_type grpo); its gradient, flattened."""
    logp = policy_logps(model, batch, temperature)
    ref, mask = batch["ref_per_token_logps"], batch["completion_mask"]
    kl = torch.exp(ref - logp) - (ref - logp) - 1 if estimator == "k3" else (logp - ref) ** 2 / 2
    term = beta * ((kl * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    model.zero_grad()
    term.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_the_baselines_kl_gradient_is_the_reviews_k3_and_the_corrected_arms_is_not(
        fixed_batch, tmp_path):
    """On one off-policy batch, through TRL's own compute_loss, with advantages zeroed so that
    the loss is the KL term alone: the baseline's gradient equals the k3 term's gradient
    computed independently; the kl_bias_corrected arm's does not (the ratio multiplies it)."""
    base, batch = fixed_batch
    beta = base.args.beta
    assert beta > 0 and base.args.use_bias_correction_kl is False
    # The policy is still the reference here, where the k3 KL's gradient is zero: plant a
    # reference the policy has moved away from (log-probs moved by up to e^±1).
    g = torch.Generator().manual_seed(1)
    ref = batch["ref_per_token_logps"]
    batch = {**batch, "ref_per_token_logps": ref + (torch.rand(ref.shape, generator=g) - 0.5) * 2,
             "advantages": torch.zeros_like(batch["advantages"])}
    no_kl = trainer_for([*OFF_POLICY, "trainer.beta=0"], tmp_path / "no_kl")
    corrected = trainer_for([*OFF_POLICY, "trick=kl_bias_corrected"], tmp_path / "corrected")
    assert corrected.args.use_bias_correction_kl is True
    for other in (no_kl, corrected):  # one set of weights for every gradient
        other.model.load_state_dict(base.model.state_dict())
    assert gradient(no_kl, batch).abs().max() == 0  # zero advantages, no KL: nothing left
    independent = kl_gradient(base.model, batch, beta, base.args.temperature)
    scale = independent.abs().max()
    assert scale > 0
    # float32: TRL's forward and backward and this test's round differently (its log-probs
    # differ from these by up to 6e-7; the gradients by up to 1.2e-5 of the scale, measured
    # with a policy built under AVX2-only kernels, under those kernels and the default ones).
    # The tolerance sits 8x above that and 100x below the nearest estimator the test must
    # tell apart (k2, below).
    assert (gradient(base, batch) - independent).abs().max() <= 1e-4 * scale
    k2 = kl_gradient(base.model, batch, beta, base.args.temperature, "k2")
    assert (k2 - independent).abs().max() > 1e-2 * scale
    assert (gradient(corrected, batch) - independent).abs().max() > 0.1 * scale


@pytest.mark.parametrize("variant", ["trick=scale_rewards_none", "trick=scale_rewards_batch"])
def test_reward_scaling_changes_trls_advantages_on_the_same_completions(variant, tiny_policy,
                                                                        tmp_path):
    base = generate(trainer_for([], tmp_path / "a"))
    other = generate(trainer_for([variant], tmp_path / "b"))
    assert torch.equal(base["completion_ids"], other["completion_ids"])
    assert not torch.allclose(base["advantages"], other["advantages"])


def test_overlong_filtering_masks_trls_truncated_completions(tiny_policy, tmp_path):
    short = ["trainer.max_completion_length=2"]  # "38" + eos does not fit: truncated
    base = generate(trainer_for(short, tmp_path / "a"))
    masked = generate(trainer_for([*short, "trick=overlong_mask"], tmp_path / "b"))
    assert torch.equal(base["completion_ids"], masked["completion_ids"])
    truncated = base["completion_mask"].sum(1) == 2
    assert truncated.any()
    assert (masked["completion_mask"][truncated] == 0).all()
    assert torch.equal(masked["completion_mask"][~truncated], base["completion_mask"][~truncated])


def test_2_grpo_reaches_trl_as_groups_of_two(tiny_policy, tmp_path):
    trainer = trainer_for(["trick=group_size_2"], tmp_path)
    assert trainer.num_generations == 2 and trainer.args.num_generations == 2
    batch = generate(trainer)
    assert batch["advantages"].view(-1, 2).sum(1).abs().max() < 1e-5  # centred per pair


def test_soft_overlong_is_trls_eq_13_weighted_as_a_second_reward(tiny_policy, tmp_path):
    counts: Counter = Counter()
    reward = SoftOverlongReward(max_completion_length=10, cache_fraction=0.3, counts=counts)
    lengths = [3, 7, 8, 9, 10, 12]
    got = reward([[1] * n for n in lengths])
    cache = soft_overlong_cache(10, 0.3)
    expected = [0.0 if n <= 10 - cache else ((10 - cache) - n) / cache if n <= 10 else -1.0
                for n in lengths]
    assert cache == 3 and got == pytest.approx(expected)
    assert counts == {"overlong_samples": 6, "overlong_punished": 4}
    trainer = trainer_for(["trick=overlong_soft", "hooks.soft_overlong.weight=0.5"], tmp_path)
    assert [f.__name__ for f in trainer.reward_funcs][1] == "soft_overlong"
    assert trainer.reward_weights.tolist() == [1.0, 0.5]


def test_an_arm_is_compared_with_the_arm_its_trick_names(tmp_path):
    """Planted: reuse is 0.3 below the baseline, clip_higher 0.1 above reuse (and so 0.2 below
    the baseline): against reuse_2x_clip its difference is +0.1."""
    from grpo_ablate import cli

    rows = ["arm,seed,against,eval/accuracy"]
    for seed in range(6):
        noise = 0.01 * ((seed * 7) % 5 - 2)
        rows += [f"baseline,{seed},,{0.6 + noise:.4f}",
                 f"reuse_2x_clip,{seed},,{0.3 + noise + 0.001 * seed:.4f}",
                 f"clip_higher_0.28,{seed},reuse_2x_clip,{0.4 + noise + 0.001 * seed:.4f}"]
    csv = tmp_path / "variants.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert cli.main(["report", str(csv), "--out", str(tmp_path / "r"), "--no-figures"]) == 0
    import json

    report = json.loads((tmp_path / "r" / "report.json").read_text())
    arms = {a["arm"]: a for a in report["strata"][0]["arms"]}
    assert arms["clip_higher_0.28"]["against"] == "reuse_2x_clip"
    assert arms["clip_higher_0.28"]["diff"] == pytest.approx(0.1, abs=1e-9)
    assert arms["reuse_2x_clip"]["against"] == "baseline"
    assert arms["reuse_2x_clip"]["diff"] == pytest.approx(-0.3 + 0.0025, abs=1e-9)
    md = (tmp_path / "r" / "report.md").read_text()
    assert "clip_higher_0.28 (vs reuse_2x_clip)" in md


def test_an_adaptive_sweep_refuses_arms_compared_with_another_arm(tmp_path, capsys):
    from grpo_ablate import cli

    assert cli.main(["sweep", "sweep=variants", "adaptive=true", f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trick.against" in err[0]


def test_sweep_variants_on_the_tiny_policy_every_arm_acts(tiny_policy, tmp_path):
    """One seed of every arm. The tiny policy's updates are small and its answers short, so the
    sweep raises the learning rate (every arm alike: the ratio then leaves the clip range
    under reuse) and cuts completions at 2 tokens (two-digit answers are truncated), where
    each variant has something to act on. At that rate GSPO's KL reaches 40-60 in 6 steps,
    by CPU (43.9 on one AMD EPYC, over 50 on a Xeon): divergence is not what this test is
    about, so the guard's KL abort is out of reach (a non-finite loss would still stop a run).
    Two settings that are inert for every other arm put the rest within 6 steps: the
    reference reset every 2 steps (ref_reset_200's own N is 200), and an entropy target the
    tiny policy's entropy is below (entropy_adaptive's 0.2 suits a pretrained model). The fp32
    LM head acts only on a policy below fp32, which a CPU run never is (bf16 is refused here):
    it completes and says it did not act; its acting is tested on a bf16 policy above. The
    rewards are planted (tests/planted.py: uniform groups for dynamic sampling to replace,
    varied ones with positive advantages for W-REINFORCE and Pass@k), so what the arms act on
    is not what the tiny policy, trained on this machine, happens to answer."""
    import json

    from grpo_ablate import cli

    assert cli.main(["sweep", "sweep=variants", "seed=0", f"out_root={tmp_path}",
                     "trainer.learning_rate=2e-3", "trainer.max_completion_length=2",
                     "trainer.max_steps=6", "eval.every_steps=0", "eval.sampled_k=1",
                     "guard.kl_abort=1e12", "run_cache=null", "trainer.ref_model_sync_steps=2",
                     "trainer.entropy_target=100", planted(planted_groups(16))]) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "variants").glob("runs/*/record.json")]
    acted = {r["arm"]: r["activity"].get("acted") for r in records}
    assert [(r["arm"], r["status"], r["error"]) for r in records if r["status"] != "completed"] == []
    # Every arm the sweep file names (the trick files' catalog and their against arms):
    # derived, so a new trick is checked here without editing this test.
    from grpo_ablate.config import expand_jobs

    swept = {o.split("=", 1)[1] for job in expand_jobs(["sweep=variants", "seed=0"])
             for o in job if o.startswith("trick=")}
    assert set(acted) == swept and len(swept) > 40
    # Two arms have nothing to act on here, and their measures say so: a fp32 policy's
    # logits are fp32 already; LUSPO's length weight is a constant where every completion
    # has the 2 tokens the limit cuts them to (its acting: the fixed batch's varied lengths).
    by_arm = {r["arm"]: r for r in records}
    assert acted.pop("lm_head_fp32") == 0.0
    assert by_arm["lm_head_fp32"]["activity"]["measure"].startswith("runs whose policy computes")
    luspo = acted.pop("loss_luspo")
    history = (tmp_path / "variants" / "runs" / by_arm["loss_luspo"]["run_id"] / "history.jsonl")
    rows = [json.loads(line) for line in history.read_text().splitlines()]
    unequal = [r["completions/max_length"] > r["completions/min_length"] for r in rows
               if "loss" in r and "completions/max_length" in r]  # each generation's step
    assert luspo == sum(unequal) / len(unequal)
    # Clip-Cov acts where a token's covariance term, which the policy's log-probs decide,
    # falls in (1, 5): here it completes and says what it measures; its acting is tested on
    # a batch built for it above.
    assert 0 <= acted.pop("clip_cov") <= 1
    assert by_arm["clip_cov"]["activity"]["measure"].endswith("whose advantage clip_cov changed")
    # The prompt-level loss acts where a step's groups hold different token counts, which at
    # 1-2 tokens the policy's answers decide: its acting is on planted lengths
    # (tests/test_hook_tricks_catalog_2026.py); here it completes and says what it measures.
    assert 0 <= acted.pop("loss_prompt_level") <= 1
    assert by_arm["loss_prompt_level"]["activity"]["measure"].endswith(
        "whose advantage prompt_loss changed")
    # The KL in the reward moves a group's advantages where its completions' KLs to the
    # reference differ, which the policy decides (its acting: a planted reference,
    # tests/test_hook_tricks_catalog_2026.py). No-positive-resampling acts from the second epoch, which 6
    # steps of this task's prompts do not reach (its acting and resume: planted rewards on
    # 12 prompts, tests/test_hook_tricks_catalog_2026.py and tests/test_training_resume.py).
    assert 0 <= acted.pop("kl_in_reward") <= 1
    # DPPO's trust region masks a token whose probability the first update of a reused
    # batch moved past 0.2, which the policy's own log-probs decide (its acting: the fixed
    # off-policy batch, tests/test_hook_tricks_loss_terms.py).
    assert 0 <= acted.pop("dppo_tv") <= 1
    assert by_arm["dppo_tv"]["activity"]["measure"].endswith("whose advantage dppo_tv changed")
    assert acted.pop("no_positive_resampling") == 0.0
    assert by_arm["no_positive_resampling"]["activity"]["measure"].startswith("training prompts")
    assert {a: v for a, v in acted.items() if a != "baseline" and not (v or 0) > 0} == {}
    against = {a: r["config"]["trick"].get("against", "baseline") for a, r in by_arm.items()}
    assert (against["loss_sapo"], against["loss_vespo"], against["off_policy_mask_0.5"],
            against["loss_luspo"], against["ref_reset_200"], against["dppo_tv"],
            against["behaviour_kl"], against["positive_nll"], against["loss_cispo"]) == \
        ("reuse_2x", "reuse_2x_dapo", "reuse_2x", "importance_sampling_sequence", "baseline",
         "reuse_2x", "reuse_2x", "baseline", "reuse_2x_dapo")
    cost = {r["arm"]: r["cost"]["completions"] for r in records}
    assert cost["dynamic_sampling_on"] > cost["baseline"]  # its extra rounds are in the budget


def test_dynamic_sampling_keeps_the_groups_an_independent_selection_keeps():
    """Planted rewards, groups of 4, 3 groups needed; round by round, a group is valid when
    its rewards are not all equal."""
    def independent(rounds, group, needed):
        rows = [(r, g, len(set(vals[g * group:(g + 1) * group])) > 1)
                for r, vals in enumerate(rounds) for g in range(len(vals) // group)]
        ok = [(r, g) for r, g, v in rows if v]
        if len(ok) >= needed:
            return ok[:needed], False
        bad = [(r, g) for r, g, v in rows if not v][:needed - len(ok)]
        return sorted(ok + bad), True

    cases = [
        [[1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0], [1, 0, 1, 0, 2, 2, 2, 2, 0, 0, 1, 1]],  # enough
        [[1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1]],                                        # one round
        [[1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1]],  # the cap
        [[1.0, 1.0, 1.0, 1.0] * 3],                                                    # none valid
    ]
    for rounds in cases:
        got = keep_groups([torch.tensor(r, dtype=torch.float32) for r in rounds], 4, 3)
        assert got == independent(rounds, 4, 3), rounds
    assert keep_groups([torch.tensor(cases[2][0], dtype=torch.float32),
                        torch.tensor(cases[2][1], dtype=torch.float32)], 4, 3)[1] is True


def test_dynamic_sampling_merges_trls_rounds_row_for_row():
    from grpo_ablate.training.trl_layer import merge_groups

    def round_out(width, prompt_width, value):
        rows = 4
        return {"prompt_ids": torch.full((rows, prompt_width), value),
                "prompt_mask": torch.ones(rows, prompt_width, dtype=torch.long),
                "completion_ids": torch.arange(rows * width).view(rows, width) + value * 100,
                "completion_mask": torch.ones(rows, width, dtype=torch.long),
                "advantages": torch.arange(rows, dtype=torch.float32) + value,
                "num_items_in_batch": torch.tensor(rows * width), "mode": "train"}

    a, b = round_out(3, 2, 1), round_out(5, 4, 2)
    merged = merge_groups([a, b], kept=[(1, 0), (0, 1)], group=2, pad_token_id=-1)
    assert torch.equal(merged["completion_ids"][:2], b["completion_ids"][:2])
    assert torch.equal(merged["completion_ids"][2:, :3], a["completion_ids"][2:])
    assert (merged["completion_ids"][2:, 3:] == -1).all()  # completions padded on the right
    assert (merged["completion_mask"][2:, 3:] == 0).all()
    assert (merged["prompt_ids"][2:, :2] == -1).all() and (merged["prompt_mask"][2:, :2] == 0).all()
    assert torch.equal(merged["advantages"], torch.tensor([2.0, 3.0, 3.0, 4.0]))
    assert merged["num_items_in_batch"] == 2 * 5 + 2 * 3 and merged["mode"] == "train"


def independent_gradient(trainer, batch, policy_loss) -> torch.Tensor:
    """`policy_loss(old, logp, advantages [rows, tokens], mask)` on the policy's own
    log-probs, computed here, at TRL's dapo normaliser (the token count of the generation
    batch, split over its steps_per_generation optimizer steps); its gradient, flattened."""
    model, mask = trainer.model, batch["completion_mask"]
    logp = policy_logps(model, batch, trainer.args.temperature)
    adv = batch["advantages"].unsqueeze(1).expand_as(logp)
    loss = policy_loss(batch["old_per_token_logps"], logp, adv, mask.float()) \
        * trainer.args.steps_per_generation
    model.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


LOSS_POINT = ["trainer.beta=0", "trainer.loss_type=dapo"]  # verl's token-mean, no KL term


def clip_cov_premise(trainer, batch, lb: float, ub: float) -> dict:
    """The batch with Clip-Cov's premise built on this machine's policy: every row's first
    token on-policy (ratio 1: the standard clip leaves it alone whatever its advantage's
    sign), and the advantages scaled so that the largest covariance term among those tokens,
    (A - mean A)(log p - mean log p) over the counted tokens, lies midway in (lb, ub)."""
    with torch.no_grad():
        logp = policy_logps(trainer.model, batch, trainer.args.temperature)
    mask = batch["completion_mask"].float()
    old = batch["old_per_token_logps"].clone()
    old[:, 0] = logp[:, 0]
    adv = batch["advantages"].unsqueeze(1).expand_as(logp)
    mean = lambda x: (x * mask).sum() / mask.sum()  # noqa: E731
    term = (adv - mean(adv)) * (logp - mean(logp))
    largest = term[:, 0][mask[:, 0] > 0].max()
    assert largest > 0, "premise: some on-policy token with a positive covariance term"
    scale = (lb + ub) / 2 / largest
    return {**batch, "old_per_token_logps": old, "advantages": batch["advantages"] * scale}


def test_clip_cov_through_trls_loss_is_verls_clip_cov(fixed_batch, tmp_path):
    """The loss point end to end: TRL's compute_loss on the fixed off-policy batch with
    Clip-Cov on (every candidate token drawn: ratio 1) has the gradient of verl's Clip-Cov
    loss computed here, and counts the tokens it dropped."""
    from test_hook_tricks_points import verl_clip_cov_loss

    _, fixed = fixed_batch
    trainer = trainer_for([*OFF_POLICY, *LOSS_POINT, "trick=clip_cov", "hooks.clip_cov.ratio=1.0"],
                          tmp_path)
    batch = clip_cov_premise(trainer, fixed, 1.0, 5.0)
    dropped = []

    def verl(old, logp, adv, mask):
        loss, n = verl_clip_cov_loss(old, logp, adv, mask, 1.0, 1.0, 5.0, 0.2, torch.Generator())
        dropped.append(n)
        return loss

    expected = independent_gradient(trainer, batch, verl)
    got = gradient(trainer, batch)
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-6)
    assert dropped[0] > 0
    assert (trainer.activity["clip_cov_changed"], trainer.activity["clip_cov_units"]) \
        == (dropped[0], int(batch["completion_mask"].sum()))
    plain = trainer_for([*OFF_POLICY, *LOSS_POINT], tmp_path / "plain")
    assert not torch.allclose(gradient(plain, batch), expected, rtol=1e-4, atol=1e-6)


def test_kl_cov_through_trls_loss_is_verls_kl_cov(fixed_batch, tmp_path):
    from test_hook_tricks_points import verl_kl_cov_loss

    _, batch = fixed_batch
    trainer = trainer_for([*LOSS_POINT, "trick=kl_cov", "hooks.kl_cov.ratio=0.1"], tmp_path)
    assert trainer.args.num_iterations == 2 and trainer.epsilon_high == 1e6
    expected = independent_gradient(
        trainer, batch, lambda old, logp, adv, mask: verl_kl_cov_loss(old, logp, adv, mask, 0.1, 0.1))
    assert torch.allclose(gradient(trainer, batch), expected, rtol=1e-4, atol=1e-6)
    penalised = max(1, int(int(batch["completion_mask"].sum()) * 0.1))
    assert trainer.activity["kl_cov_changed"] == penalised  # off-policy: every one moved
    unpenalised = trainer_for([*LOSS_POINT, "trick=reuse_2x_ratio_clip_off"], tmp_path / "off")
    assert not torch.allclose(gradient(unpenalised, batch), expected, rtol=1e-4, atol=1e-6)


def planted_rewards(trainer) -> list[float]:
    """The task's reward function replaced by planted rewards for 4 groups of G (on the
    trainer's first 4 prompts): tests/planted.py's `planted_groups`."""
    plan = planted_groups(trainer.num_generations)

    def reward(prompts, completions, **kwargs):
        return plan[:len(completions)]

    reward.__name__ = "planted"
    trainer.reward_funcs[0] = reward
    return plan


def test_the_advantage_point_variants_on_trls_own_batch(tmp_path, tiny_policy):
    """The advantages point end to end: TRL samples and scores a batch (planted rewards) and
    computes its group advantages; W-REINFORCE replaces them by +0.1 (right) and -1 (wrong),
    and Pass@4 by the enumerated pass@4 advantage, and each counts what it changed."""
    from test_hook_tricks_points import enumerated_passk

    runs = {}
    for name, overrides in {"base": [], "positive": ["trick=adv_positive_0.1"],
                            "passk": ["trick=adv_passk_4"]}.items():
        trainer = trainer_for(overrides, tmp_path / name)
        plan = planted_rewards(trainer)
        runs[name] = (trainer, generate(trainer)["advantages"])
    base = runs["base"][1]
    assert (base > 0).any() and (base < 0).any()
    right = torch.tensor([r >= 1.0 for r in plan])
    assert torch.equal(runs["positive"][1], torch.where(right, 0.1, -1.0))
    g = runs["passk"][0].num_generations
    right = [r >= 1.0 for r in plan]
    expected = [a for s in range(0, len(plan), g) for a in enumerated_passk(right[s:s + g], 4)]
    assert torch.allclose(runs["passk"][1], torch.tensor(expected), atol=1e-5)
    positive = runs["positive"][0].activity
    assert (positive["adv_positive_changed"], positive["adv_positive_units"]) \
        == (int((runs["positive"][1] != base).sum()), len(plan))
    assert runs["passk"][0].activity["adv_passk_changed"] > 0
