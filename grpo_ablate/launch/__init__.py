"""The launch layer: turn validated RunSpecs into records, however they are launched.

driver.py           the one sweep driver: run_sweep (train what a sweep lacks, then report)
sweeper.py          what grpo-ablate's Hydra sweeper does: each job validated once, the driver
comparisons.py      every arm's comparison arm (the baseline, its `against`) run, or refused
sweep.py            one job: skip, lock, reuse from the run cache, or train; plan and
                    launch a set of runs
progress.py         a sweep's progress, read from the records on disk
run_cache.py        finished runs shared across sweeps, keyed by run identity and machine
adaptive.py         the adaptive seed ladder: next rung from the records, the rung loop
early_stop.py       runs that stop early: next look from the records and pauses, the look loop
distributed.py      one run on N processes (accelerate launch); GPUs reserved per run
slurm.py            Slurm jobs that end without a record are recorded failed
hydra_callbacks.py  the statistics stage when a sweeper that does not report ends a multirun
estimate.py         `plan`: a sweep's runs, wall time, GPU-hours and tokens before it starts
run_cost.py         one run's cost and throughput from finished records
pilot.py            `plan`'s pilot runs: here, or as Slurm jobs of the sweep's launcher
confirm.py          `confirm`: a sweep's recommended recipe run against its baseline
pair.py             `sweep=pair pair=[A,B]`: the 2x2 factorial of two tricks
screening.py        `sweep=screening`: a fractional factorial's points as the sweep's arms
screening_ladder.py `sweep=screening adaptive=true`: replicates of the design, look by look
topology.py         `sweep=leave_one_out` / `sweep=add_one`: a recipe less each trick, a base plus each
"""
