"""The results layer: what the statistics read, from disk. One concept per module:

table.py      sweep folders of records, or one CSV -> one row per run (docs/contracts.md)
plan_file.py  an adaptive sweep's declared plan, `<sweep>/adaptive_plan.json`

Bad files and folders are UserErrors with one line; everything below (stats/) is pure.
"""
