"""The pilot of `grpo-ablate plan` where no records give a run's cost: two short runs of the
baseline (1 and 1 + k optimizer steps), whose difference is the cost of k steps (generation
and training apart, measured inside the optimizer steps) and whose remainder is the fixed cost
of a run (model load, the held-out evaluation at the end). They run where the sweep's runs
would: as Slurm jobs on the sweep's partition and resources with `launcher=slurm`, else on
this machine at the launcher's thread share, refused before they start where they cannot run
here (a policy of a billion parameters without a CUDA device, or over the machine's memory)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_ablate.errors import UserError
from grpo_ablate.launch.run_cost import RunCost, tokens_of
from grpo_ablate.records import RECORD_NAME, read_record
from grpo_ablate.runtime import cuda_available, say

# What a pilot sets itself: one run of the baseline, seed 0, its own folder, nothing cached.
PILOT_SETS = ("trick", "seed", "sweep", "launcher", "out_root", "run_cache", "sweep_name",
              "adaptive", "adaptive.enabled", "early_stop", "early_stop.enabled",
              "early_stop.pause_at", "early_stop.extend")


def per_step(a: float, b: float, steps: int) -> float:
    """Seconds a step from a quantity measured in the 1-step run (a) and the 1+steps run (b):
    their difference, which leaves out the first step's warm-up, where timing noise leaves it
    positive; else b's mean over its steps (a short pilot on a busy machine can measure the
    longer run faster, and a step is never free)."""
    marginal = (b - a) / steps
    return marginal if marginal > 0 else max(0.0, b) / (1 + steps)


def two_run_cost(ra, rb, steps: int, source: str, **measured) -> RunCost:
    """One run's cost from the pilot's two records, of 1 and 1 + steps optimizer steps."""
    gen = per_step(ra.cost["generation_seconds"], rb.cost["generation_seconds"], steps)
    if ra.cost.get("step_seconds") and rb.cost.get("step_seconds"):
        # The steps' own seconds (generation inside them): no load or evaluation mixed in.
        train_a = ra.cost["step_seconds"] - ra.cost["generation_seconds"]
        train_b = rb.cost["step_seconds"] - rb.cost["generation_seconds"]
    else:  # older records: a run's wall time less its evaluations and generation
        train_a = ra.wall_seconds - ra.cost["eval_seconds"] - ra.cost["generation_seconds"]
        train_b = rb.wall_seconds - rb.cost["eval_seconds"] - rb.cost["generation_seconds"]
    training = per_step(train_a, train_b, steps)
    fixed = max(0.0, rb.wall_seconds - (1 + steps) * (gen + training))
    tokens = rb.cost["completion_tokens"] / max(1, rb.cost["completions"])
    return RunCost(fixed=fixed, generation=gen, training=training, eval_end=rb.cost["eval_seconds"],
                   mean_length=tokens, source=source,
                   start_eval=max(0.0, ra.cost["eval_seconds"] - rb.cost["eval_seconds"]),
                   **tokens_of([rb]), **measured)


def pilot_cost(overrides: list[str], steps: int, threads: int) -> RunCost:
    """Two short runs of the baseline on this machine, each in a process of its own at the
    launcher's thread share."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grpo-ablate-pilot-") as tmp:
        ra, peak_a, _ = _pilot_run(overrides, 1, Path(tmp) / "a", threads)
        rb, peak_b, process_b = _pilot_run(overrides, 1 + steps, Path(tmp) / "b", threads)
    gpu = rb.cost.get("peak_gpu_mib")
    return two_run_cost(ra, rb, steps, f"a pilot of the baseline on this machine (1 and "
                        f"{1 + steps} steps, {threads} thread(s))",
                        peak_mib=gpu or max(peak_a, peak_b), peak_on="GPU" if gpu else "CPU",
                        pilot_seconds=time.perf_counter() - t0,
                        process_start=max(0.0, process_b - rb.wall_seconds))


def pilot_overrides(overrides: list[str]) -> list[str]:
    """The sweep's overrides a pilot keeps: the model, task, recipe, trainer, launch and
    launcher settings; not the arms, seeds, sweep file or output folders."""
    return [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in PILOT_SETS]


