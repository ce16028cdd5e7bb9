"""The hooks on TRL's real GRPOTrainer: each trick changes what reaches the loss the way
the review describes, and the internals they rely on have not moved."""

import math
import tempfile

import pytest
import torch
import trl
from planted import planted, planted_groups

from grpo_ablate.config import specs_for
from grpo_ablate.tasks import get_task
from grpo_ablate.training.train import build_trainer
from grpo_ablate.training.trl_layer import TESTED_TRL, check_trl_compat

pytestmark = pytest.mark.slow


def test_trl_version_and_internals_are_the_tested_ones():
    assert tuple(int(x) for x in trl.__version__.split(".")[:2]) == TESTED_TRL
    check_trl_compat()


def test_a_loss_that_reads_the_advantages_before_the_log_probs_fails_the_check(monkeypatch):
    """The loss point rewrites the advantages after TRL computes the policy's log-probs: a
    TRL whose `_compute_loss` reads them first (or takes no per-token ones) is refused."""
    def moved(self, model, inputs):
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1)
        return self._get_per_token_logps_and_entropies(model, inputs, None, 1)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", moved)
    with pytest.raises(RuntimeError, match="token_advantages point"):
        check_trl_compat()


def _loss_without_beta(self, model, inputs):
    """TRL's loss as the loss point reads it (the log-probs, then the advantages), with the
    clip range read from self but no KL coefficient."""
    per_token_logps = self._get_per_token_logps_and_entropies(model, inputs, None, 1)
    advantages = inputs["advantages"]
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    self.get_off_policy_mask(), self.get_gamma_weights()
    return torch.clamp(per_token_logps, 1 - self.epsilon_low, 1 + self.epsilon_high)


def _loss_with_a_fixed_clip(self, model, inputs):
    """The same, reading self.beta for its KL term, but with a clip range of its own."""
    per_token_logps = self._get_per_token_logps_and_entropies(model, inputs, None, 1)
    advantages = inputs["advantages"]
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    self.get_off_policy_mask(), self.get_gamma_weights()
    if self.beta != 0.0:
        per_token_logps = per_token_logps + inputs["ref_per_token_logps"]
    if self.beta != 0.0:
        per_token_logps = per_token_logps * self.beta
    return torch.clamp(per_token_logps, 0.8, 1.2)


@pytest.mark.parametrize(("moved", "names"), [
    (_loss_without_beta, "self.beta for its KL term"),
    (_loss_with_a_fixed_clip, "clip range from self.epsilon_low"),
])
def test_a_loss_that_moved_what_the_loss_point_sets_fails_the_check(monkeypatch, moved, names):
    """The KL in the reward sets self.beta, a trust region self.epsilon_low/high, inside TRL's
    loss only: a TRL whose loss no longer reads them there is refused."""
    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", moved)
    with pytest.raises(RuntimeError, match=names):
        check_trl_compat()


def run_trainer(tiny_policy, overrides, steps=2):
    """Train a few steps and return (trainer, outputs of every generate-and-score call)."""
    (spec,) = specs_for([f"trainer.max_steps={steps}", "eval.every_steps=0", *overrides], False)
    task = get_task(spec.config["task"])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_policy)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(spec, tiny_policy, tok, task, tmp, [])
        outputs, scored = [], []
        original, sampled = trainer._generate_and_score_completions, trainer._sampled

        def spy_sampled(inputs):  # the values of the rows sampled (ScoredRows)
            out, rows = sampled(inputs)
            scored.append(rows)
            return out, rows

        def spy(inputs):  # records what the loss will see; changes nothing
            out = original(inputs)
            outputs.append({"out": out, "rewards": scored[-1].rewards.clone(),
                            "step": trainer.state.global_step})
            return out

        trainer._sampled = spy_sampled
        trainer._generate_and_score_completions = spy
        trainer.train()
    return trainer, outputs


def group_zscore(rewards, g):
    r = rewards.view(-1, g)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)


PLAN = planted_groups(16)  # planted rewards: what each trick acts on, on any CPU


def test_reward_clip_bounds_the_rewards_that_reach_the_advantage(tiny_policy):
    trainer, outs = run_trainer(tiny_policy, [planted(PLAN), "hooks.reward_clip={low:-0.5,high:0.5}"])
    clipped = torch.tensor(PLAN).clamp(-0.5, 0.5)
    for o in outs:
        assert torch.equal(o["rewards"], clipped)
        assert torch.allclose(o["out"]["advantages"], group_zscore(clipped, 16), atol=1e-5)
    # Activity: the planted rewards outside the bounds, in every call.
    outside = sum(abs(v) > 0.5 for v in PLAN)
    assert trainer.activity["reward_clip_changed"] == len(outs) * outside > 0
    assert trainer.activity["reward_clip_units"] == len(outs) * len(PLAN)


