"""Chat: the reward is an independent reward model's score (`AutoModelForSequenceClassification`
by hub name or local path, one logit), batched on the training device. Held-out accuracy is
the win rate against the row's reference response under the same reward model; reward_mean
is the mean score.

The reward model reads the conversation the way its card and TRL score it: rendered with the
reward model's own chat template (a user turn with the prompt, an assistant turn with the
completion); only a reward model without a template gets `prompt + "\\n" + completion`, and
the run's record says so. Inputs longer than `task.max_rm_length` lose their start, not the
response. The pad token is set on the model's config as well as on its tokenizer (a reward
model whose config has none fails on a batch of more than one).

A reference field may hold text or a conversation (HuggingFaceH4/ultrafeedback_binarized's
`chosen`: a list of messages): the last assistant message is the reference. Without
`task.reward_model`, the embedded tiny reward model is used (built locally from a config,
randomly initialised, cached): it exercises the path, it knows nothing about chat."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablate.errors import UserError
from grpo_ablate.models import ensure_tiny_reward_model
from grpo_ablate.tasks.base import TextTask
from grpo_ablate.values import HUB_ID

RM_BATCH = 32
PLAIN = "the reward model has no chat template: it scored prompt + newline + completion as plain text"


def last_assistant(value) -> str:
    """A reference as text: the text itself, or the last assistant message of a conversation."""
    if isinstance(value, list):
        said = [m.get("content", "") for m in value if isinstance(m, dict)
                and m.get("role") == "assistant"]
        return str(said[-1]) if said else ""
    return str(value)


def check_reward_model(path) -> None:
    """task.reward_model: a sequence classifier (local: its config says so), or a hub id."""
    if path is None:
        return
    allowed = ("a sequence-classification checkpoint (hub id or local folder), or null for the "
               "embedded tiny reward model")
    path = str(path)
    local = Path(path).expanduser()
    if path.startswith(("/", ".", "~")) or local.exists():
        cfg_file = local / "config.json"
        if not cfg_file.is_file():
            raise UserError(f"task.reward_model={path}: no checkpoint there; allowed: {allowed}")
        archs = json.loads(cfg_file.read_text()).get("architectures") or []
        if not any(a.endswith("ForSequenceClassification") for a in archs):
            raise UserError(f"task.reward_model={path}: a {', '.join(archs) or 'model'}, not a "
                            f"sequence classifier; allowed: {allowed}")
    elif not HUB_ID.match(path):
        raise UserError(f"task.reward_model={path}: neither a local checkpoint nor a hub id; "
                        f"allowed: {allowed}")


class ChatTask(TextTask):
    name = "chat"

    @staticmethod
    def reward_kind(cfg: dict) -> str:
        return "score"  # a reward model's score: no range, no right answer
    _rm = None  # the reward model, loaded on first use

    @classmethod
    def check_config(cls, cfg: dict) -> None:
        check_reward_model(cfg.get("reward_model"))
        super().check_config(cfg)

    @staticmethod
    def fields_of(cfg: dict) -> tuple[str, ...]:
        return (cfg["prompt_field"], cfg["reference_field"])

    @staticmethod
    def problem_in(cfg: dict, row: dict) -> str | None:
        if not last_assistant(row[cfg["reference_field"]]).strip():
            return f"its {cfg['reference_field']!r} holds no reference response"
        return None

    def question(self, row: dict) -> str:
        return last_user(row[self.cfg["prompt_field"]])

    def gold(self, row: dict) -> str:
        return last_assistant(row[self.cfg["reference_field"]])

    def demonstration(self, row: dict) -> str:
        return self.gold(row)

    def notes(self) -> list[str]:
        if self._rm is not None and not self._rm[2]:
            return [PLAIN]
        return []

    # ------------------------------------------------------------------ the reward model
    def reward_model(self):
        """(model, tokenizer, has a chat template), loaded once."""
        if self._rm is None:
            import torch  # heavy: loaded where a reward is computed
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            path = self.cfg.get("reward_model") or str(ensure_tiny_reward_model(self))
            device = "cuda" if torch.cuda.is_available() else "cpu"
            model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
            tokenizer = AutoTokenizer.from_pretrained(path)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            if model.config.pad_token_id is None:  # batches of more than one need it
                model.config.pad_token_id = tokenizer.pad_token_id
            tokenizer.truncation_side = "left"  # a long prompt loses its start, not the answer
            self._rm = (model, tokenizer, bool(getattr(tokenizer, "chat_template", None)))
        return self._rm

    def rm_texts(self, rows: list[dict], completions: list) -> list[str]:
        """The exact texts the reward model reads."""
        _, tokenizer, templated = self.reward_model()
        out = []
        for r, c in zip(rows, completions, strict=True):
            prompt, answer = self.question(r), self.completion_text(c)
            if templated:
                out.append(tokenizer.apply_chat_template(
                    [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                    tokenize=False))
            else:
                out.append(prompt + "\n" + answer)
        return out

    def rm_scores(self, rows: list[dict], completions: list) -> list[float]:
        import torch  # heavy: loaded where a reward is computed

        model, tokenizer, templated = self.reward_model()
        texts = self.rm_texts(rows, completions)
        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(texts), RM_BATCH):
                # A rendered template holds its own special tokens: add none twice.
                enc = tokenizer(texts[i:i + RM_BATCH], return_tensors="pt", padding=True,
                                truncation=True, max_length=self.cfg["max_rm_length"],
                                add_special_tokens=not templated)
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


def last_user(value) -> str:
    """A prompt as text: the text itself, or the last user message of a conversation."""
    if isinstance(value, list):
        said = [m.get("content", "") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        return str(said[-1]) if said else ""
    return str(value)
