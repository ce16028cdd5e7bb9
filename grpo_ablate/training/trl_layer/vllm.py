"""TRL's colocated vLLM engine, seeded by the run (not by the process index alone), and the
held-out evaluation generating on it with its own sampling settings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trl import GRPOTrainer

from grpo_ablate.training.trl_layer.compat import VLLM_SAMPLING


def vllm_engine_seed(run_seed: int, tp_group: int) -> int:
    """The colocated vLLM engine's seed: the run's seed and the process's tensor-parallel
    group (one stream per group: the processes of a group must sample alike, and groups
    sample the same prompt's completions, so they must not)."""
    return (run_seed * 1_000_003 + tp_group) % 2**31


@contextmanager
def seeded_vllm_engine(run_seed: int) -> Iterator[None]:
    """While TRL builds its colocated vLLM engine, `LLM(seed=...)` gets vllm_engine_seed in
    place of TRL's process index. Not a per-request seed: colocate mode sends each prompt
    num_generations times with n=1, so a fixed one would make a group's completions equal."""
    import trl.generation.vllm_generation as engine_module

    original = getattr(engine_module, "LLM", None)
    if original is None:  # vLLM is not installed: TRL refuses use_vllm itself
        yield
        return

    def llm(*args: Any, seed: int = 0, **kwargs: Any):
        return original(*args, seed=vllm_engine_seed(run_seed, seed), **kwargs)

    engine_module.LLM = llm
    try:
        yield
    finally:
        engine_module.LLM = original


class VllmEvaluation(GRPOTrainer):
    """Held-out evaluation on the engine training generates with (trainer.use_vllm)."""

    def vllm_texts(self, texts: list[str], max_new_tokens: int,
                   temperature: float | None) -> list[str]:
        """Completions of `texts` from TRL's vLLM engine, for the weights now in self.model
        (the EMA weights while they are swapped in): pushed to the engine first, and marked
        stale after, so the next training generation pushes the training weights back."""
        engine = self.vllm_generation
        saved = {name: getattr(engine, name) for name in VLLM_SAMPLING}
        engine.sync_weights()
        engine.temperature = 0.0 if temperature is None else temperature  # 0: greedy in vLLM
        engine.top_p, engine.top_k, engine.min_p, engine.repetition_penalty = 1.0, 0, 0.0, 1.0
        engine.max_completion_length, engine.generation_kwargs = max_new_tokens, {}
        try:
            ids = [self.processing_class(t)["input_ids"] for t in texts]
            _, completion_ids, _, _ = engine.generate(prompts=ids, images=None, num_generations=1)
        finally:
            for name, value in saved.items():
                setattr(engine, name, value)
            self._last_loaded_step = -1  # TRL's own mark: the engine's weights are stale
        return self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
