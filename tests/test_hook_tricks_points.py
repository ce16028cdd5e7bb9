"""The hook points (grpo_ablate/hook_tricks/) and the variants added through them,
each against an independent computation of its paper's formula on a planted batch: the
Pass@k advantage by enumerating every k-subset, W-REINFORCE's weights, and Clip-Cov's and
KL-Cov's policy losses as verl writes them (`compute_policy_loss_clip_cov`,
`compute_policy_loss_kl_cov`), their gradients compared. Each variant is two files, its
trick YAML and its module; no other file of the package names it."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
import torch

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.hook_tricks import (
    BUILT_IN,
    HOOKS,
    StepBatch,
    TokenBatch,
    adv_passk,
    adv_positive,
    clip_cov,
    hooks_at,
    import_modules,
    kl_cov,
    measure_of,
)

PACKAGE = Path(__file__).resolve().parents[1] / "grpo_ablate"
# The variants added as hook modules (not the registry's built-in ones): hook -> its arm,
# from the trick files that name one module of their own (derived: a new one is checked
# here without editing this test).
NEW = {m.rsplit(".", 1)[-1]: t["id"] for t in load_catalog() for m in t.get("modules") or []
       if len(t["modules"]) == 1 and m.startswith("grpo_ablate.hook_tricks.")
       and m not in BUILT_IN}


def declaring_exclusion(hook: str) -> set[str]:
    """The modules of the hooks that declare they cannot run beside `hook` (`excludes`)."""
    return {f"hook_tricks/{h.name}.py" for h in HOOKS.values() if hook in dict(h.excludes)}


def names_in_code(path: Path, name: str) -> bool:
    """Whether a file names `name` as code does: a Python name or a string that is exactly it
    (not prose in a docstring or comment), or a YAML key."""
    import io
    import re
    import tokenize

    text = path.read_text()
    if path.suffix == ".yaml":
        return re.search(rf"^\s*{re.escape(name)}:", text, re.M) is not None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == name:
            return True
        if tok.type == tokenize.STRING and tok.string.strip("\"'") in (name, f"hooks.{name}",
                                                                    f"grpo_ablate.hook_tricks.{name}"):
            return True
    return False


@pytest.mark.parametrize("hook", sorted(NEW))
def test_a_variant_is_its_yaml_and_its_module_and_nothing_else_names_it(hook):
    naming = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*")
                    if p.is_file() and p.suffix in (".py", ".yaml") and names_in_code(p, hook))
    # Other trick files may set it (a premise), and a design may name an arm that has the
    # hook's name among its default arms (add_one's tricks): neither is a list to keep.
    arms = {t["id"] for t in load_catalog()}
    allowed = {f"conf/trick/{NEW[hook]}.yaml", f"hook_tricks/{hook}.py",
               *declaring_exclusion(hook)}
    naming = [n for n in naming if not n.startswith("conf/trick/")
              and not (hook in arms and n == "launch/topology.py")]
    assert sorted({*naming, f"conf/trick/{NEW[hook]}.yaml"}) == sorted(allowed)
    import_modules([f"grpo_ablate.hook_tricks.{hook}"])
    assert HOOKS[hook].point() in ("advantages", "token_advantages", "loss_term", "drop_samples") \
        or HOOKS[hook].prompt_filter is not None


def test_the_hooks_of_a_point_run_in_their_declared_order():
    on = {"kl_cov": {"ratio": 0.1, "coef": 0.1}, "clip_cov": {"ratio": 0.1, "lb": 1, "ub": 5},
          "adv_passk": None, "adv_positive": {"weight": 0.1, "correct_at": 1.0}}
    assert [h.name for h, _ in hooks_at("token_advantages", on)] == ["clip_cov", "kl_cov"]
    assert [h.name for h, _ in hooks_at("advantages", on)] == ["adv_positive"]  # null is off
    assert measure_of(HOOKS["clip_cov"]) == ("clip_cov", "tokens whose advantage clip_cov changed")
    assert measure_of(HOOKS["adv_passk"]) == ("adv_passk",
                                              "completions whose advantage adv_passk changed")


def enumerated_passk(right: list[bool], k: int) -> list[float]:
    """The Pass@k advantage by its definition: every k-subset is one sample whose reward is
    1 if any member is right; a completion's advantage is the mean, over the subsets it is
    in, of the subset's reward standardised over all subsets."""
    subsets = list(combinations(range(len(right)), k))
    reward = {s: float(any(right[i] for i in s)) for s in subsets}
    mean = sum(reward.values()) / len(subsets)
    std = (sum((r - mean) ** 2 for r in reward.values()) / len(subsets)) ** 0.5
    if std == 0:
        return [0.0] * len(right)
    return [sum((reward[s] - mean) / std for s in subsets if i in s)
            / sum(1 for s in subsets if i in s) for i in range(len(right))]


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_the_pass_at_k_advantage_is_the_enumerated_subsets_mean(k):
    g = torch.Generator().manual_seed(k)
    rewards = torch.rand(6 * 8, generator=g) * 2 - 0.5   # groups of 8, about 1/4 of them right
    rewards[8:16] = 1.0                                   # a group all right
    rewards[16:24] = -1.0                                 # a group all wrong
    rewards[24:32] = torch.tensor([1.0] + [0.2] * 7)      # one right
    got = adv_passk.passk_advantages(rewards, 8, k, correct_at=1.0)
    right = (rewards >= 1.0).tolist()
    expected = [a for g0 in range(0, 48, 8) for a in enumerated_passk(right[g0:g0 + 8], k)]
    assert torch.allclose(got, torch.tensor(expected), atol=1e-6)
    assert (got[8:24] == 0).all() and (got[24] > 0) and (got[25:32] < 0).all()


