"""Composition and validation: the catalog, one variable per trick, bad input."""

import pytest

from grpo_ablate.config import CONF_DIR, SWEEPS_DIR, compose, expand_jobs, specs_for, validate
from grpo_ablate.config.catalog import former_names, load_catalog
from grpo_ablate.errors import UserError

# The trick lists come from the trick files (trick.catalog), as the sweeps' ${tricks:...} do.
CATALOG = sorted(t["id"] for t in load_catalog()
                 if t.get("catalog", "review") == "review" and t["id"] != "baseline")
VARIANTS = sorted(t["id"] for t in load_catalog() if t.get("catalog") == "variants")
VLLM = sorted(t["id"] for t in load_catalog() if t.get("catalog") == "vllm")


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_catalog_matches_design():
    """The review's 24 arms (its twelve tricks at the levels it tried: a count the source
    fixes), the 2025-26 variants and the corrections for vLLM's sampling, one file each,
    every variant with its paper and claim; the sweep files run exactly them."""
    tricks = load_catalog()
    assert len(CATALOG) == 24 and VARIANTS and VLLM
    assert all(t.get("claim") and t.get("source") for t in tricks
               if t.get("catalog") in ("variants", "vllm"))
    # One file per trick; a former name is a registered choice, not a file.
    assert {p.stem for p in (CONF_DIR / "trick").glob("*.yaml")} == {t["id"] for t in tricks}
    assert len(former_names()) == 28
    for sweep in ("catalog", "demo"):
        jobs = expand_jobs([f"sweep={sweep}", "seed=0"])
        assert [o.split("=", 1)[1] for job in jobs for o in job if o.startswith("trick=")] == \
            ["baseline", *CATALOG]


def test_the_sweep_files_and_former_names_are_served_by_a_config_source_not_the_store():
    """Hydra deep-copies the ConfigStore once per group it lists (about 95 times for
    `--help`): the sweep files and the 28 former names are choices of grpo-ablate's config
    source on its app's search path, so the store holds none of them; the choices are the
    same, and any other Hydra app's search path is left as it was."""
    from hydra._internal.config_search_path_impl import ConfigSearchPathImpl
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from hydra.plugins.search_path_plugin import SearchPathPlugin

    from grpo_ablate.config.registry import packaged_choices

    compose(["sweep=smoke", "trick=no_kl"])  # both through the source
    assert not {"sweep", "trick"} & set(ConfigStore.instance().repo)
    assert {k for k in packaged_choices() if k.startswith("sweep/")} == \
        {f"sweep/{p.stem}.yaml" for p in SWEEPS_DIR.glob("*.yaml")}
    assert {k[len("trick/"):-len(".yaml")] for k in packaged_choices()
            if k.startswith("trick/")} == set(former_names())

    (plugin,) = [p for p in Plugins.instance().discover(SearchPathPlugin)
                 if p.__module__.startswith("hydra_plugins.grpo_ablate")]
    ours, other = ConfigSearchPathImpl(), ConfigSearchPathImpl()
    ours.append("main", f"file://{CONF_DIR}")
    other.append("main", "file:///app/conf")
    for path in (ours, other):
        plugin().manipulate_search_path(path)
    assert [(e.provider, e.path) for e in ours.get_path()][-1] == ("grpo-ablate", "grpo-ablate://")
    assert [(e.provider, e.path) for e in other.get_path()] == [("main", "file:///app/conf")]


def test_the_variants_sweep_runs_every_variant_and_the_arms_they_are_compared_with():
    jobs = expand_jobs(["sweep=variants", "seed=0"])
    arms = {o.split("=", 1)[1] for job in jobs for o in job if o.startswith("trick=")}
    against = {t["against"] for t in load_catalog() if t["id"] in VARIANTS and t.get("against")}
    assert arms == set(VARIANTS) | {"baseline"} | against


def test_the_vllm_sweep_runs_the_three_corrections_against_the_baseline_on_vllm():
    jobs = expand_jobs(["sweep=vllm_is", "seed=0"])
    assert [o.split("=", 1)[1] for job in jobs for o in job if o.startswith("trick=")] == \
        ["baseline", *VLLM]
    cfg = compose(["sweep=vllm_is", "trick=vllm_is_token_truncate"])
    assert cfg.trainer.use_vllm is True
    assert (cfg.trainer.vllm_importance_sampling_mode,
            cfg.trainer.vllm_importance_sampling_clip_max) == ("token_truncate", 2.0)
    base = compose(["sweep=vllm_is", "trick=baseline"]).trainer
    assert base.use_vllm is True and base.vllm_importance_sampling_correction is False


