"""`grpo-ablate plan`: the ladder's expected runs by simulation, one run's cost model, the
launcher's parallelism, and the command on a recorded sweep (costs from its records) and on
a fresh one (a pilot on this machine)."""

import math

import pytest

from grpo_ablate import cli
from grpo_ablate.launch.estimate import launcher_of, overhead, wall_seconds
from grpo_ablate.launch.run_cost import RunCost
from grpo_ablate.stats.early_stop import StopPlan
from grpo_ablate.stats.expected import expected_ladder_runs
from grpo_ablate.stats.expected_stops import expected_stop_share
from grpo_ablate.stats.sequential import Design


def test_a_decisive_effect_settles_every_arm_at_the_first_look():
    # 5 seeds of a 1.0 difference over a 0.04 spread: p about 1e-6, far past the first
    # look's boundary (about 5e-4 at alpha/4), so every arm stops there.
    design = Design(rungs=(5, 10), arms=tuple("abcd"))
    runs, se = expected_ladder_runs(design, 4, effect=1.0, seed_sd=0.03, noise_sd=0.03, sims=20)
    assert runs == (4 + 1) * 5 and se == 0.0  # 4 arms and the baseline, 5 seeds each
    null, _ = expected_ladder_runs(design, 4, effect=0.0, seed_sd=0.03, noise_sd=0.03, sims=50)
    assert 5 * 5 < null <= 5 * 10


def test_early_stopping_saves_steps_only_where_an_effect_shows_at_a_look():
    # The same decisive difference from the first look on: every arm and the baseline stop
    # at a quarter of their steps; no effect: a look stops nothing (alpha spent is tiny).
    plan = StopPlan(looks=(0.25, 0.5), seeds=5, arms=tuple("abcd"))
    assert expected_stop_share(plan, 4, effect=5.0, seed_sd=0.03, noise_sd=0.03,
                               sims=20) == pytest.approx(0.25)
    null = expected_stop_share(plan, 4, effect=0.0, seed_sd=0.03, noise_sd=0.03, sims=50)
    assert 0.98 <= null <= 1.0


@pytest.mark.slow
def test_plan_prints_the_cost_with_early_stopping_beside_without(smoke_sweep, tmp_path,
                                                                  capsys):
    _res, out = smoke_sweep
    assert cli.main(["plan", "sweep=smoke", f"out_root={tmp_path}", "trainer.max_steps=40",
                     "eval.every_steps=4", "early_stop=true", "seed=0,1,2,3",
                     "--from", str(out / "smoke")]) == 0
    text = capsys.readouterr().out
    runs = {line.split(":")[0].strip(): float(line.split(":")[1].split()[0])
            for line in text.splitlines() if line.strip().startswith("runs ")}
    assert runs["runs without early stopping"] == 12
    assert runs["runs with early stopping, at least"] == 3  # every run stops at 0.25
    assert 3 <= runs["runs with early stopping, every trick has the min-effect"] <= 12
    assert "predicted wall time, with early stopping, no trick matters" in text


def test_one_runs_cost_scales_its_steps_with_the_completion_length():
    cost = RunCost(fixed=10.0, generation=2.0, training=1.0, eval_end=5.0, mean_length=100,
                   source="test")
    assert cost.seconds(steps=10, evals_between=0, sampled_k=4, length=None) == 40.0
    assert cost.seconds(steps=10, evals_between=0, sampled_k=4, length=200) == 70.0
    assert cost.seconds(steps=10, evals_between=2, sampled_k=4, length=None) == 42.0  # greedy 1/5
    assert wall_seconds(5, per_run=10.0, workers=2, extra=3.0) == 33.0  # 3 rounds of 2
    assert wall_seconds(0, per_run=10.0, workers=2, extra=3.0) == 0.0
    cost = RunCost(fixed=10.0, generation=2.0, training=2.0, eval_end=5.0, mean_length=100,
                   source="test", prompt_tokens=3000, completion_tokens=5000, devices=2)
    assert cost.tokens_per_step(None) == 8000 and cost.tokens_per_step(200) == 13000
    assert cost.tokens_per_second_per_device(None) == 8000 / (4.0 * 2)
    assert cost.tokens_per_second_per_device(200) == 13000 / (8.0 * 2)
    cost = RunCost(fixed=0, generation=0, training=0, eval_end=0, mean_length=1, source="t",
                   process_start=4.0, start_eval=1.0)
    assert overhead(cost, launches=3, seeds=5, workers=2) == 4 * 4.0 + math.ceil(5 / 2) * 1.0


def test_the_launcher_sets_how_many_runs_go_at_once():
    assert launcher_of([]).workers == 1
    assert launcher_of(["launcher=joblib", "hydra.launcher.n_jobs=4"]).workers == 4
    assert launcher_of(["launcher=slurm"]).workers == 256
    assert launcher_of(["launcher=slurm", "hydra.launcher.array_parallelism=8"]).workers == 8
    # the GPUs a Slurm job asks for, whether or not the planning (login) node has any
    assert launcher_of(["launcher=slurm", "hydra.launcher.gpus_per_node=4"]).gpus_per_run == 4
    assert launcher_of(["launcher=slurm"]).gpus_per_run == 0