def psr_nsr_weighted(scores: list[float], weight: float) -> list[float]:
    """The authors' W-REINFORCE advantage (RLVR-Decomposed, compute_psr_nsr_outcome_advantage,
    advantage=weighted), written out here: the return is the outcome score; a right sample's
    (score 1) is multiplied by the positive weight, a wrong one's (score 0) has 1 taken off."""
    out = []
    for score in scores:
        advantage = score
        if score == 1:
            advantage *= weight
        elif score == 0:
            advantage -= 1
        out.append(advantage)
    return out


def test_w_reinforce_is_the_authors_weighted_psr_nsr_advantage():
    """On 0/1 rewards, with groups all right, all wrong and mixed: +0.1 and -1, whatever the
    group's mean (no baseline, no std); the group z-score it replaces is not consulted."""
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    z = torch.randn(12)  # TRL's advantage, which W-REINFORCE replaces
    got = HOOKS["adv_positive"].advantages(StepBatch(z, rewards, 4, 0),
                                           {"weight": 0.1, "correct_at": 1.0})
    assert torch.allclose(got, torch.tensor(psr_nsr_weighted(rewards.tolist(), 0.1)))
    assert (got[:4] > 0).all() and (got[4:8] < 0).all()  # uniform groups keep a gradient
    assert torch.equal(adv_positive.w_reinforce_advantages(rewards, 0.0, 1.0)[:4], torch.zeros(4))


def planted_tokens(seed: int = 0, rows: int = 6, width: int = 9):
    """Advantages per sequence, off-policy log-probs (ratios up to e^±1) and ragged masks."""
    g = torch.Generator().manual_seed(seed)
    adv = (torch.randn(rows, 1, generator=g) * 1.5).expand(rows, width).clone()
    logp = (torch.rand(rows, width, generator=g) * -6).requires_grad_(True)
    old = logp.detach() + (torch.rand(rows, width, generator=g) - 0.5) * 2
    mask = torch.ones(rows, width)
    for r in range(rows):
        mask[r, width - r:] = 0
    return adv, logp, old, mask


def trl_token_loss(adv, logp, old, mask, eps_low=0.2, eps_high=0.2):
    """TRL's clipped surrogate for a token-level ratio loss, token mean (loss_type dapo)."""
    coef = torch.exp(logp - old)
    per_token = -torch.min(coef * adv, coef.clamp(1 - eps_low, 1 + eps_high) * adv)
    return (per_token * mask).sum() / mask.sum()


def verl_clip_cov_loss(old, logp, adv, mask, ratio, lb, ub, cliprange, generator):
    """verl's compute_policy_loss_clip_cov, written out here (token-mean aggregation)."""
    ratio_t = torch.exp(logp - old)
    pg1 = -adv * ratio_t
    pg2 = -adv * torch.clamp(ratio_t, 1 - cliprange, 1 + cliprange)
    clip_by_origin = (pg2 > pg1) & (mask > 0)
    masked_mean = lambda x: (x * mask).sum() / mask.sum()  # noqa: E731
    cov = (adv - masked_mean(adv)) * (logp - masked_mean(logp.detach()))
    cov = cov.detach().clone()
    cov[mask == 0] = -torch.inf
    cov[clip_by_origin] = -torch.inf
    clip_num = max(int(ratio * mask.sum().item()), 1)
    idx = torch.nonzero((cov < ub) & (cov > lb) & (mask > 0))
    idx = idx[torch.randperm(len(idx), generator=generator)[:min(clip_num, len(idx))]]
    corr = torch.ones_like(adv)
    corr[idx[:, 0], idx[:, 1]] = 0
    return (torch.maximum(pg1, pg2) * corr * mask).sum() / mask.sum(), int((corr == 0).sum())


def verl_kl_cov_loss(old, logp, adv, mask, ratio, coef):
    """verl's compute_policy_loss_kl_cov, written out here (token-mean aggregation)."""
    log_ratio = logp - old
    pg = -adv * torch.exp(log_ratio)
    pg_kl = pg + coef * log_ratio.abs()
    valid = mask > 0
    flat_idx = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
    a, lp = adv[valid].detach(), logp[valid].detach()
    cov = (a - a.mean()) * (lp - lp.mean())
    top = flat_idx[torch.topk(cov, max(1, int(len(cov) * ratio))).indices]
    rows, cols = top // adv.shape[1], top % adv.shape[1]
    pg = pg.clone()
    pg[rows, cols] = pg_kl[rows, cols]
    return (pg * mask).sum() / mask.sum()