@pytest.mark.parametrize("trick", VLLM)
def test_a_vllm_correction_changes_exactly_its_declared_keys(trick):
    """As below, before the device is resolved (vLLM needs a CUDA machine)."""
    from omegaconf import OmegaConf

    def flat(overrides):
        return flatten(OmegaConf.to_container(compose(overrides), resolve=True))

    got, base = flat([f"trick={trick}"]), flat(["trick=baseline"])
    changed = {k for k in set(got) | set(base) if not k.startswith(("trick.", "hydra."))
               and got.get(k, "<absent>") != base.get(k, "<absent>")}
    assert changed <= set(compose([f"trick={trick}"]).trick["keys"])
    assert "trainer.vllm_importance_sampling_correction" in changed


@pytest.fixture(scope="module")
def baseline_flat():
    return flatten(specs_for([], multirun=False)[0].config)


@pytest.mark.parametrize("trick", CATALOG + VARIANTS)
def test_trick_changes_exactly_its_declared_keys(trick, baseline_flat):
    spec = specs_for([f"trick={trick}"], multirun=False)[0]
    flat = flatten(spec.config)
    premise = set(spec.config["trick"].get("premise") or [])
    # Its method's keys: the premise (what it acts on) it shares with its against arm.
    declared = [k for k in spec.config["trick"]["keys"] if k not in premise]
    against = spec.config["trick"].get("against")
    if against:  # one variable against the arm it is compared with, not the baseline
        baseline_flat = flatten(specs_for([f"trick={against}"], multirun=False)[0].config)
    assert declared, f"{trick} declares no keys"
    changed = {k for k in set(flat) | set(baseline_flat)
               if not k.startswith("trick.") and flat.get(k, "<absent>") != baseline_flat.get(k, "<absent>")}
    # A key changes when itself or a child of it changed; the batch size follows G by design.
    owner = {k: next((d for d in declared if k == d or k.startswith(d + ".")), None) for k in changed}
    derived = {"trainer.per_device_train_batch_size"} if "trainer.num_generations" in declared else set()
    assert {k for k, d in owner.items() if d is None} <= derived, owner
    assert {d for d in owner.values() if d} == set(declared)
    assert spec.arm == trick


def test_group_size_keeps_prompts_per_step_fixed():
    g4 = specs_for(["trick=group_size_4"], multirun=False)[0].config["trainer"]
    g32 = specs_for(["trick=group_size_32"], multirun=False)[0].config["trainer"]
    assert g4["per_device_train_batch_size"] // 4 == g32["per_device_train_batch_size"] // 32


def test_baseline_sets_moving_trl_defaults_explicitly():
    text = (CONF_DIR / "recipe" / "baseline.yaml").read_text()
    for key in ("loss_type", "scale_rewards", "beta", "num_iterations", "epsilon",
                "mask_truncated_completions", "top_p", "temperature", "max_grad_norm",
                "lr_scheduler_type", "num_generations", "bf16", "gradient_checkpointing", "use_cpu"):
        assert f"  {key}:" in text, key
    trainer = specs_for([], multirun=False)[0].config["trainer"]
    assert trainer["loss_type"] == "grpo"  # the review's objective, not TRL's default dapo


def test_device_and_precision_follow_the_machine():
    import torch

    trainer = specs_for(["trainer.use_cpu=null"], multirun=False)[0].config["trainer"]
    assert trainer["use_cpu"] is (not torch.cuda.is_available())
    if not torch.cuda.is_available():
        assert trainer["bf16"] is False and trainer["gradient_checkpointing"] is False
        with pytest.raises(UserError, match="trainer.bf16=true: bf16 on the CPU is emulated"):
            specs_for(["trainer.bf16=true"], multirun=False)


def test_budget_match_keeps_the_baselines_completions():
    base = specs_for([], multirun=False)[0].config["trainer"]
    g4 = specs_for(["trick=group_size_4", "budget.match=completions"], multirun=False)[0].config["trainer"]
    assert g4["per_device_train_batch_size"] == base["per_device_train_batch_size"]
    assert g4["per_device_train_batch_size"] // g4["num_generations"] == 16  # 4x the prompts
    reuse = specs_for(["trick=reuse_2x", "budget.match=completions"], multirun=False)[0]
    assert reuse.config["trainer"]["max_steps"] == 2 * base["max_steps"]
    plain = specs_for(["trick=group_size_4"], multirun=False)[0].config["trainer"]
    assert plain["per_device_train_batch_size"] == 16  # by default G changes the completions


@pytest.mark.parametrize("overrides,message", [
    (["model=hf"], "model.path: missing for model=hf"),
    (["model=hf", "model.path=org/name/extra"], "neither a local checkpoint nor a hub id"),
    (["budget.match=tokens"], "budget.match=\"tokens\": must be one of: none, completions"),
])
def test_bad_model_and_budget_values(overrides, message):
    with pytest.raises(UserError, match=message):
        specs_for(overrides, multirun=False)


