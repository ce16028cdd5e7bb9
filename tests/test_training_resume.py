"""Mid-run checkpoints and resume: a run SIGKILLed at a pause point or at a random moment,
then re-run with the same command, ends with the record of a run never interrupted (every
metric bit for bit, the same history, activity and cost counts; wall times and the notes
about the interruption aside). A checkpoint is whole or absent, a foreign or damaged one is
never loaded, a save that fails is a warning, and every random stream is the run's seed."""

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grpo_ablate import cli
from grpo_ablate.records import TIMED_COST
from grpo_ablate.training import checkpoint as checkpoint_module
from grpo_ablate.training.checkpoint import (
    MANIFEST,
    CheckpointSchedule,
    RunCheckpoints,
    identity,
    resume_lines,
)
from grpo_ablate.training.run_state import RunState

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
for var in ("GRPO_ABLATE_PAUSE_AT", "GRPO_ABLATE_PAUSE_MARKER"):
    ENV.pop(var, None)
STEPS = ["trainer.max_steps=8", "eval.every_steps=3", "checkpoint.every_steps=1", "run_cache=null"]
# What an interruption may change in a record: wall times, and the lines that say it happened.
UNEQUAL = ("wall_seconds", "checksum", "resumed_from", "sweep")
INTERRUPTION_NOTES = ("interrupted ", "checkpoint step-", "resumed from step-",
                      "start-of-run evaluation reused")  # which run filled the shared cache first


# ---------------------------------------------------------------------------- quick: the parts
def trainer_section(spg: int = 1, iterations: int = 1, accumulation: int = 1) -> dict:
    return {"steps_per_generation": spg, "num_iterations": iterations,
            "gradient_accumulation_steps": accumulation}


SETTINGS = {"every_steps": None, "every_minutes": None, "max_overhead": 0.03, "keep_last": 1,
            "keep": False}


def test_saves_only_at_generation_boundaries_and_never_after_the_last_step():
    sched = CheckpointSchedule({**SETTINGS, "every_steps": 3}, trainer_section(spg=2, iterations=2,
                                                                            accumulation=2))
    # One generation feeds steps_per_generation x num_iterations = 4 micro-steps: 2 optimizer steps.
    assert [s for s in range(1, 9) if sched.at_boundary(s)] == [2, 4, 6, 8]

    def saves(max_steps: int) -> list[int]:
        sched.last_step, out = 0, []
        for step in range(1, max_steps + 1):
            control = SimpleNamespace(should_save=False, should_training_stop=False)
            sched.on_step_end(None, SimpleNamespace(global_step=step, max_steps=max_steps), control)
            if control.should_save:
                out.append(step)
                sched.saved(step, 0.0)
        return out

    assert saves(12) == [4, 8]  # the first boundary at or after every 3 steps; not at 12 (the end)


def test_a_time_based_save_waits_until_saving_costs_at_most_its_share():
    sched = CheckpointSchedule({**SETTINGS, "every_minutes": 1.0}, trainer_section())
    sched.began = sched.last_time = 0.0
    assert not sched.due(5, 59.0) and sched.due(5, 60.0)
    sched.last_time, sched.last_seconds, sched.saved_seconds = 60.0, 6.0, 6.0  # a 6 s save
    # The next one waits until 6 + 6 s are at most 3% of the time since training began.
    assert not sched.due(5, 120.0) and not sched.due(5, 399.0) and sched.due(5, 400.0)
    off = CheckpointSchedule(SETTINGS, trainer_section())
    assert not off.enabled


def fake_checkpoint(root: Path, step: int, ident: dict, **state_fields) -> Path:
    folder = root / "checkpoints" / ".incoming" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(1000))
    state = RunState(history=[{"step": step, "loss": 0.5}], notes=["kept"], **state_fields)
    state.activity["clip_changed"] = step
    RunCheckpoints.write_rank_state(folder, 0, state)
    return RunCheckpoints(root, ident, keep_last=3).commit(folder, step, 0.01)


