"""The results layer: what the statistics read, from disk. One concept per module:

table.py      sweep folders of records, or one CSV -> one row per run (docs/contracts.md)
csv_file.py   a results CSV's columns checked: identity, text, metrics as numbers
plan_file.py  an adaptive sweep's declared plan, `<sweep>/adaptive_plan.json`
early_stop.py an early-stop sweep's plan file, and each run's values at its looks (records and
              pause files)
lm_eval.py    lm-evaluation-harness's per-sample logs -> the long form (one row per document)
curves.py     each run's learning curve (its evaluations against compute), from its history
              or a long CSV with a step column
provenance.py how the results were made: matched or independent runs, the prompts' scope,
              tricks or methods (a CSV's word, the user's, or the records')

Bad files and folders are UserErrors with one line; everything below (stats/) is pure.
"""
