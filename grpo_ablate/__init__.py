"""grpo-ablate: which GRPO training tricks actually matter, measured over seeds.

Data flow, one package per stage: config -> launch -> training -> records -> results -> stats
-> report (docs/architecture.md draws it).
"""

__version__ = "0.1.0"
