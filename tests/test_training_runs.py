"""End-to-end runs of the tiny policy: fidelity to bare TRL, determinism, EMA isolation,
divergence and failure as results."""

import tempfile

import pytest

from grpo_ablate.config import grpo_kwargs, specs_for
from grpo_ablate.tasks import get_task
from grpo_ablate.training.train import train_one

pytestmark = pytest.mark.slow

SHORT = ["trainer.max_steps=6", "eval.every_steps=3"]


def spec(*overrides):
    return specs_for([*SHORT, *overrides], multirun=False)[0]


def losses_and_rewards(rows):
    return [(r["step"], r.get("loss"), r.get("reward")) for r in rows if "loss" in r]


def test_baseline_matches_bare_trl_step_for_step(tiny_policy):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    s = spec("eval.every_steps=2")
    record, rows = train_one(s)
    task = get_task(s.config["task"])
    with tempfile.TemporaryDirectory() as tmp:
        bare = GRPOTrainer(model=tiny_policy, reward_funcs=task.reward,
                           args=GRPOConfig(**grpo_kwargs(s.config, tmp)),
                           train_dataset=Dataset.from_list(task.train_rows()),
                           processing_class=AutoTokenizer.from_pretrained(tiny_policy))
        bare.train()
    theirs = [(h["step"], h["loss"], h["reward"]) for h in bare.state.log_history if "loss" in h]
    assert record.status == "completed"
    assert losses_and_rewards(rows) == theirs


def test_same_seed_same_record_and_other_seed_differs(tiny_policy):
    a, rows_a = train_one(spec("seed=3"))
    b, rows_b = train_one(spec("seed=3"))
    c, rows_c = train_one(spec("seed=4"))
    assert a.metrics == b.metrics and a.stability == b.stability
    assert losses_and_rewards(rows_a) == losses_and_rewards(rows_b)
    assert losses_and_rewards(rows_a) != losses_and_rewards(rows_c)


def test_ema_arm_is_judged_on_its_averaged_weights_and_training_is_unchanged(tiny_policy,
                                                                           monkeypatch):
    from grpo_ablate.tasks.arithmetic import ArithmeticTask

    plain, rows_plain = train_one(spec())
    # What each evaluation sees: a fingerprint of the weights it was handed. (The held-out
    # metrics alone can coincide when the averaged and raw weights give the same answers.)
    seen, original = [], ArithmeticTask.evaluate

    def fingerprinted(self, model, *args, **kwargs):
        seen.append(sum(float(p.double().sum()) for p in model.parameters()))
        return original(self, model, *args, **kwargs)

    monkeypatch.setattr(ArithmeticTask, "evaluate", fingerprinted)
    monkeypatch.setenv("GRPO_ABLATE_START_EVAL_CACHE", "0")  # evaluate step 0 here too
    ema, rows_ema = train_one(spec("trick=ema_0.9", "hooks.ema.decay=0.5"))
    assert losses_and_rewards(rows_plain) == losses_and_rewards(rows_ema)
    # The raw weights of the EMA arm are the baseline's weights: same training, same evals.
    raw = {k.removeprefix("raw/"): v for k, v in ema.metrics.items() if k.startswith("raw/")}
    assert raw == {k: v for k, v in plain.metrics.items() if k in raw}
    assert "raw/eval/accuracy" not in plain.metrics
    # Its primary metric comes from the averaged weights: at each evaluation (start, step 3,
    # end) the EMA pass sees other weights than the raw pass, except at the start.
    pairs = list(zip(seen[0::2], seen[1::2], strict=True))
    assert len(pairs) == 3, seen
    assert pairs[0][0] == pairs[0][1] and all(e != r for e, r in pairs[1:])
    assert "checkpoint_regret_raw" in ema.stability


def test_every_arm_is_evaluated_at_one_temperature(tiny_policy):
    base, _ = train_one(spec())
    cold, _ = train_one(spec("trick=temperature_0.6"))
    # The SFT start is the same policy evaluated the same way, whatever the arm trains at.
    assert cold.metrics["eval/start_sampled_accuracy"] == base.metrics["eval/start_sampled_accuracy"]
    assert "eval/sampled_accuracy_train_temp" in cold.metrics
    assert "eval/sampled_accuracy_train_temp" not in base.metrics