def slurm_pilot_cost(overrides: list[str], steps: int, out_root: Path) -> RunCost:
    """The two pilot runs as one Slurm job array through the sweep's own launcher (its
    partition, time limit, CPUs, GPUs and `launch.processes`), into a folder under the
    sweep's out_root (the compute nodes see it), removed afterwards. The plan waits with a
    line at each change of the jobs' states; a job's seconds beyond its run (the process
    start, the imports) come from Slurm's accounting."""
    kept = [o for o in pilot_overrides(overrides) if not o.startswith("hydra.launcher.name=")]
    named = next((o.split("=", 1)[1] for o in overrides
                  if o.startswith("hydra.launcher.name=")), "grpo-ablate")
    name = f"{named}-pilot-{os.getpid()}"
    folder = Path(out_root).resolve() / f".plan-pilot-{os.getpid()}"
    cmd = [sys.executable, "-m", "grpo_ablate.cli", "sweep", *kept, "launcher=slurm",
           "trick=baseline", "seed=0", f"trainer.max_steps=1,{1 + steps}", "eval.every_steps=0",
           "adaptive.enabled=false", f"out_root={folder}", "run_cache=null",
           "sweep_name=pilot", f"hydra.launcher.name={name}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryFile("w+") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log,
                                    text=True)
            _wait_for_jobs(proc, name, t0)
            log.seek(0)
            err = log.read()
        records = {}
        for path in folder.glob(f"pilot/runs/*/{RECORD_NAME}"):
            rec = read_record(path)
            records[rec.config["trainer"]["max_steps"]] = rec
        failed = [r for r in records.values() if r.status != "completed"]
        if proc.returncode != 0 or len(records) != 2 or failed:
            why = (failed[0].error or "") if failed else \
                (err.strip().splitlines() or ["no error message"])[-1]
            why = (why.strip().splitlines() or ["no error message"])[0]
            why = why.removeprefix("grpo-ablate: ").removeprefix("error: ")
            raise UserError(f"plan: the pilot jobs of the baseline on Slurm failed "
                            f"({why}); allowed: fix what it "
                            "names, --pilot-here to pilot on this machine, or --from PATH to "
                            "cost from the records of earlier runs of this model")
        ra, rb = records[1], records[1 + steps]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    spent = time.perf_counter() - t0
    elapsed, max_rss = job_accounting(name)
    # The sweep process's own share (its start, submitting, waiting on the jobs' states): what
    # the pilot's sweep took beyond its longer job, the two having run at once.
    return two_run_cost(ra, rb, steps, f"a pilot of the baseline as Slurm jobs {name} (1 and "
                        f"{1 + steps} steps)", peak_mib=rb.cost.get("peak_gpu_mib") or max_rss,
                        peak_on="GPU" if rb.cost.get("peak_gpu_mib") else "CPU",
                        pilot_seconds=spent,
                        job_start=max(0.0, elapsed - rb.wall_seconds) if elapsed else 0.0,
                        process_start=max(0.0, spent - elapsed) if elapsed else 0.0)


def _wait_for_jobs(proc: subprocess.Popen, name: str, t0: float) -> None:
    """Wait for the pilot's sweep, saying its jobs' states whenever they change."""
    said = None
    while proc.poll() is None:
        states = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i %T"], capture_output=True,
                                text=True).stdout.split("\n")
        now = ", ".join(sorted(line for line in states if line.strip()))
        if now and now != said:
            say(f"plan: pilot jobs {now} ({time.perf_counter() - t0:.0f} s)")
            said = now
        time.sleep(2)


def job_accounting(name: str) -> tuple[float | None, float | None]:
    """(the longer pilot job's elapsed seconds, its steps' largest MaxRSS in MiB) from
    sacct; (None, None) where accounting says nothing."""
    out = subprocess.run(["sacct", "-n", "-P", "--name", name, "-o", "JobID,ElapsedRaw,MaxRSS",
                          "-S", "now-1days"], capture_output=True, text=True).stdout
    elapsed, rss = [], []
    for line in out.splitlines():
        job, raw, mem = (line.split("|") + ["", "", ""])[:3]
        if raw.isdigit() and "." not in job:
            elapsed.append(float(raw))
        if mem:
            rss.append(_mib(mem))
    return (max(elapsed) if elapsed else None), (max(rss) if rss else None)


def _mib(size: str) -> float:
    units = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}
    return float(size[:-1]) * units[size[-1]] if size[-1] in units else float(size) / 2**20