def grad_of(loss, logp):
    (g,) = torch.autograd.grad(loss, logp)
    return g


@pytest.mark.parametrize("ratio, lb, ub", [(0.05, 0.0, 5.0), (1.0, 1.0, 5.0), (0.2, -3.0, 0.5)])
def test_clip_cov_drops_what_verls_rule_drops(ratio, lb, ub):
    adv, logp, old, mask = planted_tokens()
    batch = TokenBatch(adv, logp, old, mask, 0.2, 0.2, torch.Generator().manual_seed(7))
    new = HOOKS["clip_cov"].token_advantages(batch, {"ratio": ratio, "lb": lb, "ub": ub})
    verl, dropped = verl_clip_cov_loss(old, logp, adv, mask, ratio, lb, ub, 0.2,
                                       torch.Generator().manual_seed(7))
    assert 0 < dropped == int(((new == 0) & (adv != 0)).sum())
    expected = grad_of(verl, logp)
    assert torch.allclose(grad_of(trl_token_loss(new, logp, old, mask), logp), expected,
                          atol=1e-7)
    assert not torch.allclose(grad_of(trl_token_loss(adv, logp, old, mask), logp), expected,
                              atol=1e-7)


@pytest.mark.parametrize("ratio", [0.0002, 0.1, 0.5])
def test_kl_cov_has_the_gradient_of_verls_penalised_loss(ratio):
    adv, logp, old, mask = planted_tokens(seed=3)
    batch = TokenBatch(adv, logp, old, mask, 1e6, 1e6, torch.Generator())
    new = HOOKS["kl_cov"].token_advantages(batch, {"ratio": ratio, "coef": 0.1})
    penalised = kl_cov.kl_cov_tokens(batch, ratio)
    assert int(penalised.sum()) == max(1, int(mask.sum() * ratio))
    ours = grad_of(trl_token_loss(new, logp, old, mask, 1e6, 1e6), logp)
    verl = grad_of(verl_kl_cov_loss(old, logp, adv, mask, ratio, 0.1), logp)
    assert torch.allclose(ours, verl, atol=1e-7)
    plain = grad_of(trl_token_loss(adv, logp, old, mask, 1e6, 1e6), logp)
    assert not torch.allclose(plain, verl, atol=1e-7)
    # On-policy the penalty has no gradient: nothing changes.
    on = TokenBatch(adv, logp, logp.detach(), mask, 1e6, 1e6, torch.Generator())
    assert torch.equal(HOOKS["kl_cov"].token_advantages(on, {"ratio": ratio, "coef": 0.1}), adv)


def test_clip_cov_draws_from_the_generator_it_is_given():
    adv, logp, old, mask = planted_tokens(seed=5)

    def dropped(seed):
        batch = TokenBatch(adv, logp, old, mask, 0.2, 0.2, torch.Generator().manual_seed(seed))
        return (clip_cov.clip_cov_keep(batch, 0.05, -10.0, 10.0) == 0).nonzero().tolist()

    assert dropped(1) == dropped(1) and dropped(1) != dropped(2)


def test_the_baseline_turns_off_every_built_in_hook_and_nothing_else():
    """The recipe's `hooks:` block holds the built-in hooks' off values, one per module of the
    registry's import list; a variant's hook is set by its own trick file alone."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.hook_tricks import BUILT_IN

    hooks = specs_for([], multirun=False)[0].config["hooks"]
    assert sorted(hooks) == sorted(m.rsplit(".", 1)[1] for m in BUILT_IN)
    assert not any(HOOKS[name].active(value) for name, value in hooks.items())


BUILT_IN_NAMES = ["reward_clip", "length_penalty", "filter_low_reward", "global_adv_norm",
                  "ema", "dynamic_sampling", "soft_overlong"]


@pytest.mark.parametrize("hook", BUILT_IN_NAMES)
def test_a_built_in_hook_is_named_by_its_module_its_yamls_and_the_import_list_alone(hook):
    """Python files of the package that name a built-in hook trick (as a word): its own
    module and the registry, whose import list names it; YAML files aside (its trick files,
    the recipe's off value, a task's value for it in reward units)."""
    import re

    word = re.compile(rf"\b{hook}\b")
    naming = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                    if word.search(p.read_text()))
    # task.shaping.length_penalty is a task's key (its value for the trick, in reward units).
    task_keys = ["config/schema.py"] if hook == "length_penalty" else []
    assert naming == sorted([f"hook_tricks/{hook}.py", "hook_tricks/__init__.py", *task_keys,
                             *declaring_exclusion(hook)])
    assert f"grpo_ablate.hook_tricks.{hook}" in __import__(
        "grpo_ablate.hook_tricks", fromlist=["BUILT_IN"]).BUILT_IN
