"""The TRL layer: the one place that touches TRL's internals.

`AblationGRPOTrainer` (trainer.py) is TRL's real `GRPOTrainer` plus what grpo-ablate adds,
one concern a module:

compat.py    the TRL version and the private methods and behaviour relied on, checked at
             every trainer's start (tests/test_training_builtin_hooks.py fails when they move)
rows.py      what the reward point makes of a sampled batch (`ScoredRows`: its shaped
             rewards and the keep-masks of the hooks that drop samples), which travels with
             those rows; merging the groups of several sampling rounds, rows and values alike
dispatch.py  the hook dispatcher: at each hook point (grpo_ablate/hook_tricks) it calls the
             functions of the hook tricks a run turns on, in their declared order
resumable.py the data order as a pure function of seed and epoch, and mid-run checkpoints
             (the synced reference's weights beside each) that resume bit for bit
prompt_filter.py  a prompt filter's history (each prompt's pass rate, each epoch's prompts
             left out), kept in the run state so a resumed epoch samples as before
vllm.py      the run's seed for TRL's colocated vLLM engine, and held-out evaluation on it

The points sit in TRL's private methods: the rewards and dropped samples in
`_calculate_rewards`, the extra generation rounds and the advantages after TRL's group
z-score in `_generate_and_score_completions`, and the per-token advantages inside the loss,
between `_get_per_token_logps_and_entropies` and the moment `_compute_loss` reads them;
dropped rows leave the loss through the public `compute_loss`. A value that belongs to a
step's rows is handed from the override that makes it to the one that reads it with those
rows (rows.py), never left on the trainer for a later call to find. With every hook off the
trainer computes exactly what the bare one computes (tests/test_training_runs.py). TRL is pinned in
pyproject.toml.

TRL behaviour relied on (checked by compat.py and tests/test_training_builtin_hooks.py):
- `_calculate_rewards` returns the (completions x reward functions) matrix gathered over
  all processes, before the group mean is taken, once for each sampled batch;
- a completion whose rewards are all NaN is left out of its group's mean and std and gets
  advantage 0 (TRL's "unscorable" rule): a dropping hook that acts before the advantage
  (zero-variance filtering; low-reward filtering with advantage_over=kept) uses it, so the
  kept samples' advantages are computed over the kept samples only;
- `_compute_loss` computes the policy's log-probs before it reads `inputs["advantages"]`, and
  takes per-token [rows, tokens] advantages as they are (the loss point);
- the Trainer sets each epoch on its data loader's sampler (`set_epoch`) before iterating;
- `_compute_loss` reads its KL coefficient from `self.beta` at call time, and the sampled
  batch carries `ref_per_token_logps` when beta is not 0 (the KL in the reward);
- `_compute_loss` reads its clip range from `self.epsilon_low` and `self.epsilon_high` at
  call time (a trust region in place of the ratio clip, DPPO).
"""

from grpo_ablate.training.trl_layer.compat import TESTED_TRL, check_trl_compat
from grpo_ablate.training.trl_layer.prompt_filter import PROMPT_INDEX, with_prompt_index
from grpo_ablate.training.trl_layer.rows import ScoredRows, merge_groups, merge_scored
from grpo_ablate.training.trl_layer.trainer import AblationGRPOTrainer

__all__ = ["PROMPT_INDEX", "TESTED_TRL", "AblationGRPOTrainer", "ScoredRows", "check_trl_compat",
           "merge_groups", "merge_scored", "with_prompt_index"]
