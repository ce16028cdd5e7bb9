"""Run untrusted generated code against its tests: `run(program, tests, timeout_s)`.

The isolation is bubblewrap's (Debian's `bubblewrap`, the sandbox Flatpak is built on), not
hand-written: a read-only root, a private /tmp and working directory, new network, PID, IPC
and user namespaces, `--die-with-parent`, `--new-session`, and an empty environment. On top,
resource limits: CPU time, address space, file size, process count (counted against an
unprivileged uid: the sandbox drops root before bubblewrap starts), and a wall-clock timeout
after which the whole process group is killed. Where bubblewrap is missing, `unshare`
(new user, network and PID namespaces) with the same limits is the fallback, and the result
says which isolation ran (`SandboxResult.isolation`).

What this does not protect: the score itself. The program runs in the test harness's
interpreter, so a program written to fake its own result could; the harness makes that hard
(a random nonce, read before the program runs, tags the result line), not impossible.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.errors import UserError

STATUSES = ("ok", "failed", "timeout", "error", "killed")
NOBODY = 65534
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxResult:
    passed: int
    total: int
    status: str          # ok | failed | timeout | error | killed
    seconds: float
    isolation: str = ""  # bwrap | unshare | rlimits only
    detail: str = ""

    @property
    def reward(self) -> float:
        """The fraction of tests passed (0 when nothing ran)."""
        return self.passed / self.total if self.total else 0.0


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 5
    memory_mb: int = 1024
    file_mb: int = 16
    processes: int = 32

    def check(self) -> None:
        bounds = {"cpu_seconds": (1, 600), "memory_mb": (64, 65536), "file_mb": (1, 4096),
                  "processes": (1, 4096)}
        for key, (lo, hi) in bounds.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise UserError(f"sandbox.{key}={value}: must be an integer in [{lo}, {hi}]")


# The harness: reads the nonce, silences the program's output, runs the program, then each
# top-level test statement, and writes one tagged result line to the saved stdout.
HARNESS = r'''
import ast, json, os, sys
nonce = sys.stdin.readline().strip()
out = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1); os.dup2(null, 2)
src = open("tests.py").read()
tree = ast.parse(src)
tests = [n for n in tree.body if isinstance(n, ast.Assert)]
setup = [n for n in tree.body if not isinstance(n, ast.Assert)]
total = len(tests) or 1
def report(passed, status, detail=""):
    out.write(nonce + json.dumps({"passed": passed, "total": total, "status": status,
                                  "detail": detail[:200]}) + "\n")
    out.flush()
    os._exit(0)
ns = {"__name__": "__main__"}
try:
    exec(compile(open("program.py").read(), "program.py", "exec"), ns)
    exec(compile(ast.Module(setup, []), "tests.py", "exec"), ns)
except BaseException as exc:
    report(0, "error", type(exc).__name__ + ": " + str(exc))
if not tests:
    report(1, "ok")
passed = 0
for node in tests:
    try:
        exec(compile(ast.Module([node], []), "tests.py", "exec"), ns)
        passed += 1
    except BaseException:
        pass
report(passed, "ok" if passed == total else "failed")
'''


def isolation_available() -> str:
    """Which isolation `run` will use on this machine."""
    if shutil.which("bwrap"):
        return "bwrap"
    if shutil.which("unshare"):
        return "unshare"
    return "rlimits only"


def _command(isolation: str, workdir: Path) -> list[str]:
    python = [sys.executable, "-I", "-S", "harness.py"] if isolation == "rlimits only" else \
        [os.path.realpath(sys.executable), "-I", "-S", "harness.py"]
    if isolation == "bwrap":
        return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--bind", str(workdir), "/sandbox", "--chdir", "/sandbox",
                "--clearenv", "--setenv", "PATH", SAFE_PATH, "--setenv", "HOME", "/sandbox",
                *python]
    if isolation == "unshare":
        return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork",
                "--kill-child", "--mount-proc", *python]
    return python


def _limit(limits: Limits, drop_root: bool):
    def apply() -> None:
        if drop_root:  # process limits bind only a non-root uid
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        cpu = limits.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        mem = limits.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        size = limits.file_mb * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def run(program: str, tests: str, timeout_s: float = 10.0,
        limits: Limits | None = None) -> SandboxResult:
    """Run `program`, then the top-level `assert` statements of `tests` (each one test; other
    statements are setup), in a sandbox. Never raises for anything the program does."""
    limits = limits or Limits()
    limits.check()
    if not timeout_s > 0:
        raise UserError(f"timeout_s={timeout_s}: must be > 0")
    try:
        total = sum(isinstance(n, ast.Assert) for n in ast.parse(tests).body) or 1
    except SyntaxError as exc:
        raise UserError(f"tests: not Python ({exc.msg}, line {exc.lineno})") from None
    isolation = isolation_available()
    drop_root = os.geteuid() == 0 and isolation != "unshare"
    start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="grpo-ablate-sandbox-"))
    try:
        (workdir / "program.py").write_text(program)
        (workdir / "tests.py").write_text(tests)
        (workdir / "harness.py").write_text(HARNESS)
        if drop_root:
            os.chown(workdir, NOBODY, NOBODY)
        nonce = secrets.token_hex(16)
        proc = subprocess.Popen(
            _command(isolation, workdir), cwd=workdir, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
            env={"PATH": SAFE_PATH, "HOME": str(workdir)},
            preexec_fn=_limit(limits, drop_root))
        try:
            out, _ = proc.communicate(nonce.encode() + b"\n", timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            out = b""
        finally:
            _kill_group(proc)
        seconds = time.perf_counter() - start
        if timed_out:
            return SandboxResult(0, total, "timeout", seconds, isolation, f"over {timeout_s}s")
        line = next((ln for ln in out.decode(errors="replace").splitlines()
                     if ln.startswith(nonce)), None)
        if line is None:  # no result: the process died (signal, limit) before reporting
            how = f"signal {-proc.returncode}" if proc.returncode and proc.returncode < 0 \
                else f"exit {proc.returncode}"
            return SandboxResult(0, total, "killed", seconds, isolation, how)
        got = json.loads(line[len(nonce):])
        return SandboxResult(int(got["passed"]), total, got["status"], seconds, isolation,
                             got.get("detail", ""))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group the sandbox started in (and so everything it left running)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_many(jobs: list[tuple[str, str]], timeout_s: float = 10.0, limits: Limits | None = None,
             workers: int | None = None) -> list[SandboxResult]:
    """Score many (program, tests) pairs in parallel: each is its own sandboxed process, so
    threads suffice to keep every core busy."""
    workers = workers or max(2, 2 * (os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: run(job[0], job[1], timeout_s, limits), jobs))
