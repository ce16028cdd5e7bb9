"""docs/guide.md's "Add a trick" recipe, done as a user does it, from a folder outside the
package: a TRL-native trick is one YAML; a hook trick is one YAML plus one module that
registers its function at a hook point, its rule and its activity measure
(grpo_ablate/hook_tricks/), here one at each point: the rewards, the advantages and the
loss. Each then appears in `grpo-ablate tricks`, in a sweep's jobs, in the records' activity
and in the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NATIVE = """# @package _global_
trick:
  id: "my_beta"
  family: kl
  changes: "KL coefficient 0.02"
  prior: "my own arm"
  keys: ["trainer.beta"]
trainer:
  beta: 0.02
"""

HOOK_YAML = """# @package _global_
trick:
  id: "my_floor"
  family: reward
  changes: "rewards below a floor are raised to it"
  prior: "my own hook"
  keys: ["hooks.reward_floor"]
  modules: ["my_floor_hook"]
hooks:
  reward_floor: 10.0
"""

# Every reward of the arithmetic task is below 10: the floor changes every completion, so
# its measured activity is exactly 1 whatever the policy generates.
HOOK_MODULE = '''
from grpo_ablate.hook_tricks import HookTrick, register


def raise_to_floor(batch, floor):
    changed = (batch.rewards < floor).any(dim=1)
    return batch.rewards.clamp(min=floor), changed


register(HookTrick(
    "reward_floor", "raise every reward below the floor to it",
    rule=(lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), "a number"),
    shape_rewards=raise_to_floor))
'''


# One hook at the advantages point and one at the loss point, each shifting what it is given:
# every completion's advantage, and every counted token's, changes, so each acts on 1 of 1.
SHIFT_YAML = """# @package _global_
trick:
  id: "my_{name}"
  family: advantage
  changes: "{point} shifted"
  prior: "my own {point} hook"
  keys: ["hooks.{name}"]
  modules: ["my_{name}_hook"]
hooks:
  {name}: 0.25
"""
SHIFT_MODULE = """
from grpo_ablate.hook_tricks import HookTrick, register

register(HookTrick(
    "{name}", "shift the {point}",
    rule=(lambda x: isinstance(x, float), "a number"),
    {point}=lambda batch, shift: batch.advantages + shift))
