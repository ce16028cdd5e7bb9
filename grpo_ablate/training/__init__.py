"""The training layer: one run on TRL's real GRPOTrainer, from a RunSpec to a RunRecord.

train.py        the run: trainer, callbacks, held-out evaluations, the record
trl_layer/      the one place touching TRL internals: the hook tricks (grpo_ablate/hook_tricks)
                wired in, resumable training, vLLM evaluation
callbacks.py    history, held-out evals (raw and EMA), divergence guard
start_eval.py   the start-of-run evaluation, computed once per seed and reused
faults.py       fault injection for the tests, attached from outside the trainer
run_state.py    what a run accumulates (what a checkpoint holds beside the Trainer's)
checkpoint.py   mid-run checkpoints and resuming from them
outcome.py      what a run leaves: record, stability, activity, budget, provenance
diagnostics.py  the review's monitoring rules over a run's history
wandb_logger.py one W&B run per run
lengths.py      `grpo-ablate lengths`: completion-length percentiles of the SFT policy
probe.py        a trainer built and never run: where the equation checks plant a batch

Importing this package is cheap; its modules load torch, transformers and TRL.
"""
