"""grpo-ablate: which GRPO training tricks actually matter, measured over seeds.

Data flow, one module per stage: config -> train -> store (records) -> stats -> report.
"""

__version__ = "0.1.0"
