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
import functools
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

STATUSES = ("ok", "failed", "timeout", "error", "killed")
# Each sandbox runs as its own unprivileged uid, drawn from a range no account uses: the
# process limit counts per uid, so concurrent sandboxes do not share (or exhaust) one budget.
SANDBOX_UIDS = (200000, 260000)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
RESULT_BYTES = 65536
_STDERR = subprocess.DEVNULL


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
                raise ValueError(f"{key}={value}: must be an integer in [{lo}, {hi}]")


# The harness: reads the nonce, silences the program's output, runs the program, then the
# tests' statements in order (split by the parent: no ast or json import here, each costs
# ~20 ms of start-up): a statement holding an assert is one test, the others are setup (one
# that raises ends the run, status error), and writes one tagged result line to the saved
# stdout.
HARNESS = r'''
import os, sys
nonce = sys.stdin.readline().strip()
out = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1); os.dup2(null, 2)
steps = eval(open("tests.repr").read(), {"__builtins__": {}})
total = sum(1 for _, counted in steps if counted) or 1
passed = 0
def report(status, detail=""):
    detail = detail.replace("\n", " ")[:200]
    out.write(f"{nonce} {passed} {total} {status} {detail}\n")
    out.flush()
    os._exit(0)
ns = {"__name__": "__main__"}
try:
    exec(compile(open("program.py").read(), "program.py", "exec"), ns)
except BaseException as exc:
    report("error", type(exc).__name__ + ": " + str(exc))
for source, counted in steps:
    try:
        exec(compile(source, "tests.py", "exec"), ns)
        passed += counted
    except BaseException as exc:
        if not counted:
            report("error", "setup: " + type(exc).__name__ + ": " + str(exc))
if not any(counted for _, counted in steps):
    passed = 1
report("ok" if passed == total else "failed")
'''


# CPython 3.11's ast.parse is not thread-safe: run_many's threads parsing at once raised
# "SystemError: AST constructor recursion depth mismatch". One parse at a time.
_PARSE = threading.Lock()


def split_tests(tests: str) -> list[tuple[str, bool]]:
    """The tests' top-level statements in order, each marked True when it holds an assert
    (one test: it passes when it runs without raising) and False for setup."""
    with _PARSE:
        tree = ast.parse(tests)
    return [(ast.get_source_segment(tests, node) or "",
             any(isinstance(n, ast.Assert) for n in ast.walk(node))) for node in tree.body]


def isolation_available() -> str:
    """Which isolation `run` will use on this machine."""
    if shutil.which("bwrap"):
        return "bwrap"
    if shutil.which("unshare"):
        return "unshare"
    return "rlimits only"


@functools.cache
def interpreter() -> str:
    """The Python that runs generated code: the system's (stdlib only, readable by the
    unprivileged sandbox user) when there is one, else this one."""
    system = shutil.which("python3", path=SAFE_PATH)
    return system or os.path.realpath(sys.executable)


def _world_executable(path: str) -> bool:
    """Whether an unprivileged user can run `path` (every folder on the way searchable)."""
    p = Path(path)
    return all(os.stat(d).st_mode & 0o001 for d in [p, *p.parents])


def _command(isolation: str, workdir: Path) -> list[str]:
    python = [interpreter(), "-I", "-S", "harness.py"]
    if isolation == "bwrap":
        return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--bind", str(workdir), "/tmp/sandbox", "--chdir", "/tmp/sandbox",
                "--clearenv", "--setenv", "PATH", SAFE_PATH, "--setenv", "HOME", "/tmp/sandbox",
                *python]
    if isolation == "unshare":
        return ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork",
                "--kill-child", "--mount-proc", *python]
    return python


def _wrappers(limits: Limits, uid: int | None) -> list[str]:
    """setpriv (drop to the sandbox uid) and prlimit (the limits) as commands in front of the
    sandbox: no preexec function, so the parent is never forked (a training process holding
    a model would take ~0.1 s per fork) and the spawn stays cheap."""
    cpu, mem, size = limits.cpu_seconds, limits.memory_mb * 2**20, limits.file_mb * 2**20
    cmd = ["prlimit", f"--cpu={cpu}:{cpu + 1}", f"--as={mem}", f"--fsize={size}",
           f"--nproc={limits.processes}", "--core=0", "--"]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    return cmd