def test_length_penalty_lowers_rewards_by_normalised_length(tiny_policy):
    _, plain = run_trainer(tiny_policy, [], steps=1)
    _, pen = run_trainer(tiny_policy, ["hooks.length_penalty=0.2"], steps=1)
    lengths = plain[0]["out"]["completion_mask"].sum(1).float()
    # Same seed, same first batch: the penalty is exactly coef * length / max_length.
    assert torch.allclose(pen[0]["rewards"], plain[0]["rewards"] - 0.2 * lengths / 4, atol=1e-6)


def kept_group_advantages(rewards, keep, g):
    """The review's definition, written independently: each group's mean and std over its
    kept samples only; dropped samples get nothing."""
    out = torch.zeros_like(rewards)
    for start in range(0, len(rewards), g):
        r, k = rewards[start:start + g], keep[start:start + g]
        if k.sum() >= 2:
            kept = r[k]
            out[start:start + g][k] = (kept - kept.mean()) / (kept.std() + 1e-4)
    return out


@pytest.mark.parametrize("over", ["group", "kept"])
def test_filter_removes_exactly_low_reward_samples_only_in_window(tiny_policy, over):
    trainer, outs = run_trainer(
        tiny_policy, [planted(PLAN), "trick=filter_low_reward_early", "hooks.filter_low_reward.end=0.5",
                      f"hooks.filter_low_reward.advantage_over={over}"], steps=4)
    for o in outs:
        mask = o["out"]["completion_mask"]
        kept = mask.sum(1) > 0
        if o["step"] < 2:  # steps 0-1 of 4: inside the first half
            assert torch.equal(kept, o["rewards"] >= 0.25)
            assert torch.equal(o["out"]["kept_rows"], kept)
            assert int(o["out"]["num_items_in_batch"]) == int(mask.sum())
            # group: the kept samples' advantages over the whole group (the dropped ones leave
            # the loss alone); kept: over the kept samples only.
            expected = group_zscore(o["rewards"], 16) if over == "group" else \
                kept_group_advantages(o["rewards"], kept, 16)
            assert torch.allclose(o["out"]["advantages"][kept], expected[kept], atol=1e-5)
        else:
            assert bool(kept.all()) and "kept_rows" not in o["out"]
    assert any((o["rewards"] < 0.25).any() for o in outs if o["step"] < 2)
    dropped = trainer.state.log_history
    assert any(h.get("filter/frac_dropped", 0) > 0 for h in dropped)


