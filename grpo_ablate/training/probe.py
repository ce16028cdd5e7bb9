"""A trainer built from overrides and never run: the object the source-equation checks
plant one batch into (tests, scripts/check_duplicates.py), on the weights a run of the same
config starts from. Its gradient accumulation is set as Trainer's loop sets it for one
micro-batch."""

from __future__ import annotations

from grpo_ablate.training.trl_layer import AblationGRPOTrainer


def probe_trainer(overrides: list[str], output_dir: str) -> AblationGRPOTrainer:
    """The trainer a one-step run of these overrides would train, in train mode."""
    from transformers import AutoTokenizer

    from grpo_ablate.config import specs_for
    from grpo_ablate.models import resolve_model_path
    from grpo_ablate.tasks import get_task
    from grpo_ablate.training.train import build_trainer

    (spec,) = specs_for(["trainer.max_steps=1", "run_cache=null", *overrides], multirun=False)
    task = get_task(spec.config["task"])
    path = resolve_model_path(spec.config, task)
    tokenizer = AutoTokenizer.from_pretrained(path)
    task.use_tokenizer(tokenizer)
    trainer = build_trainer(spec, path, tokenizer, task, str(output_dir), [])
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; one micro-batch
    return trainer