def test_budget_and_activity_are_recorded(tiny_policy):
    base, _ = train_one(spec())
    cosine, _ = train_one(spec("trick=lr_schedule_cosine"))
    clip, rows = train_one(spec("trick=grad_norm_0.5"))
    assert base.activity == {} and base.cost["total_lr"] == pytest.approx(6 * 5e-5)
    assert cosine.cost["total_lr"] < 0.75 * base.cost["total_lr"]
    assert cosine.activity["acted"] == 1.0  # a schedule acts on every step by construction
    norms = [r["grad_norm"] for r in rows if "grad_norm" in r]
    assert clip.activity["acted"] == sum(g > 0.5 for g in norms) / len(norms)


def test_record_has_contract_fields_history_and_cost(tiny_policy):
    rec, rows = train_one(spec("trick=group_size_32"))
    base, _ = train_one(spec())
    for key in ("eval/accuracy", "eval/reward_mean", "eval/sampled_accuracy", "eval/start_accuracy"):
        assert key in rec.metrics
    for key in ("kl_final", "kl_max", "entropy_ratio_final", "length_growth", "grad_norm_max",
                "reward_volatility", "checkpoint_regret"):
        assert key in rec.stability
    assert {"kl", "entropy", "completions/mean_length", "reward", "grad_norm", "learning_rate"} \
        <= set().union(*rows)
    assert rec.cost["completions"] == 2 * base.cost["completions"]  # G=32 vs 16, same prompts
    assert rec.cost["groups_per_step"] == base.cost["groups_per_step"] == 4
    assert rec.config["trainer"]["bf16"] is False and rec.config["trainer"]["use_cpu"] is True
    assert rec.steps == base.steps == 6


def test_the_throughput_fields_agree_with_counts_made_apart(tiny_policy):
    """The record's tokens against TRL's own count (`num_tokens`: every prompt and completion
    token it fed the model, from its attention masks) and the test's (completions per step x
    their logged mean length, each step logged); its seconds against each other."""
    rec, rows = train_one(spec())
    cost = rec.cost
    logged = [r for r in rows if "num_tokens" in r]
    completion = sum(r["completions/mean_length"] * cost["completions_per_step"] for r in logged)
    assert len(logged) == rec.steps == 6
    assert cost["completion_tokens"] == pytest.approx(completion, abs=1e-6)
    assert cost["prompt_tokens"] + cost["completion_tokens"] == logged[-1]["num_tokens"]
    assert cost["prompt_tokens"] > cost["completions"]  # a prompt of several tokens each
    assert 0 < cost["generation_seconds"] < cost["step_seconds"] < rec.wall_seconds
    assert cost["devices"] == 1
    per_step = cost["generation_seconds_per_step"] + cost["training_seconds_per_step"]
    assert per_step == pytest.approx(cost["step_seconds"] / 6, abs=2e-4)
    tokens, seconds = cost["prompt_tokens"] + cost["completion_tokens"], cost["step_seconds"]
    # step_seconds is recorded to the millisecond; the rate from the unrounded seconds
    assert tokens / (seconds + 5e-4) <= cost["tokens_per_second_per_device"] \
        <= tokens / (seconds - 5e-4)


@pytest.mark.parametrize("fault,reason", [("faults.nan_loss_at_step=3", "non-finite loss"),
                                          ("faults.kl_blowup_at_step=3", "KL")])
def test_divergence_stops_the_run_with_a_complete_record(tiny_policy, fault, reason):
    rec, rows = train_one(spec(fault))
    assert rec.status == "diverged" and reason in rec.error
    assert rec.steps == 3
    assert max(r["step"] for r in rows) == 3
    assert "eval/accuracy" in rec.metrics


def test_exception_in_reward_is_a_failed_record(tiny_policy):
    rec, rows = train_one(spec("faults.reward_raises_at_step=2"))
    assert rec.status == "failed" and "injected fault" in rec.error
    assert rec.metrics == {}
