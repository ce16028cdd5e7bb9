"""The GPU check prepared on a CPU machine: `scripts/gpu_check.sh --dry-run` lists
every step and checks the wheels it would install on the GPU machine against the list and
pyproject's pins: exit 0 with them all, exit 1 with one line naming what is wrong. The wheels
are downloaded for CPython 3.12 / manylinux by scripts/gpu_wheels.sh, as a user does."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whl")
    res = subprocess.run(["bash", "scripts/gpu_wheels.sh", str(folder)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        pytest.skip("the package registry could not be reached for the GPU wheels: "
                    + (res.stderr.strip().splitlines() or ["?"])[-1][:200])
    return folder


def dry_run(folder: Path, listing: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "GPU_CHECK_WHEELS": str(folder)}
    if listing:
        env["GPU_WHEELS_LIST"] = str(listing)
    return subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run"], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, env=env)


def test_the_dry_run_lists_the_steps_and_accepts_the_downloaded_wheels(wheels):
    res = dry_run(wheels)
    assert res.returncode == 0, res.stdout + res.stderr
    steps = [ln for ln in res.stdout.splitlines() if ln.startswith("step ")]
    assert [s.split(":")[0] for s in steps] == [
        "step 1 install", "step 2 gpu tests", "step 3 overhead", "step 4 scale", "step 5 sweep",
        "step 6 refusals"]
    listed = [ln for ln in (ROOT / "scripts" / "gpu_wheels.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    assert res.stdout.count(": ok") == len(listed) and f"gpu_wheels={len(listed)}" in res.stdout
    mib = float(next(ln for ln in res.stdout.splitlines() if ln.startswith("gpu_wheels_mib="))
                .split("=")[1])
    assert mib < 60  # the tree and the wheels travel together, within 64 MiB


def test_a_missing_or_off_pin_wheel_is_one_line_and_exit_1(wheels, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(wheels, partial)
    (trl,) = partial.glob("trl-*.whl")
    trl.unlink()
    res = dry_run(partial)
    assert res.returncode == 1
    assert res.stdout.splitlines()[-1] == \
        f"gpu_check: missing wheel trl==1.16.0 in {partial} (run: bash scripts/gpu_wheels.sh)"
    (hydra,) = partial.glob("hydra_core-*.whl")
    hydra.rename(partial / hydra.name.replace("1.3.8", "1.3.9"))
    shutil.copy(wheels / trl.name, partial / trl.name)
    res = dry_run(partial)
    assert res.returncode == 1 and "missing wheel hydra-core==1.3.8" in res.stdout.splitlines()[-1]
    # A list that names a version outside pyproject's pin (trl>=1.16,<1.17) is refused.
    listing = tmp_path / "list.txt"
    listing.write_text((ROOT / "scripts" / "gpu_wheels.txt").read_text()
                       .replace("hydra-core==1.3.8", "hydra-core==1.3.9")
                       .replace("trl==1.16.0", "trl==1.17.0"))
    (partial / trl.name).rename(partial / trl.name.replace("1.16.0", "1.17.0"))
    res = dry_run(partial, listing)
    assert res.returncode == 1
    assert res.stdout.splitlines()[-1] == \
        "gpu_check: trl==1.17.0 is outside pyproject's pin trl<1.17,>=1.16"
