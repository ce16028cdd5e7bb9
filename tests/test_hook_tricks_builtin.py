"""Each non-native trick changes the computation the way the review describes."""

import pytest
import torch

from grpo_ablate.hook_tricks import HOOKS, RewardBatch, hooks_at, in_reward_units, reward_values
from grpo_ablate.hook_tricks.ema import WeightEMA
from grpo_ablate.hook_tricks.filter_low_reward import filter_active, low_reward_keep_mask
from grpo_ablate.hook_tricks.global_adv_norm import apply_global_adv_norm
from grpo_ablate.hook_tricks.length_penalty import apply_length_penalty
from grpo_ablate.hook_tricks.reward_clip import apply_reward_clip


def shape_rewards(rewards, lengths, clip, coef, max_length, group_size=1):
    """The rewards point as the trainer runs it: the hooks that are on, in their order."""
    batch = RewardBatch(rewards, lengths, group_size, max_length)
    for hook, value in hooks_at("shape_rewards", {"length_penalty": coef, "reward_clip": clip}):
        batch.rewards, _ = hook.shape_rewards(batch, value)
    return batch.rewards


def test_reward_clip_bounds_rewards_and_leaves_inner_values():
    r = torch.tensor([-1.0, -0.2, 0.3, 1.0, 5.0])
    out = apply_reward_clip(r, -0.5, 1.0)
    assert torch.equal(out, torch.tensor([-0.5, -0.2, 0.3, 1.0, 1.0]))


def test_length_penalty_charges_longer_completions_more():
    r = torch.tensor([1.0, 1.0, 0.0])
    out = apply_length_penalty(r, torch.tensor([2, 4, 4]), coef=0.2, max_length=4)
    assert torch.allclose(out, torch.tensor([0.9, 0.8, -0.2]))


def test_shape_rewards_clips_then_penalises():
    r = torch.tensor([-1.0, 1.0])
    out = shape_rewards(r, torch.tensor([4, 2]), {"low": -0.5, "high": 1.0}, 0.2, 4)
    assert torch.allclose(out, torch.tensor([-0.7, 0.9]))
    assert torch.equal(shape_rewards(r, torch.tensor([4, 2]), None, 0.0, 4), r)
    # TRL's (completions x reward functions) matrix: every column clipped, penalty once.
    cols = torch.tensor([[-1.0, 2.0], [1.0, -3.0]])
    out = shape_rewards(cols, torch.tensor([4, 2]), {"low": -0.5, "high": 1.0}, 0.2, 4)
    assert torch.allclose(out, torch.tensor([[-0.7, 1.0], [0.9, -0.5]]))
    assert cols[0, 0] == -1.0  # the input is not modified


def test_the_length_penalty_acts_on_the_groups_whose_lengths_differ():
    batch = RewardBatch(torch.zeros(6), torch.tensor([3, 3, 3, 1, 2, 3]), 3, 4)
    _, changed = HOOKS["length_penalty"].shape_rewards(batch, 0.5)
    assert changed.tolist() == [False, False, False, True, True, True]


def test_global_adv_norm_standardises_over_batch():
    adv = torch.tensor([3.0, 1.0, -1.0, 5.0])
    out = apply_global_adv_norm(adv)
    assert abs(out.mean().item()) < 1e-6
    assert abs(out.std().item() - 1.0) < 1e-3


def test_filter_window_is_a_fraction_of_training():
    assert filter_active(0, 100, 0.0, 0.2)
    assert filter_active(19, 100, 0.0, 0.2)
    assert not filter_active(20, 100, 0.0, 0.2)
    assert not filter_active(99, 100, 0.0, 0.2)
    assert filter_active(99, 100, 0.0, 1.0)


def test_filter_keeps_exactly_samples_at_or_over_threshold():
    r = torch.tensor([0.1, 0.25, 0.3, -1.0, 1.0])
    assert low_reward_keep_mask(r, 0.25).tolist() == [0, 1, 1, 0, 1]


def test_ema_tracks_and_swaps_back():
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema = WeightEMA(model, decay=0.5)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(model)  # 0.5 * 0 + 0.5 * 1
    with ema.swapped_in(model):
        assert torch.allclose(model.weight, torch.full((1, 2), 0.5))
    assert torch.allclose(model.weight, torch.ones(1, 2))


def test_quantile_set_reward_tricks_become_reward_units_of_the_sft_rewards():
    rewards = [float(x) for x in range(-50, 51)]  # a reward model's scores: -50 .. 50
    hooks = {"reward_clip": {"low": 0.05, "high": 0.95}, "length_penalty": 0.2,
             "filter_low_reward": {"threshold": 0.25, "start": 0.0, "end": 0.2},
             "global_adv_norm": False}
    got = in_reward_units(hooks, rewards)
    assert got["reward_clip"] == {"low": pytest.approx(-45.0), "high": pytest.approx(45.0)}
    assert got["filter_low_reward"] == {"threshold": pytest.approx(-25.0), "start": 0.0, "end": 0.2}
    assert got["length_penalty"] == pytest.approx(0.2 * 90.0)  # of the 5-95% spread
    assert got["global_adv_norm"] is False and hooks["reward_clip"]["low"] == 0.05  # a copy
    assert reward_values(got) == {"reward_clip_low": pytest.approx(-45.0),
                                   "reward_clip_high": pytest.approx(45.0),
                                   "length_penalty": pytest.approx(18.0),
                                   "filter_threshold": pytest.approx(-25.0)}
    assert reward_values({"reward_clip": None, "length_penalty": 0.0}) == {}
    assert reward_values(got, ["reward_clip"]) == {"reward_clip_low": pytest.approx(-45.0),
                                                   "reward_clip_high": pytest.approx(45.0)}


