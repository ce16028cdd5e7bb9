"""The statistics stage: pure functions over a results table (pandas), independent of
torch and TRL, so it runs on records from any trainer or on a CSV (grpo_ablate/results/
reads them). What the data cannot answer is a ValueError (errors.py), which the report
words as its command line's one-line message.

columns.py      the results table's identity columns, and which columns are metrics
significance.py one comparison: paired t / Welch t / partially overlapping t, CIs, TOST,
                effect sizes, power
correct.py      multiple-comparison control: Holm, Benjamini-Hochberg
stratum.py      one (model, task) slice as seed x arm arrays; a comparison on them
crossed.py      seeds and held-out prompts both as chance: the task scope's test
independent.py  the task scope's test for independent runs: no seed effect, every run
verdicts.py     the verdict rules (the inert rule included) and the report's settings
arm_result.py   ArmResult and StratumReport: frozen, serialised at the report boundary
metric_table.py one metric: every arm's comparison, corrected, and its fixed-n verdict
ladder_replay.py  an adaptive sweep's looks re-taken from its records; their verdicts
accounting.py   what sits beside a verdict: activity, budget, EMA vs raw, the single-run
                illusion, the recommended recipe, monitoring-rule hits
waiting.py      what an open verdict waits on, and the seeds that would settle it
decide.py       report.json's statistics: each stratum's arms through those steps; sign flips
sequential.py   the adaptive ladder's spending boundaries and looks
expected.py     an adaptive ladder's expected runs, by simulation (for `plan`)
early_stop.py   an early-stop sweep's looks (fractions of each run's steps), replayed from its runs
expected_stops.py  an early-stop sweep's expected run-steps, by simulation (for `plan`)
additivity.py   whether a combination's effect is the sum of its tricks' effects
screening.py    a screening design's linear model: effects, Holm, TOST, Lenth's PSE
screening_looks.py    an adaptive screening's looks, replayed from its runs
curves.py       a run's learning curve fitted (ScaleRL's saturating form), or why not
curve_verdicts.py     ceiling or speed per arm; the effect at every budget, a band over them
screening_expected.py what an adaptive screening trains and calls, by simulation
errors.py       SettingError, ResultsError
"""
