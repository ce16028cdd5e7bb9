"""Cross-key checks of a composed config, run before anything trains or is written: the
device and precision, vLLM, the batch and its hooks, where the processes and GPUs go, the
model and data paths, the chat template and the reward model. Each failure is one line
naming the key, the value and what is allowed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from grpo_ablate import hook_tricks
from grpo_ablate.config.layout import gpus_for
from grpo_ablate.errors import UserError
from grpo_ablate.runtime import cuda_available, visible_gpus
from grpo_ablate.tasks import reward_kind
from grpo_ablate.values import HUB_ID


def resolve_device(trainer: dict) -> None:
    """`null` device and precision follow the machine: a CUDA device when there is one,
    bf16 where that device supports it, fp32 otherwise (bf16 autocast on a CPU is emulated
    on many CPUs and several times slower). The resolved values are in the record. On a
    machine without a GPU driver this never imports torch."""
    if trainer.get("use_cpu") is None:
        trainer["use_cpu"] = not cuda_available()
    if trainer.get("bf16") is None:
        trainer["bf16"] = (not trainer["use_cpu"]) and _cuda_bf16()
    elif trainer["bf16"] and trainer["use_cpu"]:
        raise UserError("trainer.bf16=true: bf16 on the CPU is emulated and several times slower; "
                        "allowed on a CPU: false or null (auto)")


def _cuda_bf16() -> bool:
    import torch  # heavy: only reached on a machine with a CUDA device

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def check_vllm(trainer: dict) -> None:
    """vLLM is an optional extra and needs a CUDA device; nothing imports it unless it is on.
    TRL's correction for vLLM's sampling probabilities acts on vLLM's samples only."""
    if not trainer.get("use_vllm"):
        if trainer.get("vllm_importance_sampling_correction"):
            raise UserError("trainer.vllm_importance_sampling_correction=true: it corrects for "
                            "vLLM's sampling and acts only with trainer.use_vllm=true; allowed "
                            "here: false")
        return
    if trainer["use_cpu"]:
        raise UserError("trainer.use_vllm=true: vLLM generates on a CUDA device, and this run is "
                        "on the CPU; allowed: false here, or a machine with a GPU")
    need_package("vllm", "trainer.use_vllm=true: vllm is not installed; allowed: false, or "
                 "`pip install -e .[vllm]` (or `pip install 'grpo-ablate[vllm]'`) first")


# peft's LoraConfig defaults (r, lora_alpha, lora_dropout, target_modules; None: peft's own
# modules for the architecture), for the keys a model.lora block leaves out, as a peft user
# expects. tests/test_training_lora.py reads them from the installed peft.
LORA_DEFAULTS = {"r": 8, "alpha": 8, "dropout": 0.0, "target_modules": None}


def fill_lora(model: dict) -> None:
    """A model.lora block gets LoraConfig's defaults for the keys it does not set."""
    if isinstance(model.get("lora"), dict):
        model["lora"] = {**LORA_DEFAULTS, **model["lora"]}


def check_lora(model: dict) -> None:
    """LoRA needs the optional peft package (imported only when the run trains an adapter);
    its block's keys are filled by `fill_lora` first."""
    if model.get("lora") is None:
        return
    need_package("peft", "model.lora: peft is not installed; allowed: model.lora=null, or "
                 "`pip install 'grpo-ablate[lora]'` first")


def need_package(module: str, missing: str) -> None:
    """An optional package a setting needs, looked up without importing it."""
    if importlib.util.find_spec(module) is None:
        raise UserError(missing)


def check_relations(data: dict) -> None:
    tr = data["trainer"]
    gen_batch = tr["per_device_train_batch_size"] * (tr.get("steps_per_generation") or 1)
    if gen_batch % tr["num_generations"]:
        raise UserError(
            f"trainer.per_device_train_batch_size={tr['per_device_train_batch_size']}: must be a "
            f"multiple of trainer.num_generations={tr['num_generations']} (whole groups per batch)")
    check_loss_relations(data)
    problem = hook_tricks.check_hooks(data)  # each hook trick's own cross-key rules
    if problem:
        raise UserError(problem)
    problem = hook_tricks.reward_kind_problem(data.get("hooks") or {},
                                              reward_kind(data["task"]),
                                              data["task"].get("preset") or data["task"]["name"])
    if problem:
        raise UserError(problem)


# A loss TRL computes only at one importance-sampling level (TRL raises mid-build otherwise).
LOSS_LEVEL = {"luspo": "sequence", "vespo": "token"}


def check_loss_relations(data: dict) -> None:
    """The variants' own rules: a loss's importance-sampling level, and a reference to reset."""
    tr = data["trainer"]
    level = LOSS_LEVEL.get(tr["loss_type"])
    if level is not None and tr["importance_sampling_level"] != level:
        raise UserError(f"trainer.importance_sampling_level={tr['importance_sampling_level']} "
                        f"with trainer.loss_type={tr['loss_type']}: TRL computes that loss at "
                        f"one level; allowed: importance_sampling_level={level}")
    if tr.get("sync_ref_model"):
        if not tr["beta"]:
            raise UserError("trainer.sync_ref_model=true with trainer.beta=0: without the KL "
                            "there is no reference to reset; allowed: beta > 0, or "
                            "sync_ref_model=false")
        if data["model"].get("lora") is not None:
            raise UserError("trainer.sync_ref_model=true with model.lora: under LoRA the "
                            "reference is the adapter-disabled policy, which cannot be reset; "
                            "allowed: model.lora=null, or sync_ref_model=false")


