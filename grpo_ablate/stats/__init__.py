"""The statistics stage: pure functions over a results table (pandas), independent of
torch and TRL, so it runs on records from any trainer or on a CSV.

tests.py     one comparison: paired t / Welch t, CIs, TOST, effect sizes, power
correct.py   multiple-comparison control: Holm, Benjamini-Hochberg
table.py     records or CSV -> one row per (arm, seed)
decide.py    verdicts per stratum, the single-run illusion, the recommended recipe
sequential.py  the adaptive ladder's spending boundaries and looks
plan.py      an adaptive sweep's plan file (declared once, read by the report)
"""
