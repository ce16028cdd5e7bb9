"""Checks that need a CUDA device (marker `gpu`; `make test` skips them). Run them on a GPU
machine: `pytest -m gpu`. The trainer is imported inside the tests: on a machine without
CUDA (the GPU check's rehearsal) the skips are reported without importing TRL."""

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")]


def steps(rows):
    return [(r["step"], r.get("loss"), r.get("reward"), r.get("kl")) for r in rows if "loss" in r]


def test_evaluations_do_not_change_gpu_training(tiny_policy):
    """Evaluation reseeds the RNG to sample; every CUDA generator must be restored after it."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.training.train import train_one

    common = ["trainer.use_cpu=false", "trainer.max_steps=6", "seed=3"]
    (with_evals,) = specs_for([*common, "eval.every_steps=2"], multirun=False)
    (without,) = specs_for([*common, "eval.every_steps=0"], multirun=False)
    rec_a, rows_a = train_one(with_evals)
    rec_b, rows_b = train_one(without)
    assert rec_a.status == rec_b.status == "completed", (rec_a.error, rec_b.error)
    assert with_evals.config["trainer"]["use_cpu"] is False
    assert steps(rows_a) == steps(rows_b)


@pytest.mark.parametrize("vllm", [False, True])
def test_a_tiny_qwen2_checkpoint_trains_on_cuda_in_bf16(tmp_path, vllm):
    """The real-checkpoint path on a GPU: BPE tokenizer, chat template, bf16 (and vLLM
    colocate when the vllm extra is installed)."""
    import importlib.util

    from tiny_qwen import SMALL_HF, build_tiny_qwen2

    from grpo_ablate import cli
    from grpo_ablate.records import read_record

    if vllm and importlib.util.find_spec("vllm") is None:
        pytest.skip("the vllm extra is not installed")
    ckpt = build_tiny_qwen2(tmp_path / "qwen")
    extra = ["trainer.use_vllm=true", "trainer.vllm_mode=colocate"] if vllm else []
    assert cli.main(["run", *SMALL_HF, f"model.path={ckpt}", f"out_root={tmp_path}",
                     "trainer.use_cpu=null", "trainer.bf16=null", *extra]) == 0
    (path,) = tmp_path.glob("adhoc/runs/*/record.json")
    record = read_record(path)
    assert record.status == "completed", record.error
    assert record.config["trainer"]["use_cpu"] is False
    assert record.config["trainer"]["bf16"] is torch.cuda.is_bf16_supported()
