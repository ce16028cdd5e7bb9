"""The two ablation topologies beside one trick at a time (grpo_ablate/launch/topology.py):
leave one out of a recipe, add one to a base. Their arms are combined trick files compared
with the arm their topology names; refusals come before anything is written."""

from __future__ import annotations

import json

import pytest
import yaml

from grpo_ablate import cli
from grpo_ablate.launch.topology import topology_arms

RECIPE = "recipe=[kl_off,grad_norm_off,zero_variance_filter]"


def test_leave_one_out_is_the_recipe_and_each_removal_against_it():
    arms = {a.name: a for a in topology_arms("leave_one_out", [RECIPE], None)}
    assert set(arms) == {"loo_full", "loo_minus_kl_off", "loo_minus_grad_norm_off",
                         "loo_minus_zero_variance_filter"}
    assert arms["loo_full"].against is None
    assert arms["loo_minus_kl_off"].tricks == ("grad_norm_off", "zero_variance_filter")
    assert {a.against for n, a in arms.items() if n != "loo_full"} == {"loo_full"}
    meta = yaml.safe_load(arms["loo_minus_kl_off"].trick_yaml())["trick"]
    assert (meta["against"], meta["composed_of"]) == ("loo_full", ["grad_norm_off",
                                                                  "zero_variance_filter"])


def test_add_one_is_the_base_and_each_addition_against_it():
    arms = {a.name: a for a in topology_arms("add_one", ["base=lite_ppo", "tricks=[kl_off,top_p_1.0]"],
                                             None)}
    assert set(arms) == {"lite_ppo__plus__kl_off", "lite_ppo__plus__top_p_1.0"}
    assert {a.against for a in arms.values()} == {"lite_ppo"}
    two = {a.name for a in topology_arms("add_one", ["base=[lite_ppo,kl_off]", "tricks=[top_p_1.0]"],
                                         None)}
    assert two == {"add_one_base", "add_one_base__plus__top_p_1.0"}


@pytest.mark.parametrize(("line", "why"), [
    (["sweep=leave_one_out"], "recipe= names the recipe"),
    (["sweep=leave_one_out", "recipe=[kl_off]"], "at least 2 different tricks"),
    (["sweep=leave_one_out", "recipe=[kl_off,kl_0.1]"], "arms of one family"),
    (["sweep=leave_one_out", "recipe=[kl_off,no_such_trick]"], "no such trick file"),
    (["sweep=add_one", "base=lite_ppo", "tricks=[loss_dr_grpo]"], "set trainer.loss_type"),
    (["sweep=add_one", "base=lite_ppo", "tricks=[lite_ppo]"], "allowed: tricks not in the base"),
    (["sweep=add_one", "base=baseline"], "one-at-a-time"),
    (["sweep=add_one", "trick=kl_off"], "not trick="),
    (["tricks=[kl_off]"], "only for sweep=add_one"),
])
def test_a_topology_refuses_in_one_line_and_writes_nothing(line, why, tmp_path, capsys):
    assert cli.main(["sweep", *line, f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_plan_forecasts_a_topology_without_writing_it(tiny_policy, tmp_path, capsys):
    assert cli.main(["plan", "sweep=leave_one_out", RECIPE, f"out_root={tmp_path}",
                     "--pilot-steps", "2"]) == 0
    assert "5 arms x 3 seeds" in capsys.readouterr().out
    assert not (tmp_path / "leave_one_out").exists()


@pytest.mark.slow
def test_leave_one_out_and_add_one_run_and_their_reports_test_each_change(tiny_policy, tmp_path):
    """A 3-trick recipe's leave-one-out and an add-one on lite_ppo, 2 seeds, short runs: every
    run completes, and the report compares each removal with the full recipe and each
    addition with the base."""
    short = ["seed=range(0,2)", "trainer.max_steps=4", "eval.every_steps=0", "run_cache=null",
             f"out_root={tmp_path}"]
    assert cli.main(["sweep", "sweep=leave_one_out", RECIPE, *short]) == 0
    assert cli.main(["sweep", "sweep=add_one", "tricks=[kl_off,zero_variance_filter]", *short]) == 0
    for sweep, expected in {
        "leave_one_out": {"loo_full": "baseline", "loo_minus_kl_off": "loo_full",
                          "loo_minus_grad_norm_off": "loo_full",
                          "loo_minus_zero_variance_filter": "loo_full"},
        "add_one": {"lite_ppo": "baseline", "lite_ppo__plus__kl_off": "lite_ppo",
                    "lite_ppo__plus__zero_variance_filter": "lite_ppo"}}.items():
        records = [json.loads(p.read_text()) for p in (tmp_path / sweep).glob("runs/*/record.json")]
        assert {r["status"] for r in records} == {"completed"}
        assert len(records) == 2 * (len(expected) + 1)
        report = json.loads((tmp_path / sweep / "report.json").read_text())
        (stratum,) = report["strata"]
        assert {a["arm"]: a["against"] for a in stratum["arms"]} == expected
        assert all(a["verdict"] for a in stratum["arms"])


def test_the_forest_plots_seed_dots_are_differences_to_the_arm_compared_with():
    import pandas as pd

    from grpo_ablate.report.figures import compared_with, seed_differences

    wide = pd.DataFrame({"baseline": [0.5, 0.6], "loo_full": [0.7, 0.9],
                         "loo_minus_kl_off": [0.6, 0.8]}, index=[0, 1])
    row = {"arm": "loo_minus_kl_off", "against": "loo_full"}
    assert compared_with(row, "baseline") == "loo_full"
    assert seed_differences(wide, "loo_minus_kl_off", "loo_full") == pytest.approx([-0.1, -0.1])
    assert compared_with({"arm": "loo_full", "against": None}, "baseline") == "baseline"