def test_run_id_is_stable_and_seed_sensitive():
    a = specs_for(["seed=1"], multirun=False)[0]
    b = specs_for(["seed=1", "out_root=/elsewhere", "logger=wandb"], multirun=False)[0]
    c = specs_for(["seed=2"], multirun=False)[0]
    assert a.run_id == b.run_id != c.run_id
    assert a.run_dir != b.run_dir


def test_a_hooks_revision_renames_only_the_runs_that_turn_it_on(monkeypatch):
    """A hook whose computation changed for an unchanged config (HookTrick.revision): every
    run with it on gets a new id, every other run keeps its id, whatever is imported."""
    import dataclasses
    import json
    import subprocess
    import sys

    from grpo_ablate import hook_tricks
    from grpo_ablate.config.identity import run_id

    def configs() -> dict[str, dict]:
        return {arm: specs_for([f"trick={arm}", "seed=0"], multirun=False)[0].config
                for arm in ("adv_passk_4", "adv_clip_2", "kl_off")}

    now = {arm: run_id(c) for arm, c in configs().items()}
    assert hook_tricks.revisions({"hooks": {"adv_passk": {"k": 4}, "adv_clip": 2.0}}) \
        == {"adv_passk": 1}
    # A process that imported only the identity (not the hook's module) names the same runs.
    fresh = subprocess.run(
        [sys.executable, "-c", "import json, sys; from grpo_ablate.config.identity import run_id;"
         " print(json.dumps({a: run_id(c) for a, c in json.load(sys.stdin).items()}))"],
        input=json.dumps(configs()), capture_output=True, text=True, check=True)
    assert json.loads(fresh.stdout) == now
    monkeypatch.setitem(hook_tricks.HOOKS, "adv_passk",
                        dataclasses.replace(hook_tricks.HOOKS["adv_passk"], revision=2))
    later = {arm: run_id(c) for arm, c in configs().items()}
    assert later["adv_passk_4"] != now["adv_passk_4"]
    assert (later["adv_clip_2"], later["kl_off"]) == (now["adv_clip_2"], now["kl_off"])


def test_smoke_sweep_expands_like_hydra():
    jobs = expand_jobs(["sweep=smoke"])
    assert len(jobs) == 6
    assert jobs[0] == ["trick=baseline", "seed=0", "sweep=smoke"]
    jobs = expand_jobs(["sweep=smoke", "seed=5"])  # command line wins over the sweep file
    assert len(jobs) == 3 and all("seed=5" in j for j in jobs)


def test_validate_rejects_added_top_level_key():
    cfg = compose(["+foo=1"])
    with pytest.raises(UserError, match="foo=1: unknown key"):
        validate(cfg)


def test_small_checkpoint_preset_scales_the_recipe_down(tiny_policy):
    (spec,) = specs_for(["model=hf_small", f"model.path={tiny_policy}"], multirun=False)
    tr = spec.config["trainer"]
    assert tr["per_device_train_batch_size"] == 64 and tr["num_generations"] == 8
    assert tr["max_completion_length"] == 256 and spec.config["model"]["path"] == tiny_policy
    with pytest.raises(UserError, match="model.path: missing for model=hf_small"):
        specs_for(["model=hf_small"], multirun=False)


def test_local_launcher_caps_concurrency_to_the_machine():
    import os

    cfg = compose(["launcher=local"])
    assert cfg.hydra.sweeper.max_batch_size == os.cpu_count()
    assert cfg.hydra.launcher._target_.endswith("LocalLauncher")
    joblib = compose(["launcher=joblib"])
    assert joblib.hydra.launcher.n_jobs == os.cpu_count()


def _runs_part(cfg) -> dict:
    from omegaconf import OmegaConf

    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "hydra"}


@pytest.mark.slow  # every job of two catalogs through Hydra: seconds each
@pytest.mark.parametrize("overrides", [["sweep=catalog", "seed=0"],
                                       ["sweep=demo", "launcher=joblib", "seed=4"],
                                       ["sweep=smoke", "trick=baseline,ema_0.9", "seed=0,1",
                                        "adaptive.rungs=[2,3]", "out_root=/tmp/x"]])
def test_the_composer_gives_every_job_what_hydra_composes(overrides, tmp_path, monkeypatch):
    """One Hydra composition per set of group choices plus the plain key=value overrides set
    on a copy, fresh and from the compose cache, equals composing each job through Hydra
    (every trick of the catalog; two seeds in the last case)."""
    from grpo_ablate.config.compose import Composer

    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "cache"))
    jobs = expand_jobs(overrides)
    want = [_runs_part(compose(job)) for job in jobs]
    fresh, cached = Composer(), Composer()
    assert [_runs_part(fresh(job)) for job in jobs] == want  # fills the cache
    assert list((tmp_path / "cache" / "compose").glob("*.yaml"))
    assert [_runs_part(cached(job)) for job in jobs] == want  # from the cache


