"""The code sandbox (`grpo_ablate.sandbox.run`): correct programs score their tests, and an
adversarial set of programs scores 0 within the timeout, leaves no process or file behind,
and cannot touch a marker file outside the sandbox, the parent's environment or network."""

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from grpo_ablate.sandbox import Limits, SandboxResult, isolation_available, run, run_many

SECRET = "grpo-ablate-test-secret-7f3a"
SOLVE = "assert solve(2) == 4\n"
TIMEOUT = 2.0


def test_correct_partial_and_broken_programs_score_the_fraction_of_tests_passed():
    program = "def add(a, b):\n    return a + b\n"
    ok = run(program, "assert add(1, 2) == 3\nassert add(2, 2) == 4\n", TIMEOUT)
    assert (ok.passed, ok.total, ok.status, ok.reward) == (2, 2, "ok", 1.0)
    assert ok.isolation == isolation_available()
    half = run(program, "import math\nassert add(1, 2) == 3\nassert add(2, 2) == 5\n", TIMEOUT)
    assert (half.passed, half.total, half.status) == (1, 2, "failed")
    broken = run("def add(a, b)\n    return a + b\n", "assert add(1, 2) == 3\n", TIMEOUT)
    assert (broken.passed, broken.status) == (0, "error") and "SyntaxError" in broken.detail


def test_a_program_that_exits_before_its_tests_passes_nothing():
    result = run("import os\nos._exit(0)\n", "assert True\nassert 1 == 1\n", TIMEOUT)
    assert (result.passed, result.total, result.status) == (0, 2, "killed")


def test_a_forged_result_line_without_the_nonce_is_not_believed():
    program = ('import os\nos.write(1, b\'{"passed": 9, "total": 9, "status": "ok"}\\n\')\n'
               "os._exit(0)\n")
    result = run(program, "assert False\n", TIMEOUT)
    assert result.passed == 0 and result.status == "killed"


@pytest.mark.parametrize("limits, message", [
    (Limits(cpu_seconds=0), "^cpu_seconds=0: must be an integer in"),
    (Limits(memory_mb=10**6), "^memory_mb=1000000: must be"),
    (Limits(processes=-1), "^processes=-1: must be"),
])
def test_limits_out_of_range_are_a_value_error_naming_the_parameter(limits, message):
    """The sandbox is a library: it names its own parameters (the code task names them as
    the config's keys, tests/test_tasks_scoring.py)."""
    with pytest.raises(ValueError, match=message):
        run("x = 1\n", "assert x == 1\n", TIMEOUT, limits)


# ---------------------------------------------------------------------------- adversarial
def adversarial(marker: Path, port: int) -> dict[str, tuple[str, str]]:
    """name -> (program, tests). The tests of an attack on the host pass only if the attack
    worked; the others ask for a function the program never defines, so a non-zero score
    would mean the program subverted the scoring."""
    m = str(marker)
    return {
        "infinite_loop": ("while True:\n    pass\n", SOLVE),
        "fork_bomb": ("import os\nwhile True:\n    os.fork()\n", SOLVE),
        "memory_hog": ("x = bytearray(16 * 2**30)\n", "assert len(x) > 0\n"),
        "huge_stdout": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
                        SOLVE),
        "write_outside": (f"open({m!r}, 'w').write('owned')\n",
                          f"assert open({m!r}).read() == 'owned'\n"),
        "delete_outside": (f"import os\nos.remove({m!r})\n",
                           f"import os\nassert not os.path.exists({m!r})\n"),
        "read_parent_env": ("import os\nleak = os.environ.get('GRPO_SANDBOX_SECRET')\n",
                            f"assert leak == {SECRET!r}\n"),
        "open_socket": (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), 2)\n"
                        "s.sendall(b'leak')\n", SOLVE),
        "daemon_outlives_parent": (
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        while True:\n            time.sleep(0.1)\n    os._exit(0)\n"
            "time.sleep(60)\n", SOLVE),
        "daemon_left_running": (  # the program ends normally, its daemon must not survive
            "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        while True:\n            time.sleep(0.1)\n    os._exit(0)\n", SOLVE),
        "recursion_bomb": ("import sys\nsys.setrecursionlimit(10**7)\n"
                           "def f(n):\n    return f(n + 1) + 1\nf(0)\n", SOLVE),
        "sleep_past_timeout": ("import time\ntime.sleep(60)\n", SOLVE),
        "kill_parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                        "os.killpg(0, signal.SIGKILL)\n", SOLVE),
        "missing_import": ("import numpy_that_does_not_exist\n", SOLVE),
        "tmp_is_private": ("open('/tmp/grpo-ablate-sandbox-leak', 'w').write('x')\n"
                           "import time\ntime.sleep(60)\n", SOLVE),
    }