@pytest.mark.parametrize("over", ["group", "kept"])
def test_filter_on_a_constructed_group_keeps_the_survivors_signal_unless_over_the_kept(
        tiny_policy, over):
    """8 correct and 8 forgotten-carry answers in one group: the arm (`group`) gives each
    survivor GRPO's advantage over the whole group, about +1; measured over the survivors
    alone (`kept`) they form an all-correct group with zero std and no advantage."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from grpo_ablate.config import grpo_kwargs
    from grpo_ablate.training.trl_layer import AblationGRPOTrainer

    def half_right(prompts, completions, **_):
        return [1.0 if i % 16 < 8 else 0.05 for i in range(len(completions))]

    (spec,) = specs_for(["trainer.max_steps=1", "eval.every_steps=0", "trick=filter_low_reward_all",
                         f"hooks.filter_low_reward.advantage_over={over}"], False)
    task = get_task(spec.config["task"])
    seen = []
    with tempfile.TemporaryDirectory() as tmp:
        trainer = AblationGRPOTrainer(
            model=tiny_policy, reward_funcs=half_right, args=GRPOConfig(**grpo_kwargs(spec.config, tmp)),
            train_dataset=Dataset.from_list(task.train_rows()),
            processing_class=AutoTokenizer.from_pretrained(tiny_policy), hooks=spec.config["hooks"])
        original = trainer._generate_and_score_completions
        trainer._generate_and_score_completions = lambda inputs: seen.append(original(inputs)) or seen[-1]
        trainer.train()
    out = seen[0]
    assert torch.equal(out["kept_rows"], torch.tensor([i % 16 < 8 for i in range(64)]))
    survivors = out["advantages"][out["kept_rows"]]
    if over == "kept":
        assert torch.equal(survivors, torch.zeros(32))
    else:  # (1 - 0.525) / (the group's std 0.49058 + 1e-4)
        assert torch.allclose(survivors, torch.full((32,), 0.475 / (0.49058 + 1e-4)), atol=1e-4)
    assert int(out["completion_mask"][~out["kept_rows"]].sum()) == 0
    assert (trainer.activity["filter_low_reward_changed"],
            trainer.activity["filter_low_reward_units"]) == (32, 64)


def test_global_adv_norm_restandardises_after_group_zscore(tiny_policy):
    _, outs = run_trainer(tiny_policy, [planted(PLAN), "trick=adv_norm_global"])
    for o in outs:
        adv = o["out"]["advantages"]
        assert abs(adv.mean().item()) < 1e-5 and abs(adv.std().item() - 1) < 1e-2
        z = group_zscore(o["rewards"], 16)
        assert torch.allclose(adv, (z - z.mean()) / (z.std() + 1e-4), atol=1e-5)


def test_no_kl_loads_no_reference_and_logs_no_kl(tiny_policy):
    trainer, _ = run_trainer(tiny_policy, ["trick=kl_off"], steps=1)
    assert trainer.beta == 0.0 and trainer.ref_model is None
    assert all("kl" not in h for h in trainer.state.log_history)
    trainer, _ = run_trainer(tiny_policy, ["trick=kl_0.1"], steps=1)
    assert trainer.beta == 0.1 and trainer.ref_model is not None


@pytest.mark.parametrize("trick,attr,expected", [
    ("grad_clip_0.5", "max_grad_norm", 0.5), ("no_grad_clip", "max_grad_norm", 0.0),
    ("entropy_bonus", "entropy_coef", 0.01), ("temp_0.6", "temperature", 0.6),
    ("group_8", "num_generations", 8), ("reuse_2x_clip", "num_iterations", 2),
    ("lr_cosine", "lr_scheduler_type", "cosine"),
])
def test_native_tricks_reach_trl(tiny_policy, trick, attr, expected):
    trainer, outs = run_trainer(tiny_policy, [f"trick={trick}"], steps=1)
    value = getattr(trainer.args, attr)
    assert (value.value if hasattr(value, "value") else value) == expected
    if trick == "group_8":
        assert outs[0]["out"]["advantages"].numel() == 4 * 8  # prompts per step fixed


def test_epsilon_clip_is_inert_without_reuse_and_acts_with_it(tiny_policy):
    once, _ = run_trainer(tiny_policy, ["trainer.epsilon=0.01", "trainer.epsilon_high=0.01"], steps=2)
    assert all(h.get("clip_ratio/region_mean", 0) == 0 for h in once.state.log_history)
    reused, _ = run_trainer(tiny_policy, [planted(PLAN), "trick=reuse_2x", "trainer.epsilon=0.01",
                                          "trainer.epsilon_high=0.01", "trainer.learning_rate=1e-3"],
                            steps=4)
    assert any(h.get("clip_ratio/region_mean", 0) > 0 for h in reused.state.log_history)


def test_cosine_schedule_decays_the_lr(tiny_policy):
    trainer, _ = run_trainer(tiny_policy, ["trick=lr_schedule_cosine"], steps=4)
    lrs = [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]
    assert lrs[0] > lrs[-1] and not math.isclose(lrs[0], lrs[-1])


class FakeVLLMEngine:
    """Stands in for TRL's VLLMGeneration, which needs vLLM on a CUDA device (neither exists
    here): it records when weights were pushed and what sampling each generate call saw, and
    answers each prompt with its own tokens reversed. tests/test_training_gpu.py runs the real one."""

    def __init__(self):
        self.temperature, self.top_p, self.top_k, self.min_p = 1.0, 0.95, 0, None
        self.repetition_penalty, self.max_completion_length = 1.0, 1024
        self.generation_kwargs = {"seed": 1}
        self.calls: list = []

    def sync_weights(self):
        self.calls.append("sync")

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append(("generate", self.temperature, self.top_p, self.top_k,
                           self.max_completion_length, dict(self.generation_kwargs)))
        return prompts, [p[::-1] for p in prompts], None, None


def test_held_out_evaluation_generates_on_the_vllm_engine_with_its_own_sampling():
    from types import SimpleNamespace

    from grpo_ablate.models.tiny import build_tokenizer
    from grpo_ablate.tasks.evaluation import generate, generation_backend
    from grpo_ablate.training.trl_layer import AblationGRPOTrainer

    engine = FakeVLLMEngine()
    trainer = SimpleNamespace(vllm_generation=engine, _last_loaded_step=7,
                              processing_class=build_tokenizer(list("0123456789+=")))

    def backend(texts, max_new_tokens, temperature):
        return AblationGRPOTrainer.vllm_texts(trainer, texts, max_new_tokens, temperature)

    with generation_backend(backend):
        greedy = generate(None, None, ["12+3=", "4+5="], 6, None)
        sampled = generate(None, None, ["12+3="], 6, 0.7)
    assert greedy == ["=3+21", "=5+4"] and sampled == ["=3+21"]  # each prompt's own answer
    sync, first, _, second = engine.calls
    assert sync == "sync"  # the weights now in the model are pushed before it generates
    assert first == ("generate", 0.0, 1.0, 0, 6, {})   # greedy, no top-p/top-k, eval length
    assert second == ("generate", 0.7, 1.0, 0, 6, {})
    assert (engine.temperature, engine.top_p, engine.max_completion_length,
            engine.generation_kwargs) == (1.0, 0.95, 1024, {"seed": 1})  # training's, restored
    assert trainer._last_loaded_step == -1  # training pushes its own weights before it generates
    from grpo_ablate.tasks import evaluation

    assert evaluation._BACKEND.get() is None  # outside the block: the model's own generate
