"""Hook tricks together, on TRL's real trainer: the values of a step's rows (rewards, the
filter's keep-mask) travel with those rows, so a trick that samples more rounds (dynamic
sampling) and one that drops rows (low-reward filtering) act on the rows the step trains on."""

import pytest
import torch
from omegaconf import OmegaConf
from test_training_variants import trainer_for

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
                           "+hooks.filter_low_reward={threshold:0.25,start:0.0,end:1.0,advantage_over:group}"],
                          tmp_path)
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


def test_the_pair_table_decides_every_pair_and_a_refused_pair_is_one_line(tmp_path, capsys):
    """Every pair of hook-trick arms, and each with each TRL-native arm, combines or is
    refused in one line naming both; the declared refusals are among them, and a run that
    composes a refused pair another way (overrides, `sweep=pair`) meets the same rule: one
    line, exit 2, nothing written."""
    from grpo_ablate import cli
    from grpo_ablate.config.pairs import COMBINES, arms_by_kind, pair_table

    hooks, natives = arms_by_kind()
    rows = pair_table()
    assert [(a, b) for a, b, _ in rows] == \
        [*((a, b) for i, a in enumerate(hooks) for b in hooks[i + 1:]),
         *((a, b) for a in hooks for b in natives)]
    verdicts = {(a, b): v for a, b, v in rows}
    assert all("\n" not in v for v in verdicts.values())
    refused = {pair: v for pair, v in verdicts.items() if v != COMBINES}
    assert "cannot both be on" in refused[("adv_passk_4", "filter_low_reward_all")]
    assert "token-level clipped-ratio" in refused[("clip_cov", "loss_sapo")]
    assert "one family" in refused[("filter_low_reward_all", "filter_low_reward_early")]
    assert verdicts[("dynamic_sampling_on", "filter_low_reward_all")] == COMBINES
    assert verdicts[("kl_cov", "temperature_0.6")] == COMBINES  # 1.0e6 read as Hydra reads it
    # The plain road (the resolved baseline with the pair's settings written in) decides as
    # the full one (composed and resolved again): every refused pair, and every 7th allowed.
    from grpo_ablate.config.compose import compose
    from grpo_ablate.config.pairs import Baseline, pair_verdict

    composed = compose(["trick=baseline"])
    base = Baseline.of(OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"]))
    sample = [*refused, *[p for p in verdicts if p not in refused][::7]]
    assert {p: pair_verdict(*p, base, full=True) for p in sample} == \
        {p: verdicts[p] for p in sample}
    assert base.plain({"trainer.beta": 0.0}) is not None
    assert base.plain({"trainer.num_generations": 8}) is None  # the batch layout reads G
    # A refused pair of hook tricks of each reason, as `sweep=pair` composes it; and a pair
    # that no trick file holds, composed by overrides.
    by_reason = {}
    for (a, b), v in refused.items():
        if b in hooks:
            by_reason.setdefault(v.split(": ", 1)[-1].split("; allowed")[0], (a, b))
    hook_refusals = list(by_reason.values())
    assert len(hook_refusals) >= 4
    for args in (*(["sweep", "sweep=pair", f"pair=[{a},{b}]"] for a, b in hook_refusals),
                 ["run", "trick=clip_cov", "+hooks.kl_cov={ratio:0.1,coef:0.1}"]):
        capsys.readouterr()
        assert cli.main([*args, f"out_root={tmp_path}"]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("cannot both be on" in err[0] or "one family" in err[0]), err
    assert not list(tmp_path.rglob("record.json"))


# Where every hook trick has something to act on, on any CPU: planted rewards (uniform
# groups for dynamic sampling, varied ones with positive advantages, rewards below the
# filter's threshold and outside the clip), 2-token completions (the overlong tricks),
# updates large enough that a reused batch is off-policy (KL-Cov), a KL guard out of reach.
# Whose acting the policy's own generations decide, and a test builds elsewhere: Clip-Cov's
# covariance window (tests/test_training_variants.py), the prompt-level loss's token counts per group
# (1 or 2 tokens here; tests/test_hook_tricks_catalog_2026.py plants them).
# Acting decided by the policy (each tested on a planted batch elsewhere): Clip-Cov's window,
# the prompt-level weights' token counts, the KL to the reference's spread within a group,
# DPPO's probability changes past its bound; and by the data: no-positive-resampling acts
# from the second epoch on.
POLICY_DECIDES = ("clip_cov", "prompt_loss", "kl_in_reward", "no_positive_resampling",
                  "dppo_tv")
ACTS = ["trainer.learning_rate=2e-3", "trainer.max_completion_length=2", "trainer.max_steps=2",
        "eval.every_steps=0", "eval.sampled_k=1", "guard.kl_abort=1e12", "run_cache=null"]


# Runs of several hook tricks, each two of them an allowed pair, hold every allowed pair: each
# pair trains together in about a quarter of the runs of one run per pair. A run of several
# may leave one trick nothing to act on (a filter that drops every row the loss terms would
# act on, a reward transform that takes the one advantage past the clip away): each pair of
# such a run then trains apart, and in a run of two both act. A pair where one trick leaves
# the other nothing to act on, by the first's formula, trains apart from the start.
RUN_SIZE = 4
APART = {("adv_maxrl", "adv_clip_2")}


def covering_runs(arms: list[str], allowed: list[tuple[str, str]],
                  apart: set[tuple[str, str]], size: int) -> list[tuple[str, ...]]:
    """Runs of at most `size` arms, each two of a run an allowed pair not in `apart`, that with
    one run per pair in `apart` hold every allowed pair. Greedy: a run begins with the first
    pair not yet held and grows by the arm that adds the most pairs not yet held."""
    together = {frozenset(p) for p in allowed if p not in apart}
    left = [frozenset(p) for p in allowed if p not in apart]
    runs: list[tuple[str, ...]] = []
    while left:
        run = sorted(left[0], key=arms.index)
        while len(run) < size:
            gains = {c: sum(frozenset((c, r)) in left for r in run) for c in arms
                     if c not in run and all(frozenset((c, r)) in together for r in run)}
            best = max(gains, key=lambda c: gains[c], default=None)  # first arm of the most
            if best is None or gains[best] == 0:
                break
            run.append(best)
        runs.append(tuple(run))
        left = [p for p in left if not p <= set(run)]
    return [*runs, *sorted(apart)]


def pairs_of(run: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(run) for b in run[i + 1:]]


def test_every_pair_of_hook_tricks_that_combines_trains_and_both_act(tmp_path):
    """Each allowed pair of hook-trick arms trains together (runs of up to four tricks, each
    as one combined trick file, that hold every allowed pair) beside each arm alone, 2 steps,
    one seed; a trick that acts alone acts in every pair, and the pair's record says so for
    both: in a run of several where each acts, or, where one of several did not, in a run
    of the two. Clip-Cov is the exception: whether a token's covariance term falls in its
    window is the policy's log-probs (tests/test_training_variants.py builds that); EMA and global
    normalisation act by construction (their measure is the config value)."""
    import json

    from planted import planted, planted_groups

    from grpo_ablate import cli
    from grpo_ablate.config.combination import combine
    from grpo_ablate.config.pairs import COMBINES, arms_by_kind, pair_table
    from grpo_ablate.hook_tricks import HOOKS, measure_of

    hooks, _ = arms_by_kind()
    allowed = [(a, b) for a, b, v in pair_table(natives=False) if v == COMBINES]
    assert APART <= set(allowed)
    runs = covering_runs(hooks, allowed, APART, RUN_SIZE)
    held = {frozenset(p) for run in runs for p in pairs_of(run)}
    assert held == {frozenset(p) for p in allowed}  # every allowed pair, and none refused
    assert len(runs) < len(allowed) / 3
    folder = tmp_path / "conf" / "trick"
    folder.mkdir(parents=True)
    records: dict[str, dict] = {}

    def train(sweep: str, arms: list[str], runs: list[tuple[str, ...]]) -> None:
        for run in runs:
            (folder / f"{'__'.join(run)}.yaml").write_text(
                combine("__".join(run), list(run)).trick_yaml())
        assert cli.main(["sweep", "--config-dir", str(tmp_path / "conf"),
                         f"trick={','.join(arms)}", "seed=0", f"out_root={tmp_path}",
                         f"sweep_name={sweep}", *ACTS, planted(planted_groups(16)),
                         "+against"]) == 0  # the arms each is compared with: the report's
        records.update({r["arm"]: r for r in (json.loads(p.read_text()) for p in
                                              (tmp_path / sweep).glob("runs/*/record.json"))})
        assert set(arms) <= set(records)
        assert [a for a, r in records.items() if r["status"] != "completed"] == []

    train("pairs", [*hooks, *("__".join(run) for run in runs)], runs)

    def measures(arm: str) -> list[str]:
        keys = [k.removeprefix("hooks.") for k in records[arm]["config"]["trick"]["keys"]]
        return [measure_of(HOOKS[k])[0] for k in keys if k in HOOKS
                and k not in POLICY_DECIDES and measure_of(HOOKS[k])[0] is not None]

    acting = {arm: [m for m in measures(arm) if records[arm]["activity"]["details"].get(m)]
              for arm in hooks}
    # Alone, every arm with a measure acts here but the length penalty: at 2 tokens every
    # completion has one length, and its measure (groups whose advantages it moved) is 0.
    assert {arm for arm, m in acting.items() if m} == set(hooks) - {
        "clip_cov", "ema_0.9", "adv_norm_global", "length_penalty_task", "loss_prompt_level",
        "kl_in_reward", "no_positive_resampling", "dppo_tv"}

    def silent(run: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        details = records["__".join(run)]["activity"]["details"]
        return {(*run, m): details.get(m) for a in run for m in acting[a] if not details.get(m)}

    masked = [run for run in runs if len(run) > 2 and silent(run)]
    apart = sorted({p for run in masked for p in pairs_of(run)} - {r for r in runs if len(r) == 2})
    train("pairs_apart", ["__".join(p) for p in apart], apart)
    # In a run of two, both act, but where an estimator's advantages of the planted groups
    # stay inside the clip's [-2, 2], so the clip has nothing to act on: MaxRL's (at most
    # 1.91) and W-REINFORCE's (+0.1 or -1 by its definition, whatever the rewards).
    import torch

    from grpo_ablate.hook_tricks.maxrl import maxrl_advantages

    planted_maxrl = maxrl_advantages(torch.tensor(planted_groups(16)), 16).nan_to_num(nan=0.0)
    assert planted_maxrl.abs().max() < 2
    twos = [r for r in runs if len(r) == 2] + apart
    assert {k: v for run in twos for k, v in silent(run).items()} == \
        {("adv_maxrl", "adv_clip_2", "adv_clip"): 0.0,
         ("adv_positive_0.1", "adv_clip_2", "adv_clip"): 0.0}
    assert len(runs) + len(apart) < len(allowed) / 2