"""
SHIFTS = {"adv_shift": "advantages", "token_shift": "token_advantages"}


def user_folder(root: Path) -> tuple[Path, Path]:
    conf, code = root / "conf", root / "code"
    (conf / "trick").mkdir(parents=True)
    code.mkdir()
    (conf / "trick" / "my_beta.yaml").write_text(NATIVE)
    (conf / "trick" / "my_floor.yaml").write_text(HOOK_YAML)
    (code / "my_floor_hook.py").write_text(HOOK_MODULE)
    for name, point in SHIFTS.items():
        (conf / "trick" / f"my_{name}.yaml").write_text(SHIFT_YAML.format(name=name, point=point))
        (code / f"my_{name}_hook.py").write_text(SHIFT_MODULE.format(name=name, point=point))
    return conf, code


def cli(args: list[str], code: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "grpo_ablate.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def test_a_bad_value_of_a_registered_hook_is_refused_by_its_own_rule(tmp_path):
    conf, code = user_folder(tmp_path)
    res = cli(["run", "--config-dir", str(conf), "trick=my_floor", "hooks.reward_floor=high",
               f"out_root={tmp_path / 'out'}"], code, tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        'grpo-ablate: error: hooks.reward_floor="high": must be a number']
    missing = cli(["run", "--config-dir", str(conf), "trick=my_floor",
                   "trick.modules=[no_such_module]", f"out_root={tmp_path / 'out'}"], code,
                  tmp_path)
    assert missing.returncode == 2 and "trick.modules: no_such_module" in missing.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_native_and_a_hook_trick_from_a_user_folder(tmp_path, tiny_policy):
    conf, code = user_folder(tmp_path)
    listed = cli(["tricks", "--config-dir", str(conf)], code, tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "my own arm" in lines["my_beta"] and "my own hook" in lines["my_floor"]
    assert "my own advantages hook" in lines["my_adv_shift"]
    assert "my own token_advantages hook" in lines["my_token_shift"]

    out = tmp_path / "out"
    res = cli(["sweep", "--config-dir", str(conf), "sweep=smoke",
               "trick=baseline,my_beta,my_floor,my_adv_shift,my_token_shift",
               "seed=0,1", "trainer.max_steps=2", "eval.every_steps=0", f"out_root={out}",
               "sweep_name=mine"], code, tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "sweep: 10 runs (5 arms x 2 seeds)" in res.stderr
    records = [json.loads(p.read_text()) for p in (out / "mine" / "runs").glob("*/record.json")]
    by_arm = {}
    for r in records:
        by_arm.setdefault(r["arm"], []).append(r)
    assert sorted(by_arm) == ["baseline", "my_adv_shift", "my_beta", "my_floor", "my_token_shift"]
    assert all(r["status"] == "completed" for r in records)
    for r in by_arm["my_floor"]:
        assert r["activity"]["acted"] == 1.0
        assert r["activity"]["measure"] == "completions whose reward reward_floor changed"
        assert r["config"]["hooks"]["reward_floor"] == 10.0
    for name in SHIFTS:
        for r in by_arm[f"my_{name}"]:
            unit = "completions" if name == "adv_shift" else "tokens"
            assert r["activity"]["measure"] == f"{unit} whose advantage {name} changed"
            assert r["activity"]["acted"] == 1.0 and r["config"]["hooks"][name] == 0.25
    for r in by_arm["my_beta"]:
        assert r["config"]["trainer"]["beta"] == 0.02
        assert r["activity"]["measure"] == "a config value: acts on every step"
    report = json.loads((out / "mine" / "report.json").read_text())
    (stratum,) = report["strata"]
    assert sorted(a["arm"] for a in stratum["arms"]) == ["my_adv_shift", "my_beta", "my_floor",
                                                        "my_token_shift"]
    assert report["priors"] == {"my_beta": "my own arm", "my_floor": "my own hook",
                                "my_adv_shift": "my own advantages hook",
                                "my_token_shift": "my own token_advantages hook"}


@pytest.mark.parametrize("road", ["grpo-ablate", "hydra"])
def test_a_user_folders_trick_joins_its_catalog_in_a_catalog_sweep(tmp_path, road):
    """`${tricks:review}` in a sweep file lists the review catalog's tricks from the user's
    `--config-dir` too (a trick file without `catalog:` is the review's), on grpo-ablate's
    composition and on a plain Hydra multirun's."""
    (tmp_path / "trick").mkdir()
    (tmp_path / "trick" / "my_beta.yaml").write_text(NATIVE)
    if road == "grpo-ablate":
        from grpo_ablate.config import expand_jobs

        jobs = expand_jobs([f"hydra.searchpath=[file://{tmp_path}]", "sweep=catalog"])
        assert ["trick=my_beta" in job for job in jobs].count(True) >= 1
        return
    # A plain Hydra multirun stops at its first job's bad value, after listing the jobs.
    res = subprocess.run([sys.executable, "-c", PROBE, "--config-dir", str(tmp_path),
                          "sweep=catalog"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "WANDB_MODE": "offline"})
    assert "my_beta" in res.stdout.split("TRICKS ", 1)[1].splitlines()[0], res.stderr[-2000:]


# The Hydra app with the `tricks` resolver wrapped to print what it lists, and a step count
# that no job accepts, so nothing trains.
PROBE = """
import sys
from omegaconf import OmegaConf
from grpo_ablate.config import registry
def listed(catalog, _root_=None):
    out = registry.trick_list(catalog, _root_)
    print("TRICKS", out, flush=True)
    return out
OmegaConf.register_new_resolver("tricks", listed, replace=True)
sys.argv = ["app", "-m", *sys.argv[1:], "trainer.max_steps=-1"]
from grpo_ablate.app import hydra_main
hydra_main()
"""