@pytest.mark.parametrize("flag", ["--pilot-steps 0", "--sims x", "--length -3"])
def test_bad_plan_options_are_one_line(flag, capsys, tmp_path):
    assert cli.main(["plan", *flag.split(), f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a positive integer" in err[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_plan_of_a_recorded_sweep_costs_runs_from_its_records(smoke_sweep, capsys):
    _res, out = smoke_sweep
    assert cli.main(["plan", "sweep=smoke", f"out_root={out}", "logger=wandb"]) == 0
    text = capsys.readouterr().out
    assert "6 jobs (3 arms x 2 seeds); 6 recorded, 0 in the run cache, 0 to train" in text
    assert "finished run(s) of the baseline's config" in text and "pilot" not in text
    assert "tokens/s per process" in text and "tokens a step (" in text


def _pilot_record(wall: float, generation: float, step: float, steps: int):
    from types import SimpleNamespace
    return SimpleNamespace(wall_seconds=wall, steps=steps, cost={
        "generation_seconds": generation, "step_seconds": step, "eval_seconds": 1.0,
        "completion_tokens": 64 * steps, "completions": 8 * steps, "prompt_tokens": 40 * steps,
        "devices": 1})


def test_a_pilots_step_is_the_marginal_cost_and_never_free_when_noise_reverses_it():
    from grpo_ablate.launch.pilot import two_run_cost
    a = _pilot_record(wall=10.0, generation=1.5, step=2.0, steps=1)  # a slow first step
    b = _pilot_record(wall=11.0, generation=2.5, step=4.0, steps=3)
    cost = two_run_cost(a, b, 2, "test")
    assert (cost.generation, cost.training) == (0.5, 0.5)  # (2.5-1.5)/2 and (1.5-0.5)/2
    # The 3-step run measured faster than the 1-step one (a busy machine): its own mean.
    fast = _pilot_record(wall=9.0, generation=1.2, step=1.6, steps=3)
    cost = two_run_cost(a, fast, 2, "test")
    assert cost.generation == pytest.approx(1.2 / 3) and cost.training == pytest.approx(0.4 / 3)
    assert cost.tokens_per_second_per_device(None) > 0


@pytest.mark.slow
def test_plan_of_a_fresh_sweep_pilots_the_baseline(tiny_policy, tmp_path, capsys):
    assert cli.main(["plan", "sweep=smoke", f"out_root={tmp_path}", "--pilot-steps", "2",
                     "run_cache=null", "adaptive=true", "adaptive.rungs=[2]",
                     "--sims", "20"]) == 0
    text = capsys.readouterr().out
    assert "a pilot of the baseline on this machine (1 and 3 steps" in text
    assert "runs at most: 6" in text and "peak memory of one run" in text
    assert "tokens/s per process" in text and "of a step; one run" in text
    assert not (tmp_path / "smoke").exists()  # the plan trains nothing in the sweep folder


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CPU machine's refusal")
def test_a_pilot_that_cannot_run_here_is_refused_before_it_starts(tmp_path, capsys):
    """A 7B preset on a CPU machine: one line naming why and the ways out, exit 2, and
    nothing trained or written (its hub checkpoint is never loaded)."""
    assert cli.main(["plan", "model=qwen2.5-7b", "task=gsm8k", f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "model=qwen2.5-7b (7.6B parameters): piloting it needs a CUDA device" in err[0]
    assert "--from PATH" in err[0] and "launcher=slurm" in err[0]
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_parameter_count_a_pilot_is_judged_by_is_the_checkpoints_own(tiny_policy):
    """From the embedded policy's config.json, against the parameters its weights hold
    (the estimate leaves out the norms' few weights)."""
    import json
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from grpo_ablate.launch.pilot import parameter_count, parameters_of

    path = str(tiny_policy)
    model = AutoModelForCausalLM.from_pretrained(path)
    counted = sum(p.numel() for p in model.parameters())
    estimate = parameter_count({"name": "hf", "path": path})
    assert estimate == pytest.approx(counted, rel=0.01)
    untied = {**json.loads((Path(path) / "config.json").read_text()), "tie_word_embeddings": False}
    assert parameters_of(untied) != estimate  # the formula reads the config, not a constant


@pytest.mark.slow
def test_plan_from_an_earlier_sweeps_records_costs_without_a_pilot(smoke_sweep, tmp_path,
                                                                  capsys):
    """`--from PATH`: the records of the same model elsewhere (an earlier sweep), for a sweep
    with another output folder and more steps; a folder without that model's runs is one
    line."""
    _res, out = smoke_sweep
    assert cli.main(["plan", "sweep=smoke", f"out_root={tmp_path}", "trainer.max_steps=40",
                     "--from", str(out / "smoke")]) == 0
    text = capsys.readouterr().out
    assert "finished run(s) of model=tiny under --from" in text and "pilot" not in text
    assert not (tmp_path / "smoke").exists()
    assert cli.main(["plan", "sweep=smoke", "model=smollm2-135m", f"out_root={tmp_path}",
                     "--from", str(out / "smoke")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished run of model=smollm2-135m there" in err[0], err


@pytest.mark.slow
def test_a_pilot_that_fails_is_one_line(tiny_policy, tmp_path, capsys, monkeypatch):
    """The pilot's own run fails (a hub dataset on a machine without network): one line
    naming its cause and the way out, exit 2, nothing in the sweep folder."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["plan", "sweep=smoke", "task=gsm8k", f"out_root={tmp_path}",
                     "run_cache=null"]) == 2
    progress, error = capsys.readouterr().err.strip().splitlines()  # the pilot's start, then
    assert progress.startswith("plan: no finished run of the baseline's config: piloting it")
    assert error.startswith("grpo-ablate: error: plan: the pilot run of the baseline failed "
                            "(task.dataset.train=openai/gsm8k: could not load split 'train'")
    assert "--from PATH" in error
    assert not (tmp_path / "smoke").exists()