def sandbox_processes() -> list[str]:
    """Processes still running the sandbox's harness (none may outlive a run)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "harness.py" in cmd:
            found.append(f"{proc.name}: {cmd}")
    return found


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    yield server
    server.close()


@pytest.mark.slow  # 15 programs, most of them running to the timeout
@pytest.mark.alone  # it counts every harness process on the machine
def test_adversarial_programs_score_zero_and_leave_nothing_behind(tmp_path, listener,
                                                                  monkeypatch):
    if isolation_available() != "bwrap":
        pytest.skip("bubblewrap is not installed (.ci/run installs it); the fallback's "
                    "guarantees are tested below")
    monkeypatch.setenv("GRPO_SANDBOX_SECRET", SECRET)
    marker = tmp_path / "marker.txt"
    marker.write_text("untouched")
    programs = adversarial(marker, listener.getsockname()[1])
    assert len(programs) >= 12
    before = set(Path(tempfile.gettempdir()).glob("grpo-ablate-sandbox-*"))
    for name, (program, tests) in programs.items():
        t0 = time.perf_counter()
        result = run(program, tests, TIMEOUT, Limits(cpu_seconds=2, memory_mb=512))
        took = time.perf_counter() - t0
        assert isinstance(result, SandboxResult)
        assert result.passed == 0 and result.reward == 0.0, (name, result)
        assert result.status in ("failed", "timeout", "error", "killed"), (name, result)
        assert took < TIMEOUT + 2.0, (name, took)
        assert not sandbox_processes(), (name, sandbox_processes())
        assert marker.read_text() == "untouched", name
        with pytest.raises(TimeoutError):  # nobody connected
            listener.accept()
    assert not Path("/tmp/grpo-ablate-sandbox-leak").exists()
    assert set(Path(tempfile.gettempdir()).glob("grpo-ablate-sandbox-*")) == before
    assert os.getpid() > 0  # this process survived kill_parent


def test_many_programs_are_scored_in_parallel_each_on_its_own():
    jobs = [(f"def sq(x):\n    return x * x + {i % 2}\n", "assert sq(3) == 9\n") for i in range(8)]
    results = run_many(jobs, TIMEOUT)
    assert [r.passed for r in results] == [1 - (i % 2) for i in range(8)]


FALLBACK_GUARANTEES = ("infinite_loop", "fork_bomb", "memory_hog", "huge_stdout",
                       "read_parent_env", "open_socket", "daemon_outlives_parent",
                       "recursion_bomb", "sleep_past_timeout", "kill_parent", "missing_import")


@pytest.mark.slow
@pytest.mark.alone
def test_unshare_fallback_keeps_its_documented_guarantees(tmp_path, listener, monkeypatch):
    """Without bubblewrap: new user, network and PID namespaces plus the limits. The root
    and /tmp are not private there (docs/tasks.md says so), so those attacks are left out."""
    import shutil

    import grpo_ablate.sandbox as sandbox

    if not shutil.which("unshare"):
        pytest.skip("no unshare on this machine")
    monkeypatch.setattr(sandbox, "isolation_available", lambda: "unshare")
    monkeypatch.setenv("GRPO_SANDBOX_SECRET", SECRET)
    programs = adversarial(tmp_path / "marker.txt", listener.getsockname()[1])
    for name in FALLBACK_GUARANTEES:
        result = run(*programs[name], TIMEOUT, Limits(cpu_seconds=2, memory_mb=512))
        assert result.passed == 0 and result.isolation == "unshare", (name, result)
        assert not sandbox_processes(), name
        with pytest.raises(TimeoutError):
            listener.accept()
