"""The recommended recipe, confirmed: tricks combined into one trick file, the recipe of a
report, whether tricks add up (planted CSVs against an independent computation), and
`grpo-ablate confirm` on a finished sweep whose verdicts are planted in its report."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from grpo_ablate import cli
from grpo_ablate.config.combination import combine
from grpo_ablate.errors import UserError
from grpo_ablate.records import read_record
from grpo_ablate.stats.additivity import additivity

MIN_EFFECT = 0.01


# -- combining trick files ---------------------------------------------------------------
def test_tricks_combine_into_one_file_and_one_family_keeps_its_best_supported_arm():
    c = combine("mix", ["lr_schedule_cosine", "kl_off", "kl_0.1", "grad_norm_0.5"],
                why_first={"kl_off": "safe to drop"})
    assert c.tricks == ("lr_schedule_cosine", "kl_off", "grad_norm_0.5")
    assert c.passed_over == (("kl_0.1", "kl_off", "safe to drop"),)
    assert c.settings == {"trainer.lr_scheduler_type": "cosine", "trainer.beta": 0.0,
                          "trainer.max_grad_norm": 0.5}
    data = yaml.safe_load(c.trick_yaml("why"))
    assert data["trick"]["composed_of"] == list(c.tricks)
    assert data["trainer"] == {"lr_scheduler_type": "cosine", "beta": 0.0, "max_grad_norm": 0.5}
    assert c.override_line() == ("trainer.lr_scheduler_type=cosine trainer.beta=0.0 "
                                 "trainer.max_grad_norm=0.5")
    # a hook trick's settings keep their interpolations, as its file writes them
    clamp = combine("c", ["reward_clamp_task"])
    assert clamp.settings == {"hooks.reward_clip.low": "${task.shaping.clip.low}",
                              "hooks.reward_clip.high": "${task.shaping.clip.high}"}


def test_tricks_of_two_families_setting_one_key_differently_are_refused(tmp_path):
    (tmp_path / "trick").mkdir()
    (tmp_path / "trick" / "my_beta.yaml").write_text(
        "# @package _global_\ntrick:\n  id: my_beta\n  family: mine\n  changes: beta 0.02\n"
        "  keys: [trainer.beta]\ntrainer:\n  beta: 0.02\n")
    with pytest.raises(UserError, match=r"kl_off \(family kl\) and my_beta \(family mine\) set "
                                        r"trainer.beta to different values"):
        combine("x", ["kl_off", "my_beta"], [str(tmp_path)])
    (tmp_path / "trick" / "my_beta.yaml").write_text(
        "# @package _global_\ntrick:\n  id: my_beta\n  family: mine\n  changes: beta 0\n"
        "  keys: [trainer.beta]\ntrainer:\n  beta: 0.0\n")
    assert combine("x", ["kl_off", "my_beta"], [str(tmp_path)]).tricks == ("kl_off", "my_beta")


# -- additivity against an independent computation ---------------------------------------
def interaction_by_hand(comb, singles, base, alpha=0.05):
    d = (np.asarray(comb) - base) - (np.asarray(singles) - base[:, None]).sum(axis=1)
    low, high = stats.t.interval(1 - alpha, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    return d.mean(), low, high


def planted(kind: str, seeds: int = 8):
    rng = np.random.default_rng(7)
    base = 0.55 + rng.normal(0, 0.03, seeds)               # the seed effect, shared
    a = base + 0.05 + rng.normal(0, 0.002, seeds)
    b = base + 0.03 + rng.normal(0, 0.002, seeds)
    effect = {"sum": 0.08, "overlap": 0.05, "interact": 0.12, "noisy": 0.08}[kind]
    sd = 0.03 if kind == "noisy" else 0.002
    comb = base + effect + rng.normal(0, sd, seeds)
    return base, a, b, comb


@pytest.mark.parametrize("kind,sentence", [
    ("sum", "adds up"), ("overlap", "less than the sum (the tricks overlap)"),
    ("interact", "more than the sum"), ("noisy", "cannot tell yet")])
def test_the_additivity_of_planted_csvs_through_the_report(kind, sentence, tmp_path):
    base, a, b, comb = planted(kind)
    rows = []
    for s in range(len(base)):
        for arm, v, parts in (("baseline", base, None), ("lr_schedule_cosine", a, None),
                              ("grad_norm_0.5", b, None),
                              ("mix", comb, "lr_schedule_cosine+grad_norm_0.5")):
            rows.append({"arm": arm, "seed": s, "eval/accuracy": v[s], "composed_of": parts})
    csv = tmp_path / "r.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    assert cli.main(["report", str(csv), "--out", str(tmp_path / "out"), "--no-figures"]) == 0
    (entry,) = json.loads((tmp_path / "out" / "report.json").read_text())["additivity"]
    mean, low, high = interaction_by_hand(comb, np.column_stack([a, b]), base)
    assert entry["composed_of"] == ["lr_schedule_cosine", "grad_norm_0.5"]
    assert entry["seeds"] == len(base) and entry["seeds_used"] == list(range(len(base)))
    assert entry["difference"] == pytest.approx(mean, abs=1e-12)
    assert (entry["ci_low"], entry["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    assert entry["sentence"].startswith(sentence), entry["sentence"]
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Do the tricks add up?" in md and f"**{entry['sentence']}**" in md
    if kind == "noisy":  # the seeds a t interval of this spread needs, searched here apart
        d = (comb - base) - ((a - base) + (b - base))
        sd, target = d.std(ddof=1), (MIN_EFFECT - abs(d.mean()) if abs(d.mean()) < MIN_EFFECT
                                     else abs(d.mean()))
        n = next(n for n in range(2, 10_000)
                 if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) <= target)
        assert entry["more_seeds"] == n - len(base)
        assert entry["sentence"] == f"cannot tell yet (+{n - len(base)} seeds)"


def test_additivity_uses_only_the_seeds_where_every_run_is():
    base, a, b, comb = planted("sum", seeds=3)
    r = additivity(comb[:1], np.column_stack([a, b])[:1], base[:1], MIN_EFFECT)
    assert r.seeds == 1 and r.ci_low is None and r.sentence == "cannot tell yet (+1 seeds)"


# -- the recipe of a report, and confirming it ---------------------------------------------
def plant_verdicts(report_path: Path, keep: list[str], drop: list[str]) -> None:
    """A report whose verdicts are set here: the situation the recipe is built from."""
    report = json.loads(report_path.read_text())
    stratum = report["strata"][0]
    stratum["recipe"] = {"keep": keep, "safe_to_drop": drop, "avoid": [], "untested": [],
                         "undecided": []}
    report_path.write_text(json.dumps(report))


@pytest.mark.slow  # it reads the smoke sweep, which trains
def test_recipe_prints_a_trick_file_and_refuses_a_report_with_nothing_to_do(
        smoke_sweep, tmp_path, capsys):
    _res, out = smoke_sweep
    sweep = tmp_path / "smoke"
    shutil.copytree(out / "smoke", sweep)
    plant_verdicts(sweep / "report.json", keep=["reward_clamp_task"], drop=["kl_off"])
    assert cli.main(["recipe", str(sweep)]) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(text)
    assert data["trick"]["id"] == "recipe_smoke"
    assert data["trick"]["composed_of"] == ["reward_clamp_task", "kl_off"]
    assert data["trainer"] == {"beta": 0.0} and "reward_clip" in data["hooks"]
    assert "#   hooks.reward_clip.low=${task.shaping.clip.low}" in text
    plant_verdicts(sweep / "report.json", keep=[], drop=["reward_clamp_task"])
    assert cli.main(["recipe", str(sweep)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "nothing to keep or drop" in line
    assert cli.main(["confirm", str(sweep)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "nothing to keep or drop" in line and not (sweep / "confirm").exists()


@pytest.mark.slow
def test_confirm_runs_only_the_recipe_and_reports_its_verdict_and_additivity(
        smoke_sweep, tmp_path, capsys):
    """A copy of the smoke sweep (its run cache beside it), its verdicts planted: the recipe
    (reward_clamp_task kept, kl_off safe to drop) runs on the baseline's two seeds; the
    baseline comes from the run cache; the report gives the recipe's verdict and its
    additivity, computed here again from the records."""
    _res, out = smoke_sweep
    root = tmp_path / "out"
    shutil.copytree(out, root)
    sweep = root / "smoke"
    plant_verdicts(sweep / "report.json", keep=["reward_clamp_task"], drop=["kl_off"])
    assert cli.main(["confirm", str(sweep)]) == 0
    err = capsys.readouterr().err
    assert "2 to train" in err, err[-2000:]  # the recipe's two seeds; the baseline is cached
    confirm = sweep / "confirm"
    recs = [read_record(p) for p in confirm.glob("runs/*/record.json")]
    by = {(r.arm, r.seed): r for r in recs}
    assert set(by) == {("baseline", 0), ("baseline", 1), ("recipe_smoke", 0),
                       ("recipe_smoke", 1)}
    assert by["baseline", 0].origin is not None and by["recipe_smoke", 0].origin is None
    cfg = by["recipe_smoke", 0].config
    assert cfg["trainer"]["beta"] == 0.0 and cfg["hooks"]["reward_clip"] is not None
    assert cfg["sweep_name"] == "smoke"  # the sweep's W&B group
    report = json.loads((confirm / "report.json").read_text())
    (arm,) = report["strata"][0]["arms"]
    assert arm["arm"] == "recipe_smoke" and arm["verdict"]
    (entry,) = report["additivity"]
    singles = {(r.arm, r.seed): r.metrics["eval/accuracy"]
               for r in (read_record(p) for p in sweep.glob("runs/*/record.json"))}
    base = np.array([singles["baseline", s] for s in (0, 1)])
    comb = np.array([by["recipe_smoke", s].metrics["eval/accuracy"] for s in (0, 1)])
    parts = np.array([[singles[t, s] for t in ("reward_clamp_task", "kl_off")] for s in (0, 1)])
    assert entry["observed"] == pytest.approx((comb - base).mean(), abs=1e-12)
    assert entry["predicted"] == pytest.approx((parts - base[:, None]).sum(1).mean(), abs=1e-12)
    assert (confirm / "conf" / "trick" / "recipe_smoke.yaml").is_file()


@pytest.mark.parametrize("args,words", [
    (["sweep=pair"], "pair=[A,B] names the two tricks"),
    (["sweep=pair", "pair=[kl_off,kl_0.1]"], "arms of one family (kl)"),
    (["sweep=pair", "pair=[kl_off]"], "allowed: two different tricks"),
])
def test_a_bad_pair_is_one_line(args, words, tmp_path, capsys):
    assert cli.main(["sweep", *args, f"out_root={tmp_path}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert words in line
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_pair_sweep_runs_the_2x2_factorial_and_reports_the_interaction(
        tiny_policy, tmp_path, capsys):
    assert cli.main(["sweep", "sweep=pair", "pair=[lr_schedule_cosine,grad_norm_0.5]",
                     "seed=0,1", "trainer.max_steps=2", "eval.every_steps=0", "run_cache=null",
                     f"out_root={tmp_path}"]) == 0
    recs = [read_record(p) for p in (tmp_path / "pair").glob("runs/*/record.json")]
    pair = "pair_lr_schedule_cosine__grad_norm_0.5"
    assert sorted({r.arm for r in recs}) == sorted(
        ["baseline", "lr_schedule_cosine", "grad_norm_0.5", pair])
    assert len(recs) == 8 and all(r.status == "completed" for r in recs)
    both = next(r for r in recs if r.arm == pair).config["trainer"]
    assert both["lr_scheduler_type"] == "cosine" and both["max_grad_norm"] == 0.5
    report = json.loads((tmp_path / "pair" / "report.json").read_text())
    (entry,) = report["additivity"]
    assert entry["arm"] == pair and entry["seeds_used"] == [0, 1]
    value = {(r.arm, r.seed): r.metrics["eval/accuracy"] for r in recs}
    d = [(value[pair, s] - value["baseline", s]) - (value["lr_schedule_cosine", s]
         - value["baseline", s]) - (value["grad_norm_0.5", s] - value["baseline", s])
         for s in (0, 1)]
    assert entry["difference"] == pytest.approx(np.mean(d), abs=1e-12)
