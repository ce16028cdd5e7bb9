"""Chat: the reward is an independent reward model's score (`AutoModelForSequenceClassification`
by hub name or local path, one logit), batched on the training device. Held-out accuracy is
the win rate against the row's reference response under the same reward model; reward_mean
is the mean score. Without `task.reward_model` the embedded tiny reward model is used (built
locally from a config, randomly initialised, cached): it exercises the path, it knows
nothing about chat."""

from __future__ import annotations

from grpo_ablate.models import ensure_tiny_reward_model
from grpo_ablate.tasks.base import TextTask

RM_BATCH = 32


class ChatTask(TextTask):
    name = "chat"

    def __init__(self, cfg: dict) -> None:
        super().__init__(cfg)
        self._rm = None

    @property
    def fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.cfg["prompt_field"], self.cfg["reference_field"])

    def question(self, row: dict) -> str:
        return str(row[self.cfg["prompt_field"]])

    def gold(self, row: dict) -> str:
        return str(row[self.cfg["reference_field"]])

    def demonstration(self, row: dict) -> str:
        return self.gold(row)

    # ------------------------------------------------------------------ the reward model
    def reward_model(self):
        if self._rm is None:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            path = self.cfg.get("reward_model")
            if not path:
                path = str(ensure_tiny_reward_model(self))
            device = "cuda" if torch.cuda.is_available() else "cpu"
            model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
            tokenizer = AutoTokenizer.from_pretrained(path)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._rm = (model, tokenizer)
        return self._rm

    def rm_scores(self, rows: list[dict], completions: list) -> list[float]:
        import torch

        model, tokenizer = self.reward_model()
        texts = [self.question(r) + "\n" + self.completion_text(c)
                 for r, c in zip(rows, completions, strict=True)]
        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(texts), RM_BATCH):
                enc = tokenizer(texts[i:i + RM_BATCH], return_tensors="pt", padding=True,
                                truncation=True, max_length=self.cfg["max_rm_length"])
                logits = model(**enc.to(model.device)).logits
                out += logits[:, 0].float().tolist()
        return out

    def reward(self, completions: list, row: list[dict], **_: object) -> list[float]:
        return self.rm_scores(row, completions)

    def scores(self, completions: list, rows: list[dict]) -> list[float]:
        """1.0 where the completion outscores the reference response (a win), else 0.0."""
        got = self.rm_scores(rows, completions)
        ref = self.rm_scores(rows, [self.gold(r) for r in rows])
        return [1.0 if g > r else 0.0 for g, r in zip(got, ref, strict=True)]

    def score(self, completion, row: dict) -> float:
        return self.scores([completion], [row])[0]
