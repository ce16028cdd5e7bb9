"""Hook tricks together, on TRL's real trainer: the values of a step's rows (rewards, the
filter's keep-mask) travel with those rows, so a trick that samples more rounds (dynamic
sampling) and one that drops rows (low-reward filtering) act on the rows the step trains on."""

import pytest
import torch
from test_variants import trainer_for

from grpo_ablate.hook_tricks.dynamic_sampling import keep_groups

pytestmark = pytest.mark.slow
G = 16
# Two rounds of planted rewards for 4 groups of 16: round 0 has two groups of equal rewards
# (dynamic sampling replaces them), round 1 two varied ones; every varied group has rewards
# under the filter's 0.25, each at other places.
ROUNDS = [
    [1.0] * G + [1.0, 0.1] * (G // 2) + [0.2] * G + [0.1] * 4 + [1.0] * (G - 4),
    [1.0] * (G // 2) + [0.1] * (G // 2) + [0.0] * G + [0.1, 0.1, 1.0, 0.5] * (G // 4) + [1.0] * G,
]


def test_dynamic_sampling_with_the_filter_drops_the_rows_of_the_merged_batch(tmp_path):
    """The filter's mask on the step's batch is the one of the rows dynamic sampling kept,
    from the rounds they were sampled in, checked against an independent selection of the
    kept groups and of their rows under the threshold."""
    trainer = trainer_for(["trick=dynamic_sampling_on", "trainer.max_steps=4",
                           "+hooks.filter_low_reward={threshold:0.25,start:0.0,end:1.0}"], tmp_path)
    calls = []

    def planted(prompts, completions, **kwargs):
        calls.append(len(completions))
        return ROUNDS[len(calls) - 1][:len(completions)]

    planted.__name__ = "planted"
    trainer.reward_funcs[0] = planted
    rows = [trainer.train_dataset[i] for i in range(4) for _ in range(G)]
    torch.manual_seed(0)
    out = trainer._generate_and_score_completions(rows)
    assert calls == [4 * G, 4 * G]  # the premise: a second round was sampled

    kept, capped = keep_groups([torch.tensor(r) for r in ROUNDS], G, 4)
    assert not capped and kept == [(0, 1), (0, 3), (1, 0), (1, 2)]
    merged = torch.tensor([v for r, g in kept for v in ROUNDS[r][g * G:(g + 1) * G]])
    expected = merged >= 0.25
    assert torch.equal(out["kept_rows"].cpu(), expected)
    assert torch.equal(out["completion_mask"].sum(1).cpu() > 0,
                       expected & (out["completion_mask"].sum(1).cpu() > 0))
    assert int(out["completion_mask"][~expected].sum()) == 0
    assert trainer.activity["filter_low_reward_changed"] == int((~expected).sum())