def run(program: str, tests: str, timeout_s: float = 10.0,
        limits: Limits | None = None) -> SandboxResult:
    """Run `program`, then the statements of `tests` in order, in a sandbox: each top-level
    statement that holds an assert is one test (an `assert`, or a loop of them), the others
    are setup. Never raises for anything the program does; ValueError for bad limits, a
    timeout that is not positive, or tests that are not Python."""
    limits = limits or Limits()
    limits.check()
    if not timeout_s > 0:
        raise ValueError(f"timeout_s={timeout_s}: must be > 0")
    try:
        steps = split_tests(tests)
        total = sum(counted for _, counted in steps) or 1
    except SyntaxError as exc:
        raise ValueError(f"tests: not Python ({exc.msg}, line {exc.lineno})") from None
    isolation = isolation_available()
    uid = secrets.randbelow(SANDBOX_UIDS[1] - SANDBOX_UIDS[0]) + SANDBOX_UIDS[0] \
        if os.geteuid() == 0 and _world_executable(interpreter()) and shutil.which("setpriv") \
        else None
    start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="grpo-ablate-sandbox-"))
    try:
        (workdir / "program.py").write_text(program)
        (workdir / "tests.repr").write_text(repr(steps))
        (workdir / "harness.py").write_text(HARNESS)
        if uid is not None:
            os.chown(workdir, uid, uid)
        nonce = secrets.token_hex(16)
        # The result comes back through a file outside the sandbox's folder, read up to
        # RESULT_BYTES: a program that floods its output cannot flood this process.
        with tempfile.TemporaryFile() as result:
            proc = subprocess.Popen(
                [*_wrappers(limits, uid), *_command(isolation, workdir)], cwd=workdir,
                stdin=subprocess.PIPE, stdout=result, stderr=_STDERR, start_new_session=True,
                env={"PATH": SAFE_PATH, "HOME": str(workdir)})
            try:
                timed_out = not _wait(proc, nonce.encode() + b"\n", timeout_s)
            finally:
                _kill_group(proc)
                # bwrap returns as soon as the program exits, while its PID namespace (the
                # program's children: a fork bomb's, a daemon) is torn down afterwards, and a
                # killed sandbox dies asynchronously: whatever still runs as the sandbox's
                # uid is killed, and waited for, before this returns.
                if uid is not None:
                    _clear_uid(uid)
            result.seek(0)
            out = result.read(RESULT_BYTES)
        seconds = time.perf_counter() - start
        if timed_out:
            return SandboxResult(0, total, "timeout", seconds, isolation, f"over {timeout_s}s")
        line = next((ln for ln in out.decode(errors="replace").splitlines()
                     if ln.startswith(nonce)), None)
        if line is None:  # no result: the process died (signal, limit) before reporting
            how = f"signal {-proc.returncode}" if proc.returncode and proc.returncode < 0 \
                else f"exit {proc.returncode}"
            return SandboxResult(0, total, "killed", seconds, isolation, how)
        try:
            _, passed_s, _, status, *detail = line.split(" ", 4)
            passed = min(int(passed_s), total)
        except ValueError:
            return SandboxResult(0, total, "error", seconds, isolation, "unreadable result")
        status = status if status in STATUSES else "error"
        return SandboxResult(passed, total, status, seconds, isolation, " ".join(detail))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _wait(proc: subprocess.Popen, stdin: bytes, timeout_s: float) -> bool:
    """Hand the sandbox its stdin and wait for it to end; False on timeout. Waits on a pidfd
    (woken the moment it exits), not subprocess's sleep-and-poll (up to 50 ms late a run)."""
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or platform): poll
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    return bool(ready)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group the sandbox started in (and so everything it left running)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _clear_uid(uid: int, settle_s: float = 0.05) -> None:
    """Return once no process of the sandbox's uid runs. A namespace whose bwrap has ended
    is already being killed (--die-with-parent): give that a moment, which is cheaper than
    starting a killer, then kill whatever is left."""
    deadline = time.monotonic() + settle_s
    while _running_as(uid):
        if time.monotonic() > deadline:
            _kill_uid(uid)
            return
        time.sleep(0.002)


def _kill_uid(uid: int, grace_s: float = 2.0) -> None:
    """Kill every process of the sandbox's uid — daemons that left the process group
    included — and wait until none is running (zombies aside)."""
    deadline = time.monotonic() + grace_s
    while True:  # as that uid, kill(-1) reaches exactly its processes (and the killer itself)
        subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                        "kill", "-KILL", "-1"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if not _running_as(uid) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _running_as(uid: int) -> bool:
    """Whether a process of `uid` is running (zombies aside). /proc/<pid> is owned by the
    process's effective uid, so one stat per process finds the candidates cheaply."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            return True
    return False


def run_many(jobs: list[tuple[str, str]], timeout_s: float = 10.0, limits: Limits | None = None,
             workers: int | None = None) -> list[SandboxResult]:
    """Score many (program, tests) pairs in parallel: each is its own sandboxed process, so
    threads suffice to keep every core busy."""
    workers = workers or max(2, 2 * (os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: run(job[0], job[1], timeout_s, limits), jobs))