# The presets' hub checkpoints, for a machine that has not downloaded their config.json.
KNOWN_PARAMETERS = {"Qwen/Qwen2.5-1.5B-Instruct": 1.54e9, "Qwen/Qwen2.5-7B-Instruct": 7.62e9,
                    "Qwen/Qwen2.5-14B-Instruct": 14.77e9}
# Above this, a pilot on a CPU takes hours (and the sweep would run on GPUs anyway).
CPU_PILOT_PARAMETERS = 1e9
WAYS_OUT = ("allowed: launcher=slurm (the pilot then runs as jobs of the sweep's launcher), "
            "--from PATH (the records of earlier runs of this model, e.g. a sweep on the "
            "cluster), or plan on a machine with a CUDA device")


def parameter_count(model: dict) -> float | None:
    """The policy's parameters, from its config.json (a local checkpoint, or the hub cache)
    or the presets' table; None where neither says (the embedded and packaged policies are
    small)."""
    path = model.get("path")
    if path is None:
        return None
    local = Path(str(path)).expanduser() / "config.json"
    if not local.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(str(path), "config.json")
            local = Path(cached) if isinstance(cached, str) else None
        except Exception:  # noqa: BLE001 - not a hub id: nothing cached
            local = None
    if local is not None and local.is_file():
        return parameters_of(json.loads(local.read_text()))
    return KNOWN_PARAMETERS.get(str(path))


def parameters_of(cfg: dict) -> float | None:
    """A decoder's parameter count from its config: embeddings (twice when untied), and per
    layer the attention (grouped key/value heads) and a gated MLP."""
    cfg = cfg.get("text_config", cfg)
    try:
        h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    except KeyError:
        return None
    inner = cfg.get("intermediate_size", 4 * h)
    heads = cfg.get("num_attention_heads", 1)
    kv = cfg.get("num_key_value_heads") or heads
    attention = 2 * h * h + 2 * h * (h * kv // heads)
    embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings", False) else 2)
    return float(layers * (attention + 3 * h * inner) + embeddings)


def check_pilot_fits(cfg: dict) -> None:
    """A pilot on this machine that cannot run is refused before it starts: a policy of a
    billion parameters or more without a CUDA device, or fp32 weights of the policy and its
    reference over this machine's memory."""
    params = parameter_count(cfg["model"])
    if params is None or cuda_available():
        return
    name = f"model={cfg['model']['name']} ({params / 1e9:.1f}B parameters)"
    if params >= CPU_PILOT_PARAMETERS:
        raise UserError(f"plan: {name}: piloting it needs a CUDA device, and this machine has "
                        f"none; {WAYS_OUT}")
    need, ram = 2 * 4 * params / 2**20, device_memory_mib("CPU")
    if ram is not None and need > ram:
        raise UserError(f"plan: {name}: the policy and its reference in fp32 take "
                        f"{need / 1024:.0f} GiB, over this machine's {ram / 1024:.0f} GiB; "
                        f"{WAYS_OUT}")


def _pilot_run(overrides: list[str], steps: int, out: Path, threads: int):
    pilot = [o for o in pilot_overrides(overrides) if not o.startswith("hydra.")]
    cmd = [sys.executable, "-m", "grpo_ablate.cli", "run", *pilot, "trick=baseline", "seed=0",
           f"trainer.max_steps={steps}", "eval.every_steps=0", f"out_root={out}", "run_cache=null"]
    env = {**os.environ, "WANDB_MODE": "disabled", "GRPO_ABLATE_THREADS": str(threads)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        why = (err.strip().splitlines() or ["no error message"])[-1]
        why = why.removeprefix("grpo-ablate: ").removeprefix("error: ")
        raise UserError(f"plan: the pilot run of the baseline failed ({why}); allowed: fix what "
                        "it names, or --from PATH to cost from the records of earlier runs of "
                        "this model")
    (path,) = out.glob(f"*/runs/*/{RECORD_NAME}")
    return read_record(path), usage.ru_maxrss / 1024, took


def device_memory_mib(on: str) -> float | None:
    """The memory the peak is measured against: the first GPU's, or this machine's RAM."""
    if on == "GPU":
        import torch  # heavy: only where the pilot ran on a GPU

        return torch.cuda.get_device_properties(0).total_memory / 2**20
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError):
        return None