def folders(run_dir: Path) -> list[str]:
    """What a run's checkpoints folder holds beside the Trainer's (empty) incoming one."""
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name != ".incoming")


def test_the_newest_whole_checkpoint_of_this_run_is_the_one_resumed(tmp_path):
    ident = identity("abc", 1)
    for step in (2, 4, 6):
        fake_checkpoint(tmp_path, step, ident)
    ckpts = RunCheckpoints(tmp_path, ident, keep_last=2)
    ckpts.prune()
    assert folders(tmp_path) == ["step-4", "step-6"]
    path, state, passed_over = ckpts.resumable(0)
    assert path.name == "step-6" and passed_over == []
    assert state.history == [{"step": 6, "loss": 0.5}] and state.activity["clip_changed"] == 6


DAMAGE = {
    "a truncated file": lambda p: (p / "model.safetensors").write_bytes(b"short"),
    "a file changed in place": lambda p: (p / "model.safetensors").write_bytes(os.urandom(1000)),
    "an unreadable run state": lambda p: (p / "grpo_ablate_rank0.pt").write_bytes(
        b"x" * (p / "grpo_ablate_rank0.pt").stat().st_size),
    "a manifest edited by hand": lambda p: (p / MANIFEST).write_text(
        (p / MANIFEST).read_text().replace('"step": 6', '"step": 60')),
    "no manifest": lambda p: (p / MANIFEST).unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_checkpoint_is_set_aside_and_the_previous_one_resumed(tmp_path, damage):
    ident = identity("abc", 1)
    for step in (4, 6):
        fake_checkpoint(tmp_path, step, ident)
    DAMAGE[damage](tmp_path / "checkpoints" / "step-6")
    path, state, passed_over = RunCheckpoints(tmp_path, ident, keep_last=2).resumable(0)
    assert path.name == "step-4" and state.history == [{"step": 4, "loss": 0.5}]
    (line,) = passed_over
    assert line.startswith("checkpoint step-6 set aside (damaged: "), line
    aside = tmp_path / "checkpoints-set-aside" / "step-6"
    assert aside.is_dir() and str(aside) in line  # moved, never deleted
    assert not (tmp_path / "checkpoints" / "step-6").exists()
    # The only one left damaged too: set aside as well, and the run starts from step 0.
    DAMAGE["a truncated file"](path)
    path, state, passed_over = RunCheckpoints(tmp_path, ident, keep_last=2).resumable(0)
    assert path is None and state is None and "step-4 set aside" in passed_over[0]
    assert sorted(p.name for p in (tmp_path / "checkpoints-set-aside").iterdir()) == \
        ["step-4", "step-6"]


def test_a_checkpoint_saved_after_the_guard_stopped_its_run_is_never_resumed(tmp_path):
    ident = identity("abc", 1)
    fake_checkpoint(tmp_path, 2, ident)
    fake_checkpoint(tmp_path, 4, ident, guard_reason="KL 60 > guard.kl_abort=50 at step 4")
    path, _, (line,) = RunCheckpoints(tmp_path, ident, keep_last=2).resumable(0)
    assert path.name == "step-2" and "after the divergence guard stopped the run" in line


@pytest.mark.parametrize("field,other", [
    ("run_id", "another-run"), ("processes", 2), ("versions", {"trl": "0.0.1"}),
    ("code", {"grpo_ablate": "0.0.1", "commit": "0" * 40}),
    ("inputs", {"model": "another", "data": "another"})])
def test_a_checkpoint_of_another_run_code_or_input_is_refused_and_left_in_place(tmp_path, field,
                                                                                other):
    ident = {**identity("abc", 1), "inputs": {"model": "m", "data": "d"}}
    fake_checkpoint(tmp_path, 3, {**ident, field: other})
    path, state, (line,) = RunCheckpoints(tmp_path, ident, keep_last=1).resumable(0)
    assert path is None and state is None
    assert line.startswith(f"checkpoint step-3 refused ({field} "), line
    assert (tmp_path / "checkpoints" / "step-3").is_dir()  # another run's: not touched
    assert resume_lines(SimpleNamespace(arm="a", seed=0, run_id="abc"), None, [line])[-1] \
        .endswith("; trained from step 0")


def test_a_checkpoint_from_another_machine_is_resumed_and_said(tmp_path):
    ident = identity("abc", 1)
    fake_checkpoint(tmp_path, 3, {**ident, "machine": "elsewhere"})
    ckpts = RunCheckpoints(tmp_path, ident, keep_last=1)
    path, _, passed_over = ckpts.resumable(0)
    assert path.name == "step-3" and passed_over == []
    assert "made on another machine (numeric id elsewhere" in ckpts.machine_note(path)
    assert ckpts.machine_note(fake_checkpoint(tmp_path / "same", 3, ident)) is None


def test_a_full_disk_at_the_manifest_is_a_warning_and_keeps_the_previous_checkpoint(
        tmp_path, monkeypatch, caplog):
    """ENOSPC raised where the manifest is written (a disk cannot be filled here on purpose
    without root): the save is discarded with a warning; the previous checkpoint stays."""
    ident = identity("abc", 1)
    fake_checkpoint(tmp_path, 2, ident)
    folder = tmp_path / "checkpoints" / ".incoming" / "checkpoint-4"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(os.urandom(1000))

    def full(path, text, pause=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_module, "atomic_write_text", full)
    ckpts = RunCheckpoints(tmp_path, ident, keep_last=1)
    assert ckpts.commit_or_discard(folder, 4, 0.1, None) is None
    assert "checkpoint not written (OSError: [Errno 28] No space left on device)" in caplog.text
    assert not folder.exists()
    monkeypatch.undo()
    assert ckpts.resumable(0)[0].name == "step-2"


def test_every_file_and_folder_of_a_checkpoint_is_forced_to_disk(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = fake_checkpoint(tmp_path, 2, identity("abc", 1))
    incoming = tmp_path / "checkpoints" / ".incoming" / "checkpoint-2"
    for name in ("model.safetensors", "grpo_ablate_rank0.pt"):
        assert str(incoming / name) in synced, synced
    assert str(incoming) in synced  # its entries, before the rename
    assert str(tmp_path / "checkpoints") in synced  # the rename
    assert any(p.startswith(str(incoming / f".{MANIFEST}.")) for p in synced)  # the manifest
    assert path.is_dir()


def test_a_prune_cut_short_leaves_nothing_that_looks_like_a_checkpoint(tmp_path, monkeypatch):
    ident = identity("abc", 1)
    fake_checkpoint(tmp_path, 2, ident)
    fake_checkpoint(tmp_path, 4, ident)
    monkeypatch.setattr(checkpoint_module.shutil, "rmtree", lambda *a, **k: None)  # killed there
    RunCheckpoints(tmp_path, ident, keep_last=1).prune()
    monkeypatch.undo()
    assert folders(tmp_path) == [".pruning-step-2", "step-4"]
    ckpts = RunCheckpoints(tmp_path, ident, keep_last=1)
    assert ckpts.resumable(0)[2] == []  # not mistaken for a damaged checkpoint
    ckpts.clean_incoming()
    assert folders(tmp_path) == ["step-4"]
    assert not (tmp_path / "checkpoints-set-aside").exists()


def test_epoch_seeded_sampler_gives_the_persistent_generators_orders():
    from trl.trainer.utils import RepeatSampler

    from grpo_ablate.training.trl_layer.resumable import EpochSeededSampler

    plain = RepeatSampler(list(range(23)), mini_repeat_count=2, batch_size=4, repeat_count=2, seed=7)
    orders = [list(plain) for _ in range(4)]  # one pass per epoch, one generator throughout
    assert len({tuple(o) for o in orders}) == 4
    for epoch in (3, 0, 2, 1):  # any epoch, in any order: a resumed run starts at its own
        ours = RepeatSampler(list(range(23)), mini_repeat_count=2, batch_size=4, repeat_count=2,
                             seed=7)
        ours.__class__ = EpochSeededSampler
        ours.epoch = epoch
        assert list(ours) == orders[epoch]


def test_the_colocated_vllm_engine_is_seeded_by_the_run(monkeypatch):
    """Through TRL's own VLLMGeneration, with a stand-in for vLLM's LLM (vLLM needs a CUDA
    device): TRL passes the process index; the engine gets the run's seed and the process's
    tensor-parallel group instead. tests/test_training_gpu.py runs the real engine."""
    import trl.generation.vllm_generation as vg

    from grpo_ablate.training.trl_layer.vllm import seeded_vllm_engine, vllm_engine_seed

    built = []

    class StandInLLM:
        def __init__(self, **kwargs):
            built.append(kwargs["seed"])

    monkeypatch.setattr(vg, "LLM", StandInLLM, raising=False)
    monkeypatch.setattr(vg, "is_vllm_available", lambda: True)
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(var, os.environ.get(var, "0"))

    def engine(run_seed, rank):
        accel = SimpleNamespace(process_index=rank, local_process_index=rank, num_processes=4,
                                state=SimpleNamespace(deepspeed_plugin=None),
                                wait_for_everyone=lambda: None)
        model = torch.nn.Linear(2, 2)
        model.name_or_path = "stand-in"
        with seeded_vllm_engine(run_seed):
            vg.VLLMGeneration(model=model, accelerator=accel, processing_class=None,
                              mode="colocate")
        return built[-1]

    seeds = {(s, r): engine(s, r) for s in (0, 1, 2) for r in (0, 1)}
    assert len(set(seeds.values())) == 6  # every seed and process its own stream
    assert seeds[1, 0] == vllm_engine_seed(1, 0)
    # With tensor parallelism TRL passes the group's index (process_index // tp): one stream
    # per group, as its processes must sample alike.
    with seeded_vllm_engine(5):
        vg.LLM(seed=1)
    assert built[-1] == vllm_engine_seed(5, 1) != vllm_engine_seed(5, 0)
    vg.LLM(seed=3)  # outside the context TRL's LLM is as it was
    assert built[-1] == 3


# ---------------------------------------------------------------------------- slow: kill, resume
def run_process(out: Path, *overrides: str, pause: str | None = None,
                marker: Path | None = None) -> subprocess.Popen:
    env = dict(ENV)
    if pause:
        env.update(GRPO_ABLATE_PAUSE_AT=pause, GRPO_ABLATE_PAUSE_MARKER=str(marker))
    return subprocess.Popen([sys.executable, "-m", "grpo_ablate.cli", "run", f"out_root={out}",
                             *STEPS, *overrides], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run and every process it started (a node failure)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def rank_processes(out: Path) -> list[int]:
    """The rank processes (grpo_ablate.launch.distributed) alive for a run under `out`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().decode().split("\0")
            spec = words[words.index("grpo_ablate.launch.distributed") + 1]
            if str(out) in Path(spec).read_text():
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def no_rank_left(out: Path) -> None:
    """torchrun starts the ranks in a session of their own: the kill of the run's group must
    still end them (a rank left behind holds its GPU and writes into the resumed run)."""
    deadline = time.time() + 15
    while rank_processes(out) and time.time() < deadline:
        time.sleep(0.2)
    assert not rank_processes(out), f"rank processes left running: {rank_processes(out)}"


def kill_at(out: Path, overrides: tuple, pause: str, tmp: Path) -> None:
    marker = tmp / f"marker-{pause}"
    proc = run_process(out, *overrides, pause=pause, marker=marker)
    deadline = time.time() + 300
    while not marker.exists():
        assert proc.poll() is None, f"the run ended before {pause}: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline
        time.sleep(0.1)
    kill_group(proc)
    no_rank_left(out)


def run_here(out: Path, overrides: tuple) -> int:
    """The same command in this process (the same record whichever process runs it:
    docs/determinism.md), which spares an interpreter start and TRL's import."""
    with contextlib.chdir(ROOT):
        return cli.main(["run", f"out_root={out}", *STEPS, *overrides])


def finish(out: Path, overrides: tuple, capfd=None) -> str:
    """The same command again, to its end: in this process when `capfd` is given (it reads
    the output), else in a new process, as the random-moment case does (a resume in a fresh
    interpreter, as after a node's failure)."""
    if capfd is None:
        proc = run_process(out, *overrides)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        return err
    capfd.readouterr()
    code = run_here(out, overrides)
    err = capfd.readouterr().err
    assert code == 0, err[-3000:]
    return err


def uninterrupted(out: Path, overrides: tuple) -> None:
    """The reference run, in this process."""
    assert run_here(out, overrides) == 0


def the_run(out: Path) -> tuple[dict, str, Path]:
    (path,) = out.glob("*/runs/*/record.json")
    record = json.loads(path.read_text())
    for key in UNEQUAL:
        record.pop(key)
    record["notes"] = [n for n in record["notes"] if not n.startswith(INTERRUPTION_NOTES)]
    for key in TIMED_COST:
        record["cost"].pop(key, None)
    for key in ("sweep_name", "sweep_dir", "out_root"):
        record["config"].pop(key)
    record["config"]["faults"].pop("sleep_per_step")
    return record, (path.parent / "history.jsonl").read_text(), path.parent


def resumed_equals_uninterrupted(tmp: Path, overrides: tuple, kills,
                                 capfd=None) -> tuple[dict, str]:
    reference, interrupted = tmp / "reference", tmp / "interrupted"
    uninterrupted(reference, overrides)
    for kill in kills:
        kill(interrupted, overrides)
    err = finish(interrupted, overrides, capfd)
    (ref, ref_history, _), (got, history, run_dir) = the_run(reference), the_run(interrupted)
    assert got == ref
    assert history == ref_history
    assert {p.name for p in run_dir.iterdir()} == {"record.json", "history.jsonl"}  # dropped
    return json.loads((run_dir / "record.json").read_text()), err


CASES = {
    # arm, pause point(s) (the n-th time a process reaches it; one kill per point, each
    # attempt resuming the last), the step(s) the resumed attempts start from
    "baseline, killed inside its 3rd save, on W&B": (("logger=wandb",), "checkpoint_write:3", 2),
    # Five states a resume restores or recomputes, in one run: EMA's averaged weights, the
    # cosine scheduler's, a generation feeding 2 steps (saves only at its boundaries), the
    # tokens Clip-Cov draws at random in each micro-batch (half of them here), and the KL
    # reference reset to the policy at steps 2 and 4 (ref_reset_200's keys, every 2 steps):
    # resumed from step 4, the run must train against step 4's reference (kept in the
    # checkpoint), not the SFT policy.
    "ema, lr_cosine, reuse_2x, clip_cov, ref_reset": (
        ("trick=ema_0.9", "trainer.lr_scheduler_type=cosine", "trainer.num_iterations=2",
         "+trick.modules=[grpo_ablate.hook_tricks.clip_cov]",
         "+hooks.clip_cov={ratio:0.5,lb:-100,ub:100}", "trainer.sync_ref_model=true",
         "trainer.ref_model_mixup_alpha=1.0", "trainer.ref_model_sync_steps=2"),
        "after_step:5", 4),
    # Killed inside its window (after step 2), then after it (the 2nd attempt's 4th step is 5).
    "filter_low_reward_early, inside its window and after it": (
        ("trick=filter_low_reward_early", "trainer.max_steps=10"),
        ("after_step:2", "after_step:4"), [1, 4]),
    "a LoRA adapter (its weights and optimizer)": (
        ("model.lora={r:4,alpha:8,dropout:0.0,target_modules:all-linear}",), "after_step:4", 3),
    # The guard stops it at step 4, whose save it cancels; killed as its record is written,
    # the re-run resumes from step 3 and diverges at step 4 again (not: trains on to step 8).
    "diverged, killed at its record write": (("faults.kl_blowup_at_step=4",), "record_write:1", 3),
    # One run with four hooks whose state a resume must restore or recompute: a log row that
    # averages two steps (saves only at logged steps), dynamic sampling's extra rounds, the
    # soft overlong penalty, a reward clip at quantiles of the SFT policy's rewards.
    "logging_steps=2, dynamic sampling, soft overlong, sft_quantiles": (
        ("trick=overlong_soft", "trainer.logging_steps=2", "hooks.dynamic_sampling={max_rounds:3}",
         "hooks.reward_clip={low:0.1,high:0.9}", "task.shaping.scale=sft_quantiles"),
        "after_step:5", 4),
    # No-positive-resampling's pass-rate history: on 12 prompts, 4 a step (3 steps an epoch),
    # each step's first group planted all right (pass rate 1), the others half right; epoch 1
    # leaves out the prompts epoch 0 solved. Killed inside epoch 1 (after step 5), the resumed
    # run keeps epoch 1's prompts left out and the history that decides epoch 2's.
    "no-positive-resampling, inside its second epoch": (
        ("trick=no_positive_resampling", "task.data_file=" + str(
            Path(__file__).parent / "fixtures" / "arith_prompts.jsonl"), "eval.every_steps=0",
         "faults.planted_rewards=[" + ",".join(["1"] * 16 + ["1,0"] * 24) + "]"),
        "after_step:6", 5),
    # 12 training prompts (task.data_file), 4 a step: epoch 1 is steps 4-6 (its own shuffle of
    # them), epoch 2 steps 7-9; resumed inside epoch 1, the run goes on into epoch 2.
    "in a later epoch": (("task.data_file=" + str(Path(__file__).parent / "fixtures"
                                                  / "arith_prompts.jsonl"),
                          "eval.every_steps=0"), "after_step:6", 5),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_run_killed_at_a_pause_point_resumes_to_the_uninterrupted_record(tmp_path, tiny_policy,
                                                                          case, capfd):
    overrides, pauses, resumed_at = CASES[case]
    pauses = pauses if isinstance(pauses, tuple) else (pauses,)
    resumed_at = resumed_at if isinstance(resumed_at, list) else [resumed_at]
    record, err = resumed_equals_uninterrupted(
        tmp_path, overrides,
        [lambda out, o, pause=pause: kill_at(out, o, pause, tmp_path) for pause in pauses],
        capfd)
    assert record["resumed_from"] == resumed_at
    if "trick=no_positive_resampling" in overrides:  # the premise: the history acted
        assert record["activity"]["details"]["prompts_left_out"] > 0
    assert f"from its checkpoint at step {resumed_at[-1]}" in err
    assert any(f"interrupted {len(pauses)} time(s)" in n for n in record["notes"])
    if "logger=wandb" in overrides:  # the resumed process continues the W&B run: one id
        runs = sorted((tmp_path / "interrupted").glob("*/wandb/offline-run-*"))
        assert len(runs) == 2 and len({p.name.split("-", 3)[3] for p in runs}) == 1, runs
        # The newest attempt holds the whole history, each step once: the uninterrupted one's.
        (reference,) = (tmp_path / "reference").glob("*/wandb/offline-run-*")
        assert wandb_history(runs[-1]) == wandb_history(reference)
        assert any("the newest holds the whole history" in n for n in record["notes"])
        sync = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "wandb-sync",
                               str(runs[0].parent.parent), "--dry-run"], capture_output=True,
                              text=True, env=ENV, cwd=ROOT, timeout=120)
        assert sync.returncode == 0, sync.stderr
        assert sync.stdout.splitlines() == [
            f"superseded (an earlier attempt, not uploaded): {runs[0]}", f"wandb sync {runs[1]}"]


def wandb_history(folder: Path) -> list[dict]:
    """An offline run's logged rows, without W&B's clock (`_timestamp`, `_runtime`)."""
    from wandb_files import read_run

    (path,) = folder.glob("run-*.wandb")
    return [{k: v for k, v in row.items() if k not in ("_timestamp", "_runtime")}
            for row in read_run(path)["history"]]


@pytest.mark.slow
def test_a_run_killed_twice_at_random_moments_resumes_to_the_uninterrupted_record(tmp_path,
                                                                                 tiny_policy):
    rng = random.Random()  # a different moment each time the suite runs; printed on failure
    delays = []

    def kill_randomly(out: Path, overrides: tuple) -> None:
        proc = run_process(out, *overrides)
        deadline = time.time() + 300
        while not list(out.glob("*/runs/*/checkpoints/step-*")) and proc.poll() is None:
            assert time.time() < deadline
            time.sleep(0.05)
        delays.append(round(rng.uniform(0.0, 2.0), 2))
        time.sleep(delays[-1])
        kill_group(proc)

    overrides = ("trick=lr_schedule_cosine", "faults.sleep_per_step=0.3", "trainer.max_steps=10")
    record, _ = resumed_equals_uninterrupted(tmp_path, overrides, [kill_randomly] * 2)
    assert len(record["resumed_from"]) <= 2, delays
    assert record["resumed_from"] == sorted(record["resumed_from"]), delays


@pytest.mark.slow
def test_a_checkpoint_that_cannot_be_written_is_a_warning_and_the_run_goes_on(tmp_path,
                                                                            tiny_policy):
    """A real write failure: the process may not write files over 1 MiB (RLIMIT_FSIZE), so
    every save fails on the model's 3.8 MiB; the record and history (small) are written."""
    uninterrupted(tmp_path / "reference", ())
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (2**20, 2**20)); "
            "from grpo_ablate.cli import main; sys.exit(main(sys.argv[1:]))")
    res = subprocess.run([sys.executable, "-c", code, "run", f"out_root={tmp_path / 'full'}",
                          *STEPS, "checkpoint.keep=true"], env=ENV, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "checkpoint not written" in res.stderr
    (ref, ref_history, _), (got, history, run_dir) = the_run(tmp_path / "reference"), \
        the_run(tmp_path / "full")
    got["config"]["checkpoint"]["keep"] = False
    assert got == ref and history == ref_history
    assert not list((run_dir / "checkpoints").glob("step-*"))  # none broken, none kept


@pytest.mark.slow
def test_a_foreign_checkpoint_is_refused_and_the_run_starts_over(tmp_path, tiny_policy, capfd):
    out = tmp_path / "run"
    kill_at(out, (), "after_step:4", tmp_path)
    (ckpt,) = out.glob("*/runs/*/checkpoints/step-3")
    manifest = json.loads((ckpt / MANIFEST).read_text())
    manifest.pop("checksum")
    manifest["code"]["grpo_ablate"] = "0.0.1"  # made by another version of this code
    from grpo_ablate.runtime import stable_hash

    manifest["checksum"] = stable_hash(manifest, 64)
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    err = finish(out, (), capfd)
    assert "checkpoint step-3 refused (code" in err
    record = json.loads(next(out.glob("*/runs/*/record.json")).read_text())
    assert record["resumed_from"] == []
    assert any("refused" in n and "trained from step 0" in n for n in record["notes"])
    uninterrupted(tmp_path / "reference", ())
    (ref, ref_history, _), (got, history, _) = the_run(tmp_path / "reference"), the_run(out)
    assert got == ref and history == ref_history


@pytest.mark.slow
def test_a_two_process_run_whose_lock_holder_alone_is_killed_resumes_to_the_uninterrupted_record(
        tmp_path, tiny_policy, capfd):
    """`launch.processes=2`: SIGKILL the process holding the run's lock only (not its group).
    `accelerate launch` is tied to it and the ranks to `accelerate launch`: none keeps writing
    into the run's folder, whose lock is free again; the same command resumes the run, both
    ranks from their shared checkpoint, to the record of the run never interrupted."""
    overrides = ("launch.processes=2", "trainer.max_steps=6")

    def kill_lock_holder(out: Path, overrides: tuple) -> None:
        marker = tmp_path / "marker"
        proc = run_process(out, *overrides, pause="after_step:4", marker=marker)
        deadline = time.time() + 300
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            assert time.time() < deadline
            time.sleep(0.1)
        assert len(rank_processes(out)) == 3  # accelerate launch and its two ranks
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        no_rank_left(out)

    record, err = resumed_equals_uninterrupted(tmp_path, overrides, [kill_lock_holder], capfd)
    assert record["resumed_from"] == [3] and "from its checkpoint at step 3" in err
    assert any("interrupted 1 time(s)" in n for n in record["notes"])


@pytest.mark.slow
def test_no_checkpoint_is_left_once_a_record_exists(tmp_path, tiny_policy, capfd):
    """Killed between writing its record and dropping its checkpoints, a run's next command
    finds the record, trains nothing and drops them; a run the cache supplies to a sweep
    that had begun it drops that attempt's checkpoints too."""
    out = tmp_path / "run"
    kill_at(out, (), "record_written:1", tmp_path)
    assert list(out.glob("*/runs/*/record.json")) and list(out.glob("*/runs/*/checkpoints/step-*"))
    err = finish(out, (), capfd)
    assert "training arm=" not in err, err[-2000:]
    assert not list(out.glob("*/runs/*/checkpoints"))

    cache = f"run_cache={tmp_path / 'cache'}"
    begun = tmp_path / "begun"
    kill_at(begun, (cache,), "after_step:4", tmp_path)
    assert list(begun.glob("*/runs/*/checkpoints/step-3"))
    uninterrupted(tmp_path / "elsewhere", (cache,))  # the same run, finished into the cache
    err = finish(begun, (cache,), capfd)
    (run_dir,) = begun.glob("*/runs/*")
    assert "training arm=" not in err and json.loads((run_dir / "record.json").read_text())[
        "origin"], err[-2000:]  # supplied by the cache, not trained
    assert {p.name for p in run_dir.iterdir()} == {"record.json", "history.jsonl"}


@pytest.mark.slow
def test_a_killed_parallel_sweep_resumes_its_runs_to_the_uninterrupted_records(tmp_path,
                                                                             smoke_sweep):
    """`launcher=joblib`, two workers, each killed after step 3 of its first run (with the
    whole process group); the same command again resumes both runs from step 2 and ends with
    the records of the serial sweep that was never interrupted (conftest's smoke_sweep; two of
    its arms)."""
    _, reference = smoke_sweep
    out, marker = tmp_path / "out", tmp_path / "marker"
    cmd = [sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke", "launcher=joblib",
           "hydra.launcher.n_jobs=2", "trick=baseline,kl_off", "checkpoint.every_steps=1",
           f"out_root={out}"]
    env = {**ENV, "GRPO_ABLATE_PAUSE_AT": "after_step:3", "GRPO_ABLATE_PAUSE_MARKER": str(marker)}
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    while not marker.exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.1)
    time.sleep(1.0)  # the other worker reaches its own step 3 too
    kill_group(proc)
    assert list(out.glob("smoke/runs/*/checkpoints/step-2"))
    res = subprocess.run(cmd, env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]

    def records(folder: Path) -> dict[str, tuple[dict, str]]:
        out = {}
        for path in folder.glob("smoke/runs/*/record.json"):
            rec = json.loads(path.read_text())
            resumed = rec.pop("resumed_from")
            for key in UNEQUAL + ("origin",):
                rec.pop(key, None)
            rec["notes"] = [n for n in rec["notes"] if not n.startswith(INTERRUPTION_NOTES)]
            for key in TIMED_COST:
                rec["cost"].pop(key, None)
            for key in ("sweep_dir", "out_root", "run_cache", "checkpoint", "logger", "hydra"):
                rec["config"].pop(key, None)
            rec["machine"].pop("threads")
            out[rec["run_id"]] = (rec, (path.parent / "history.jsonl").read_text(), resumed)
        return out

    got, ref = records(out), records(reference)
    assert len(got) == 4 and len(ref) == 6
    ref = {k: v for k, v in ref.items() if v[0]["arm"] in ("baseline", "kl_off")}
    assert sum(r[2] == [2] for r in got.values()) >= 1  # resumed, not retrained
    assert {k: v[:2] for k, v in got.items()} == {k: v[:2] for k, v in ref.items()}
