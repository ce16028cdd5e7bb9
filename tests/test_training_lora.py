"""LoRA runs (model.lora -> TRL's peft_config): the config's refusals, the identity of runs
without LoRA unchanged, and on the embedded tiny policy (slow) a run that trains the adapter
alone, leaves the base weights bit-identical, holds no reference copy (the reference is the
adapter-disabled model, equal to the checkpoint) and averages only the adapter under EMA."""

import json

import pytest

from grpo_ablate import cli
from grpo_ablate.config import model_label, run_id, specs_for
from grpo_ablate.config.review import recipe_departures

LORA = "model.lora={r:4,alpha:8,dropout:0.0,target_modules:[q_proj,v_proj]}"
FEW = ["trainer.max_steps=2", "eval.every_steps=0", "eval.sampled_k=1", "run_cache=null"]


@pytest.mark.parametrize(("override", "message"), [
    ("model.lora.r=0", "model.lora.r=0: must be an integer >= 1"),
    ("model.lora={r:0,alpha:8,dropout:0.0,target_modules:all-linear}",
     "model.lora.r=0: must be an integer >= 1"),
    ("model.lora=true", "model.lora=true: model.lora is a block of keys, not a value"),
    ("model.lora={r:4,alpha:8,dropout:1.5,target_modules:all-linear}",
     "model.lora.dropout=1.5: must be a number in [0, 1)"),
    ("model.lora={r:4,alpha:8,dropout:0.0,target_modules:[]}",
     "model.lora.target_modules=[]: must be a list of module names"),
    ("+model.lora.rank=4", "model.lora.rank=4: unknown key; allowed under model.lora: alpha,"),
])
def test_a_bad_lora_block_is_one_line_and_nothing_trains(override, message, tmp_path, capsys):
    assert cli.main(["run", override, f"out_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "adhoc").exists()


def test_one_lora_key_alone_is_that_key_of_a_block_and_the_rest_peft_s_defaults():
    """`model.lora.r=4` where the model has no block is `model.lora={r:4}` (the same run);
    on a LoRA preset it changes the rank alone; a sweep over it gives one run per rank; and a
    plain Hydra app (`python -m grpo_ablate.app`) reads it the same way."""
    import subprocess
    import sys

    from grpo_ablate.command_line import parse_hydra_line

    def specs(*words: str, multirun: bool = False):
        return specs_for(parse_hydra_line(list(words)).overrides, multirun=multirun)

    (alone,), (block,) = specs("model.lora.r=4"), specs("model.lora={r:4}")
    assert alone.run_id == block.run_id and alone.config["model"]["lora"]["r"] == 4
    (preset,) = specs("model=smollm2-135m-lora")
    (ranked,) = specs("model=smollm2-135m-lora", "model.lora.r=4")
    assert ranked.config["model"]["lora"] == {**preset.config["model"]["lora"], "r": 4}
    swept = specs("model.lora.r=4,8", "model.lora.alpha=16", multirun=True)
    assert [(s.config["model"]["lora"]["r"], s.config["model"]["lora"]["alpha"])
            for s in swept] == [(4, 16), (8, 16)]
    shown = subprocess.run([sys.executable, "-m", "grpo_ablate.app", "model.lora.r=4", "--cfg",
                            "job"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "  lora:\n    r: 4\n" in shown.stdout


def test_the_keys_a_lora_block_leaves_out_take_peft_s_own_defaults():
    """`model.lora={r:4}` is LoraConfig(r=4): alpha, dropout and target_modules are the
    installed peft's defaults (target_modules None: peft's own for the architecture)."""
    import dataclasses

    from peft import LoraConfig

    from grpo_ablate.config.checks import LORA_DEFAULTS

    peft_defaults = {f.name: f.default for f in dataclasses.fields(LoraConfig)}
    ours = {"r": "r", "alpha": "lora_alpha", "dropout": "lora_dropout",
            "target_modules": "target_modules"}
    assert LORA_DEFAULTS == {k: peft_defaults[v] for k, v in ours.items()}
    (partial,) = specs_for(["model.lora={r:4}"], multirun=False)
    (whole,) = specs_for(["model.lora={r:4,alpha:8,dropout:0.0,target_modules:null}"],
                         multirun=False)
    assert partial.config["model"]["lora"] == {**LORA_DEFAULTS, "r": 4}
    assert partial.run_id == whole.run_id and model_label(partial.config) == "tiny+lora-r4"
    (preset,) = specs_for(["model=smollm2-135m-lora", "model.lora.r=4"], multirun=False)
    assert preset.config["model"]["lora"]["target_modules"] == "all-linear"  # the preset's


def test_lora_reaches_the_identity_the_label_and_the_departures_and_null_changes_nothing():
    (plain,) = specs_for([], multirun=False)
    (lora,) = specs_for([LORA], multirun=False)
    without_key = {**plain.config, "model": {k: v for k, v in plain.config["model"].items()
                                             if k != "lora"}}
    assert plain.config["model"]["lora"] is None
    assert plain.run_id == run_id(without_key)  # records from before model.lora keep their ids
    assert lora.run_id != plain.run_id
    assert model_label(plain.config) == "tiny" and model_label(lora.config) == "tiny+lora-r4"
    assert any(d.startswith("model.lora=r4") for d in recipe_departures(lora.config))
    assert not any(d.startswith("model.lora") for d in recipe_departures(plain.config))
    (preset,) = specs_for(["model=smollm2-135m-lora"], multirun=False)
    assert preset.config["model"]["lora"]["r"] == 16 and preset.config["model"]["name"] == "smollm2-135m"
    lr = preset.config["trainer"]["learning_rate"]
    (full,) = specs_for(["model=smollm2-135m"], multirun=False)
    assert 10 <= lr / full.config["trainer"]["learning_rate"] <= 100


@pytest.mark.slow
def test_a_lora_run_trains_the_adapter_alone_against_the_adapter_disabled_base(tiny_policy,
                                                                               tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ablate.hook_tricks.ema import WeightEMA
    from grpo_ablate.tasks import get_task
    from grpo_ablate.training.callbacks import HistoryCallback
    from grpo_ablate.training.train import build_trainer

    (spec,) = specs_for([LORA, *FEW, f"out_root={tmp_path}"], multirun=False)
    task = get_task(spec.config["task"])
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy)
    task.use_tokenizer(tokenizer)
    trainer = build_trainer(spec, tiny_policy, tokenizer, task, str(tmp_path / "t"),
                            [HistoryCallback()])
    assert trainer.ref_model is None  # no second copy: TRL disables the adapter instead
    model = trainer.model
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    ema = WeightEMA(model, 0.9)
    assert set(ema.shadow) == trainable  # EMA covers the adapter only
    trainer.train()
    assert trainer.state.global_step == 2

    base = AutoModelForCausalLM.from_pretrained(tiny_policy)
    base_weights = dict(base.named_parameters())
    for name, param in model.get_base_model().named_parameters():
        if "lora_" not in name:
            plain = name.replace(".base_layer", "")
            assert torch.equal(param.detach(), base_weights[plain].detach()), name
    moved = [n for n, p in model.named_parameters() if "lora_B" in n and p.abs().sum() > 0]
    assert moved  # lora_B starts at zero: the adapter did train

    batch = tokenizer(["7+8=", "12+30="], return_tensors="pt", padding=True)
    with torch.no_grad():
        with model.disable_adapter():
            reference = model(**batch).logits
        adapted = model(**batch).logits
        expected = base(**batch).logits
    assert torch.equal(reference, expected)  # the reference log-probs are the base model's
    assert not torch.equal(adapted, expected)


@pytest.mark.slow
def test_a_lora_run_is_recorded_under_its_own_stratum(tiny_policy, tmp_path):
    assert cli.main(["run", LORA, "trick=ema_0.9", *FEW, f"out_root={tmp_path}"]) == 0
    (path,) = (tmp_path / "adhoc").glob("runs/*/record.json")
    record = json.loads(path.read_text())
    assert record["status"] == "completed", record["error"]
    assert record["model"] == "tiny+lora-r4" and record["config"]["model"]["lora"]["r"] == 4
    assert record["metrics"]["eval/accuracy"] is not None


@pytest.mark.slow
def test_a_sweep_with_and_without_lora_gets_a_verdict_table_for_each(tiny_policy, tmp_path):
    lora = "{r:4,alpha:8,dropout:0.0,target_modules:[q_proj,v_proj]}"
    assert cli.main(["sweep", "sweep=smoke", f"out_root={tmp_path}", "trick=baseline,kl_off",
                     f"model.lora=null,{lora}", "trainer.max_steps=2", "run_cache=null"]) == 0
    report = json.loads((tmp_path / "smoke" / "report.json").read_text())
    strata = {st["model"]: [a["arm"] for a in st["arms"]] for st in report["strata"]}
    assert strata == {"tiny": ["kl_off"], "tiny+lora-r4": ["kl_off"]}
