"""`grpo-ablate plan`: the ladder's expected runs by simulation, one run's cost model, the
launcher's parallelism, and the command on a recorded sweep (costs from its records) and on
a fresh one (a pilot on this machine)."""

import math

import pytest

from grpo_ablate import cli
from grpo_ablate.launch.estimate import RunCost, launcher_of, overhead, wall_seconds
from grpo_ablate.stats.expected import expected_ladder_runs
from grpo_ablate.stats.sequential import Design


def test_a_decisive_effect_settles_every_arm_at_the_first_look():
    # 5 seeds of a 1.0 difference over a 0.04 spread: p about 1e-6, far past the first
    # look's boundary (about 5e-4 at alpha/4), so every arm stops there.
    design = Design(rungs=(5, 10), arms=tuple("abcd"))
    runs, se = expected_ladder_runs(design, 4, effect=1.0, seed_sd=0.03, noise_sd=0.03, sims=20)
    assert runs == (4 + 1) * 5 and se == 0.0  # 4 arms and the baseline, 5 seeds each
    null, _ = expected_ladder_runs(design, 4, effect=0.0, seed_sd=0.03, noise_sd=0.03, sims=50)
    assert 5 * 5 < null <= 5 * 10


def test_one_runs_cost_scales_its_steps_with_the_completion_length():
    cost = RunCost(fixed=10.0, generation=2.0, training=1.0, eval_end=5.0, mean_length=100,
                   source="test")
    assert cost.seconds(steps=10, evals_between=0, sampled_k=4, length=None) == 40.0
    assert cost.seconds(steps=10, evals_between=0, sampled_k=4, length=200) == 70.0
    assert cost.seconds(steps=10, evals_between=2, sampled_k=4, length=None) == 42.0  # greedy 1/5
    assert wall_seconds(5, per_run=10.0, workers=2, extra=3.0) == 33.0  # 3 rounds of 2
    assert wall_seconds(0, per_run=10.0, workers=2, extra=3.0) == 0.0
    cost = RunCost(fixed=0, generation=0, training=0, eval_end=0, mean_length=1, source="t",
                   process_start=4.0, start_eval=1.0)
    assert overhead(cost, launches=3, seeds=5, workers=2) == 4 * 4.0 + math.ceil(5 / 2) * 1.0


def test_the_launcher_sets_how_many_runs_go_at_once():
    assert launcher_of([]).workers == 1
    assert launcher_of(["launcher=joblib", "hydra.launcher.n_jobs=4"]).workers == 4
    assert launcher_of(["launcher=slurm"]).workers == 256
    assert launcher_of(["launcher=slurm", "hydra.launcher.array_parallelism=8"]).workers == 8


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


@pytest.mark.slow
def test_plan_of_a_fresh_sweep_pilots_the_baseline(tiny_policy, tmp_path, capsys):
    assert cli.main(["plan", "sweep=smoke", f"out_root={tmp_path}", "--pilot-steps", "2",
                     "run_cache=null", "adaptive=true", "adaptive.rungs=[2]",
                     "--sims", "20"]) == 0
    text = capsys.readouterr().out
    assert "a pilot of the baseline on this machine (1 and 3 steps" in text
    assert "runs at most: 6" in text and "peak memory of one run" in text
    assert not (tmp_path / "smoke").exists()  # the plan trains nothing in the sweep folder