def test_reward_tricks_take_each_tasks_reward_units():
    from grpo_ablate.config import run_id, specs_for

    def hooks(*overrides):
        (spec,) = specs_for(list(overrides), multirun=False)
        return spec.config["hooks"], spec

    assert hooks("task=math", "trick=reward_clamp_task")[0]["reward_clip"] == {"low": -0.5, "high": 1.0}
    assert hooks("task=chat", "trick=reward_clamp_task")[0]["reward_clip"] == {"low": 0.05, "high": 0.95}
    assert hooks("task=code", "trick=length_penalty_task",
                 "task.shaping.length_penalty=0.5")[0]["length_penalty"] == 0.5
    assert hooks("trick=filter_low_reward_early",
                 "task.shaping.filter_threshold=0.5")[0]["filter_low_reward"]["threshold"] == 0.5
    # In reward units the values reach the run's identity through hooks only.
    _, spec = hooks("trick=reward_clamp_task")
    bare = {**spec.config, "task": {k: v for k, v in spec.config["task"].items() if k != "shaping"}}
    assert run_id(bare) == spec.run_id
    _, other = hooks("trick=reward_clamp_task", "task.shaping.clip.high=2.0")
    assert other.run_id != spec.run_id


def test_a_quantile_outside_0_1_is_one_clear_error():
    from grpo_ablate.config import specs_for
    from grpo_ablate.errors import UserError

    with pytest.raises(UserError, match=r"hooks.reward_clip.high=1.5: task.shaping.scale=sft_quantiles"):
        specs_for(["task=chat", "trick=reward_clamp_task", "task.shaping.clip.high=1.5"], multirun=False)


def variant_activity(trick: str, rows: list[dict], counts: dict | None = None,
                     **trainer) -> dict:
    """The record's activity for `trick`'s config (with `trainer` overrides) and a history."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.training.outcome import trick_activity

    cfg = specs_for([f"trick={trick}", *(f"trainer.{k}={v}" for k, v in trainer.items())],
                    multirun=False)[0].config
    return trick_activity(cfg, rows, counts or {})


def test_the_variants_activity_reads_what_their_histories_show_and_can_be_zero():
    """Each measure on a built history: what acted counts, what could not act reads 0."""
    def row(step, **kw):
        return {"step": step, "loss": 0.1, **kw}

    lengths = [row(1, **{"completions/min_length": 3.0, "completions/max_length": 3.0}),
               row(2, **{"completions/min_length": 2.0, "completions/max_length": 3.0})]
    assert variant_activity("loss_luspo", lengths)["acted"] == 0.5
    assert variant_activity("loss_luspo", lengths[:1])["acted"] == 0.0  # equal lengths
    entropy = [row(1, entropy=0.5), row(2, entropy=0.15), row(3, entropy=0.1), row(4, entropy=0.3)]
    assert variant_activity("entropy_adaptive", entropy)["acted"] == 0.5  # target 0.2
    assert variant_activity("entropy_adaptive", entropy, entropy_target=0.05)["acted"] == 0.0
    steps = [row(s) for s in range(1, 9)]
    assert variant_activity("ref_reset_200", steps, ref_model_sync_steps=2)["acted"] == 0.75
    assert variant_activity("ref_reset_200", steps)["acted"] == 0.0  # 8 steps, no reset
    assert variant_activity("loss_sapo", steps)["acted"] == 0.5  # one of two passes reused
    masked = {"off_policy_sequences": 40, "off_policy_masked": 6}
    assert variant_activity("off_policy_mask_0.5", steps, masked)["acted"] == 0.15
    assert variant_activity("off_policy_mask_0.5", steps, {"off_policy_sequences": 40})["acted"] == 0
    head = variant_activity("lm_head_fp32", steps, {"lm_head_processes": 2,
                                                     "lm_head_below_fp32": 0})
    assert head["acted"] == 0.0 and "below fp32" in head["measure"]


def test_a_vllm_correction_acts_on_the_steps_where_vllms_probabilities_differed():
    """(vLLM needs a CUDA machine: the measure alone, on a built history.)"""
    from grpo_ablate.training.outcome import variant_details

    tr = {"loss_type": "grpo", "num_iterations": 1, "use_vllm": True,
          "vllm_importance_sampling_correction": True}
    ratio = "sampling/importance_sampling_ratio"
    rows = [{"step": 1, "loss": 0.1, f"{ratio}/min": 1.0, f"{ratio}/max": 1.0},
            {"step": 2, "loss": 0.1, f"{ratio}/min": 0.7, f"{ratio}/max": 1.0},
            {"step": 3, "loss": 0.1, f"{ratio}/min": 0.9999, f"{ratio}/max": 1.0001}]
    assert variant_details(tr, rows)["importance_corrected_steps"] == 1 / 3
    assert "importance_corrected_steps" not in variant_details({**tr, "use_vllm": False}, rows)
