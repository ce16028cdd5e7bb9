"""grpo-ablate's Slurm launcher (`launcher=slurm`): hydra-submitit-launcher's, plus a failed
record for every run whose job ends without one. Hydra loads launchers only from the
hydra_plugins package; the logic is in grpo_ablate/launch/slurm.py."""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.utils import JobReturn

try:
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher
except ImportError:  # the [launchers] extra is not installed: no Slurm launcher
    submitit_launcher = None

if submitit_launcher is not None:
    from grpo_ablate.launch.slurm import record_unfinished, settled_jobs

    class SlurmLauncher(submitit_launcher.SlurmLauncher):
        def launch(self, job_overrides: Sequence[Sequence[str]],
                   initial_job_idx: int) -> Sequence[JobReturn]:
            with settled_jobs(lambda *a: record_unfinished(self, *a)):
                return super().launch(job_overrides, initial_job_idx)