# Trainer settings a checkpoint cannot resume exactly: what it would leave out or skip.
NOT_RESUMABLE = {
    "save_only_model": "a checkpoint would hold no optimizer, scheduler or RNG state",
    "ignore_data_skip": "a resumed run would train on other batches",
}
CHECKPOINTS_OFF = "checkpoint.every_steps=null checkpoint.every_minutes=null"


def check_resumable(data: dict) -> None:
    """While checkpoints are on, every setting must resume to the uninterrupted record;
    one that cannot is refused, with the way to run it without checkpoints."""
    ckpt, tr = data["checkpoint"], data["trainer"]
    if ckpt["every_steps"] is None and ckpt["every_minutes"] is None:
        return
    for key, why in NOT_RESUMABLE.items():
        if tr.get(key):
            raise UserError(f"trainer.{key}=true with checkpoints on: {why}; allowed: false, "
                            f"or no checkpoints ({CHECKPOINTS_OFF})")
    if tr.get("sync_ref_model") and data["launch"]["accelerate"] == "zero3":
        raise UserError("trainer.sync_ref_model=true with checkpoints on and launch.accelerate="
                        "zero3: the synced reference is saved whole, and ZeRO-3 shards it; "
                        f"allowed: launch.accelerate=ddp or zero2, or no checkpoints "
                        f"({CHECKPOINTS_OFF})")
    spg, accumulation = tr.get("steps_per_generation") or 1, tr["gradient_accumulation_steps"]
    if spg % accumulation:
        raise UserError(f"trainer.steps_per_generation={spg} with checkpoints on: not a multiple "
                        f"of trainer.gradient_accumulation_steps={accumulation}, so a save could "
                        "fall inside a generation's batches; allowed: a multiple of it, or no "
                        f"checkpoints ({CHECKPOINTS_OFF})")


def check_launch(data: dict) -> None:
    """A run on several processes: DeepSpeed where its config asks for it, a GPU per process,
    and EMA only where every process holds whole parameters."""
    launch, tr = data["launch"], data["trainer"]
    procs, engine = launch["processes"], launch["accelerate"]
    gpus = launch.get("gpus_per_job")
    if gpus is not None and gpus < procs:
        raise UserError(f"launch.gpus_per_job={gpus}: fewer GPUs than launch.processes={procs}; "
                        "allowed: at least one GPU per process, or null")
    if not tr["use_cpu"]:
        visible = visible_gpus()
        if gpus_for(data) > len(visible):
            raise UserError(f"launch: a run needs {gpus_for(data)} GPUs (launch.processes={procs}, "
                            f"launch.gpus_per_job={gpus}) and {len(visible)} are visible; "
                            f"allowed: at most {len(visible)}")
    if procs == 1 or engine == "ddp":
        return
    if tr["use_cpu"]:
        raise UserError(f"launch.accelerate={engine}: DeepSpeed ZeRO runs on CUDA devices, and "
                        "this run is on the CPU; allowed here: ddp")
    if importlib.util.find_spec("deepspeed") is None:
        raise UserError(f"launch.accelerate={engine}: deepspeed is not installed; allowed: ddp, "
                        "or `pip install deepspeed` first")


def check_paths(data: dict) -> None:
    model = data["model"]
    path = model.get("path")
    allowed = "a local checkpoint directory, a hub id (org/name), or null for the tiny policy"
    built = model["name"] == "tiny" or model.get("package") is not None
    if path == "???" or (path is None and not built):
        raise UserError(f"model.path: missing for model={model['name']}; allowed: {allowed}")
    if path is not None:
        path = str(path)
        looks_local = path.startswith(("/", ".", "~")) or Path(path).expanduser().exists()
        if looks_local and not (Path(path).expanduser() / "config.json").is_file():
            raise UserError(f"model.path={path}: no checkpoint there (no config.json); allowed: "
                            f"{allowed}")
        if not looks_local and not HUB_ID.match(path):
            raise UserError(f"model.path={path}: neither a local checkpoint nor a hub id; "
                            f"allowed: {allowed}")
    check_chat_template(data["task"], model)


def check_chat_template(task: dict, model: dict) -> None:
    """task.chat=true needs a checkpoint with a chat template: the embedded policy has none;
    a local checkpoint is looked at (a hub one when it loads)."""
    if task.get("chat") is not True:
        return
    path = model.get("path")
    if path is None and model.get("package") is None:
        raise UserError("task.chat=true: the embedded tiny policy has no chat template; allowed: "
                        "task.chat=auto or false, or model.path= a checkpoint with one")
    if path is None:
        return  # a packaged checkpoint: its template is looked at when it is converted
    local = Path(str(path)).expanduser()
    if local.is_dir():
        cfg_file = local / "tokenizer_config.json"
        has = (local / "chat_template.jinja").is_file() or (local / "chat_template.json").is_file()
        if not has and cfg_file.is_file():
            has = bool(json.loads(cfg_file.read_text()).get("chat_template"))
        if not has:
            raise UserError(f"task.chat=true: {path} has no chat template; allowed: "
                            "task.chat=auto or false, or a checkpoint with a chat template")
