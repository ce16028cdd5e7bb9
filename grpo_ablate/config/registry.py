"""What grpo-ablate adds to OmegaConf and Hydra: the resolvers the recipe's batch layout is
written with (`${mul:...}`, `${div:...}`, `${micro:...}`, `${cpus:}`, `${threads_per:...}`)
and a catalog's trick list for sweep files (`${tricks:review}`), registered when the config
layer is imported; and the choices that are not files of conf/ (`packaged_choices`):
sweeps/*.yaml as the group `sweep`, so `sweep=<name>` works from any directory and a
misspelt name fails with Hydra's list of options, and renamed tricks' former names as
`trick` choices. Hydra reads those through grpo-ablate's config source
(hydra_plugins/grpo_ablate_configs), not the ConfigStore: Hydra deep-copies the whole store
once per group it lists (`--help` lists about 95), so every node kept there costs each
command."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from omegaconf import OmegaConf

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.config.layout import exact_div, groups_per_process
from grpo_ablate.config.paths import SWEEPS_DIR


def register_resolvers() -> None:
    OmegaConf.register_new_resolver("mul", lambda a, b: int(a) * int(b), replace=True)
    OmegaConf.register_new_resolver("div", exact_div, replace=True)
    # Groups per forward pass on one process: the model file's micro_groups, or fewer when a
    # process holds fewer groups per step (prompts_per_step / launch.processes).
    OmegaConf.register_new_resolver(
        "micro", lambda prompts, micro, procs: min(int(micro), groups_per_process(prompts, procs)),
        replace=True)
    OmegaConf.register_new_resolver("cpus", lambda: os.cpu_count() or 1, replace=True)
    OmegaConf.register_new_resolver("tricks", trick_list, replace=True)
    OmegaConf.register_new_resolver(
        "threads_per", lambda workers: max(1, (os.cpu_count() or 1) // max(1, int(workers))),
        replace=True)


def trick_list(catalog: str, _root_=None) -> str:
    """`${tricks:review}` / `${tricks:variants}` / `${tricks:vllm}` in a sweep file: the
    baseline, the arms a catalog's tricks are compared with (trick.against), then that
    catalog's tricks, from the trick files themselves (a user's `--config-dir` ones too), so
    no sweep keeps the list by hand."""
    tricks = [t for t in load_catalog(config_dirs(_root_)) if t["id"] != "baseline"]
    if catalog not in {t.get("catalog", "review") for t in tricks}:
        raise ValueError(f"tricks:{catalog}: no such catalog; allowed: review, variants, vllm")
    chosen = sorted(t["id"] for t in tricks if t.get("catalog", "review") == catalog)
    against = sorted({t["against"] for t in tricks if t["id"] in chosen and t.get("against")}
                     - set(chosen))
    return ",".join(["baseline", *against, *chosen])


def config_dirs(root) -> list[str]:
    """The local folders on a composed config's search path: `hydra.searchpath` (how
    grpo-ablate's own composition passes `--config-dir`) and the command line's config
    sources (how Hydra's does)."""
    if root is None:
        return []
    found = [e[len("file://"):] for e in OmegaConf.select(root, "hydra.searchpath", default=None)
             or [] if str(e).startswith("file://")]
    found += [src["path"] for src in OmegaConf.select(root, "hydra.runtime.config_sources",
                                                      default=None) or []
              if src.get("schema") == "file" and src.get("provider") == "command-line"]
    return found


@functools.cache
def packaged_choices() -> dict[str, Path | dict]:
    """`<group>/<name>.yaml` -> a sweep file's path, or a former trick name's node: the trick
    under its name now (its file's `trick.formerly`, the one declaration), marked
    `called_as` for the one-line notice. Both are global packages, as the files are."""
    choices: dict[str, Path | dict] = {
        f"sweep/{path.stem}.yaml": path for path in sorted(SWEEPS_DIR.glob("*.yaml"))}
    for t in load_catalog():
        if t.get("formerly"):
            choices[f"trick/{t['formerly']}.yaml"] = {
                "defaults": [f"/trick/{t['id']}"], "trick": {"called_as": t["formerly"]}}
    return choices


register_resolvers()
