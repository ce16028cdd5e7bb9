"""The tricks TRL lacks, one module per trick: its tensor code, small functions on tensors,
and its declaration (`hook_tricks.register`), made when the module is imported. The built-in
ones are imported by the registry's import list (`grpo_ablate.hook_tricks.BUILT_IN`); a
variant's module, like a user's, by its own trick YAML (`trick.modules`). Native tricks (beta,
grad clip, LR schedule, entropy bonus, G, temperature, epsilon-clip with reuse) are just
config: see conf/trick/. trl_hooks.py calls them at TRL's hook points.

Importing this package is cheap: each module loads torch where it computes.
"""
