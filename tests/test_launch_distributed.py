"""Runs on several processes (`launch.processes=N` under `accelerate launch`, 2 CPU processes
with gloo here) and runs pinned to their own GPUs (`launch.gpus_per_job`).

The two-process tests start real processes through accelerate's real launcher (torchrun);
only the GPU reservation is tested with GPU ids as plain strings, since no GPU exists here."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from wandb_files import read_run

from grpo_ablate.cli import main
from grpo_ablate.config import specs_for
from grpo_ablate.config.paths import ACCELERATE_DIR
from grpo_ablate.config.schema import ACCELERATE_CONFIGS
from grpo_ablate.errors import UserError
from grpo_ablate.hook_tricks.global_adv_norm import apply_global_adv_norm
from grpo_ablate.launch.distributed import free_port, launch_command, reserve_gpus

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


# ---------------------------------------------------------------------------- layout
def test_processes_split_the_step_and_keep_the_groups_per_step():
    from grpo_ablate.config import completions_per_step

    (one,) = specs_for([], multirun=False)
    (two,) = specs_for(["launch.processes=2"], multirun=False)
    (four,) = specs_for(["launch.processes=4"], multirun=False)
    assert [completions_per_step(s.config) for s in (one, two, four)] == [64, 64, 64]
    assert [s.config["trainer"]["per_device_train_batch_size"] for s in (one, two, four)] == \
        [64, 32, 16]
    assert len({one.run_id, two.run_id, four.run_id}) == 3  # each process samples its own share
    (one_pinned,) = specs_for(["launch.gpus_per_job=1", "launch.port=29999"], multirun=False)
    assert one_pinned.run_id == one.run_id  # where a run goes is not what it computes
    (big,) = specs_for(["model=qwen2.5-7b", "task=math", "launch.processes=8"], multirun=False)
    tr = big.config["trainer"]
    assert (tr["per_device_train_batch_size"], tr["gradient_accumulation_steps"]) == (32, 4)
    assert completions_per_step(big.config) == 64 * 16


@pytest.mark.parametrize("overrides, message", [
    (["launch.processes=3"], "launch.processes=3: the 4 groups of a step"),
    (["launch.processes=0"], "launch.processes=0"),
    (["launch.accelerate=fsdp"], 'launch.accelerate="fsdp": must be one of: ddp, zero2, zero3'),
    (["launch.processes=2", "launch.accelerate=zero3"], "launch.accelerate=zero3: DeepSpeed"),
    (["launch.processes=2", "launch.gpus_per_job=1"], "launch.gpus_per_job=1: fewer GPUs"),
])
def test_bad_launch_settings_are_one_clear_error(overrides, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        specs_for(overrides, multirun=False)


def test_a_run_that_needs_more_gpus_than_are_visible_is_refused_before_training(monkeypatch):
    # No GPU exists here: CUDA_VISIBLE_DEVICES lists the ones a GPU node would show.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    gpu = ["trainer.use_cpu=false"]
    (spec,) = specs_for([*gpu, "launch.processes=2"], multirun=False)
    assert spec.config["launch"]["processes"] == 2
    with pytest.raises(UserError, match="a run needs 4 GPUs .* and 2 are visible"):
        specs_for([*gpu, "launch.processes=4"], multirun=False)
    with pytest.raises(UserError, match="a run needs 3 GPUs"):
        specs_for([*gpu, "launch.gpus_per_job=3"], multirun=False)


def test_every_shipped_accelerate_config_is_one_the_launcher_reads():
    from accelerate.commands.config.config_args import load_config_from_file

    assert sorted(p.stem for p in ACCELERATE_DIR.glob("*.yaml")) == sorted(ACCELERATE_CONFIGS)
    kinds = {name: load_config_from_file(str(ACCELERATE_DIR / f"{name}.yaml"))
                       .distributed_type.name for name in ACCELERATE_CONFIGS}
    assert kinds == {"ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED"}
    (spec,) = specs_for(["launch.processes=2"], multirun=False)
    cmd = launch_command(spec.config, Path("spec.json"), Path("work"))
    assert cmd[cmd.index("--num_processes") + 1] == "2"
    assert cmd[cmd.index("--config_file") + 1].endswith("ddp.yaml")


# ---------------------------------------------------------------------------- GPU slots
def test_gpu_reservations_are_disjoint_and_wait_for_a_free_gpu(tmp_path):
    gpus = ["0", "1", "2", "3"]
    with reserve_gpus(2, gpus, tmp_path) as a, reserve_gpus(2, gpus, tmp_path) as b:
        assert len(a) == len(b) == 2 and not set(a) & set(b)
        got: list[list[str]] = []

        def third():
            with reserve_gpus(1, gpus, tmp_path, wait_s=0.05) as c:
                got.append(c)

        waiter = threading.Thread(target=third)
        waiter.start()
        time.sleep(0.3)
        assert not got  # all four held: the third run waits
    waiter.join(5)
    assert got and got[0][0] in gpus
    with pytest.raises(UserError, match="launch.gpus_per_job=5: only 4 GPU"):
        with reserve_gpus(5, gpus, tmp_path):
            pass


# ---------------------------------------------------------------------------- 2 processes
def launch_probe(tmp_path) -> dict:
    out = tmp_path / "probe.json"
    res = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
         str(ACCELERATE_DIR / "ddp.yaml"), "--num_processes", "2", "--num_machines", "1",
         "--main_process_port", str(free_port()), str(ROOT / "tests" / "two_process_probe.py"), str(out)],
        capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_two_processes_compute_the_tricks_over_the_whole_batch(tmp_path):
    got = launch_probe(tmp_path)
    assert got["world"] == 2
    advantages, keep = torch.tensor(got["advantages"]), torch.tensor(got["keep"])
    # Global advantage normalisation: the same numbers as one process over the whole batch...
    whole = apply_global_adv_norm(advantages)
    assert torch.allclose(torch.tensor(got["normalised"]), whole, atol=1e-6)
    # ...which is not what each process would get from its own half.
    halves = torch.cat([apply_global_adv_norm(h) for h in advantages.chunk(2)])
    assert not torch.allclose(halves, whole, atol=1e-3)
    # The filter's per-sequence loss: the mean over the kept sequences of both processes.
    per_sequence = torch.arange(24, dtype=torch.float32)
    assert got["ddp_loss"] == pytest.approx(per_sequence[keep].mean().item(), rel=1e-6)
    # Held-out evaluation: each prompt generated once, by one process, back in order.
    assert got["completions"] == [str(i + 1) for i in range(13)]


@pytest.mark.slow
def test_two_process_runs_write_one_record_each_and_a_failing_process_fails_only_its_run(
        tmp_path, tiny_policy):
    """A multirun of two 2-process runs, one with a fault on its second process: that run is
    `failed` with the process's error (its peer ended, not left waiting), the other writes one
    valid record and one W&B run; the sweep goes on."""
    # The global advantage normalisation (adv_norm_global's setting) gathered across the
    # processes, set on the baseline: a multirun of one arm compares nothing.
    common = ["trainer.max_steps=4", "eval.every_steps=0", f"out_root={tmp_path}",
              "trick=baseline", "hooks.global_adv_norm=true"]
    t0 = time.perf_counter()
    # The sweep in this process (its runs' processes are started by `accelerate launch`).
    code = main(["run", "-m", "launch.processes=2", "logger=wandb", *common,
                 "faults.reward_raises_on_rank=1", "faults.reward_raises_at_step=2,null"])
    took = time.perf_counter() - t0
    assert code == 0
    from grpo_ablate.records import read_record

    paths = list((tmp_path / "adhoc" / "runs").glob("*/record.json"))
    by_fault = {read_record(p).config["faults"]["reward_raises_at_step"]: p for p in paths}
    assert set(by_fault) == {2, None}
    failed, two = read_record(by_fault[2]), read_record(by_fault[None])
    assert failed.status == "failed"
    assert failed.error.startswith("rank 1: RuntimeError: injected fault"), failed.error
    assert took < 240
    assert two.status == "completed" and two.steps == 4
    assert two.config["launch"]["processes"] == 2
    assert two.cost["completions"] == 4 * 64  # both processes' completions, counted once
    history = (by_fault[None].parent / "history.jsonl").read_text().splitlines()
    assert [json.loads(r)["step"] for r in history if "loss" in json.loads(r)] == [1, 2, 3, 4]
    runs = [read_run(f) for f in (tmp_path / "adhoc" / "wandb").glob("offline-run-*/run-*.wandb")]
    # One W&B run per run, the first process's: the completed run's and the failed run's.
    assert sorted(r["summary"]["status"] for r in runs) == ["completed", "failed"]
    # The held-out set, sharded over the processes and gathered, is the whole set: the SFT
    # policy's greedy accuracy at the start is the one-process run's.
    assert main(["run", *common]) == 0
    (one_path,) = set((tmp_path / "adhoc" / "runs").glob("*/record.json")) - set(paths)
    one = read_record(one_path)
    assert two.metrics["eval/start_accuracy"] == one.metrics["eval/start_accuracy"]
    assert two.metrics["eval/start_reward_mean"] == one.metrics["eval/start_reward_mean"]
