"""Checks that need a CUDA device (marker `gpu`; `make test` skips them). Run them on a GPU
machine: `pytest -m gpu`."""

import pytest
import torch

from grpo_ablate.config import specs_for
from grpo_ablate.train import train_one

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")]


def steps(rows):
    return [(r["step"], r.get("loss"), r.get("reward"), r.get("kl")) for r in rows if "loss" in r]


def test_evaluations_do_not_change_gpu_training(tiny_policy):
    """Evaluation reseeds the RNG to sample; every CUDA generator must be restored after it."""
    common = ["trainer.use_cpu=false", "trainer.max_steps=6", "seed=3"]
    (with_evals,) = specs_for([*common, "eval.every_steps=2"], multirun=False)
    (without,) = specs_for([*common, "eval.every_steps=0"], multirun=False)
    rec_a, rows_a = train_one(with_evals)
    rec_b, rows_b = train_one(without)
    assert rec_a.status == rec_b.status == "completed", (rec_a.error, rec_b.error)
    assert with_evals.config["trainer"]["use_cpu"] is False
    assert steps(rows_a) == steps(rows_b)
