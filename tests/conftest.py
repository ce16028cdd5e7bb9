import fcntl
import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# Under pytest-xdist (`make test` runs one worker per core) each worker's runs take their share
# of the cores, as a parallel launcher's workers do; a test or launcher that sets its own wins.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("GRPO_ABLATE_THREADS", str(max(
        1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))


# Modules whose tests share an expensive module- or session-scoped fixture (the SmolLM2 runs,
# the variants' fixed batch, the GPU check's rehearsal, the wheel's venv) or one resource (the
# one-node Slurm): each goes whole to one pytest-xdist worker, which builds the fixture once.
ONE_WORKER = ("test_training_real_checkpoint", "test_training_variants", "test_scripts_gpu_check",
              "test_install_wheel", "test_launch_slurm")


def pytest_xdist_make_scheduler(config, log):
    """xdist's load scheduling, each test on its own, except ONE_WORKER's modules, whole.
    (xdist's own `--dist loadgroup` marks do not group under pytest 9.2's node ids.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module.rsplit("/", 1)[-1].removesuffix(".py") in ONE_WORKER \
                else nodeid

    return SharedFixtureScheduling(config, log)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The machine the suite ran on, last, beside its time: a figure names its machine."""
    from grpo_ablate.runtime.machine import describe_machine, machine

    terminalreporter.write_line(f"machine: {describe_machine(machine())}, "
                                f"{len(os.sched_getaffinity(0))} cores")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The slow tests first, then the quick ones, then the `alone` ones: a worker that takes
    the last long test would otherwise run it alone after the others have finished (xdist
    hands out tests in collection order). An `alone` test waits until no other worker is in a
    test: at the end that is the other workers' last quick tests, where first it was whatever
    long test another worker had just begun (a minute or two of one worker idle)."""
    items.sort(key=lambda item: (item.get_closest_marker("alone") is not None,
                                 item.get_closest_marker("slow") is None))


@pytest.fixture(autouse=True)
def _alone_or_shared(request, tmp_path_factory):
    """A test marked `alone` (it counts processes machine-wide) runs while no other worker's
    test does: it takes an exclusive lock that every other test takes shared."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    alone = request.node.get_closest_marker("alone") is not None
    with open(tmp_path_factory.getbasetemp().parent / "alone.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def tiny_policy():
    """The cached SFT checkpoint of the embedded policy (built once, minutes at most)."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.models import resolve_model_path
    from grpo_ablate.tasks import get_task

    (spec,) = specs_for([], multirun=False)
    return resolve_model_path(spec.config, get_task(spec.config["task"]))


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory, tiny_policy):
    """`grpo-ablate sweep sweep=smoke logger=wandb`, never interrupted, run once for the tests
    that need it (its output, its records, or a reference to compare another launcher's or a
    resumed sweep's report with). Tests may re-run it but must not change its records. It runs
    in this process (no second interpreter start or import of TRL: the records are the same
    whichever process makes them, docs/determinism.md); what it printed is kept as a
    CompletedProcess."""
    import contextlib
    import io
    import subprocess

    from grpo_ablate.cli import main

    out = tmp_path_factory.mktemp("smoke") / "out"
    args = ["sweep", "sweep=smoke", f"out_root={out}", "logger=wandb"]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    res = subprocess.CompletedProcess(["grpo-ablate", *args], code, stdout.getvalue(),
                                      stderr.getvalue())
    assert res.returncode == 0, res.stderr[-2000:]
    return res, out
