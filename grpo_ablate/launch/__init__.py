"""The launch layer: turn validated RunSpecs into records, however they are launched.

sweep.py            one job: skip, lock, reuse from the run cache, or train; plan a sweep
progress.py         a sweep's progress, read from the records on disk
run_cache.py        finished runs shared across sweeps, keyed by run identity and machine
adaptive.py         the adaptive seed ladder: next rung from the records, the rung loop
distributed.py      one run on N processes (accelerate launch); GPUs reserved per run
slurm.py            Slurm jobs that end without a record are recorded failed
hydra_callbacks.py  the statistics stage when a plain Hydra multirun ends
"""