def test_the_compose_cache_follows_an_edited_config_file(tmp_path, monkeypatch):
    from grpo_ablate.config.compose import Composer

    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "mine" / "trick").mkdir(parents=True)
    trick = tmp_path / "mine" / "trick" / "kl_x.yaml"
    search = f"hydra.searchpath=[file://{tmp_path / 'mine'}]"

    def beta() -> float:
        composer = Composer()
        composer([search, "trick=baseline", "seed=1"])  # learns which keys are groups
        return _runs_part(composer([search, "trick=kl_x", "seed=3"]))["trainer"]["beta"]

    for value in (0.2, 0.3):
        trick.write_text("# @package _global_\ntrick:\n  id: kl_x\n  family: kl\n  changes: x\n"
                         f"  prior: x\n  keys: [trainer.beta]\ntrainer:\n  beta: {value}\n")
        assert beta() == value and beta() == value  # composed, then from the cache


def test_validate_leaves_its_input_alone_and_resolve_makes_the_changes():
    """validate() checks; resolve() is where a null device and a matched budget are set,
    on a copy."""
    import copy

    from omegaconf import OmegaConf

    from grpo_ablate.config.compose import resolve

    data = {k: v for k, v in OmegaConf.to_container(
        compose(["trick=group_size_4", "budget.match=completions"]), resolve=True).items()
        if k != "hydra"}
    before = copy.deepcopy(data)
    spec = validate(data)
    assert data == before
    assert spec.config == resolve(before)
    assert spec.config["trainer"]["per_device_train_batch_size"] != \
        before["trainer"]["per_device_train_batch_size"]


@pytest.mark.slow  # composes each of the 28 former names through Hydra
def test_every_former_trick_name_still_works_with_a_notice_and_the_same_runs(capsys):
    """Renamed tricks (`<family>_<value>`, `<family>_off`): the old name composes to the
    new trick, says so in one line, and keeps the run id the old name gave (trick.formerly),
    so earlier sweeps and run-cache entries stay valid."""
    import copy

    from grpo_ablate.config import run_id
    from grpo_ablate.config.compose import _ANNOUNCED, Composer

    renamed = former_names()
    assert len(renamed) == 28 and renamed["no_kl"] == "kl_off"
    _ANNOUNCED.clear()
    composer = Composer()
    for old, new in renamed.items():
        (was,) = specs_for([f"trick={old}"], multirun=False, composer=composer)
        (now,) = specs_for([f"trick={new}"], multirun=False, composer=composer)
        assert was.arm == new and was.config == now.config and was.run_id == now.run_id
        as_before = copy.deepcopy(now.config)
        as_before["trick"] = {"id": old}  # what the run id hashed before the rename
        assert run_id(as_before) == now.run_id
    err = capsys.readouterr().err
    assert "notice: trick=no_kl is now trick=kl_off; the old name still works" in err
    assert err.count("notice: trick=") == len(renamed)


def test_a_tricks_stated_baseline_value_is_the_baseline_recipes():
    """A trick file's `changes:` that says "(baseline V)" says the baseline recipe's value of
    the key it changes, so a recipe change cannot leave the catalog's words stale."""
    import re

    from grpo_ablate.config.catalog import load_catalog
    from grpo_ablate.config.schema import get

    (baseline,) = specs_for(["trick=baseline"], multirun=False)
    stated = [(t["id"], t["keys"][0], m.group(1)) for t in load_catalog()
              if (m := re.search(r"\(baseline ([^)]+)\)", t["changes"]))]
    assert len(stated) >= 10
    for arm, key, value in stated:  # the first key is the one the words are about
        have = get(baseline.config, key)
        assert str(have) == value or (isinstance(have, int | float) and float(value) == have), \
            (arm, key, have, value)


def test_hydra_s_private_api_is_imported_by_one_module():
    """How Hydra's basic sweeper crosses a sweep's values (hydra._internal) is read in
    config/compose.py alone: `grpo-ablate sweep`'s pre-flight and grpo-ablate's sweeper both
    take a sweep's jobs from there."""
    from pathlib import Path

    import grpo_ablate

    root = Path(grpo_ablate.__file__).resolve().parent.parent
    users = sorted(str(p.relative_to(root)) for package in ("grpo_ablate", "hydra_plugins")
                   for p in (root / package).rglob("*.py") if "hydra._internal" in p.read_text())
    assert users == ["grpo_ablate/config/compose.py"]
