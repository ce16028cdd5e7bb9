"""Each non-native trick changes the computation the way the review describes."""

import torch

from grpo_ablate.tricks import (
    WeightEMA,
    apply_global_adv_norm,
    apply_length_penalty,
    apply_reward_clip,
    filter_active,
    low_reward_keep_mask,
    shape_rewards,
)


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
