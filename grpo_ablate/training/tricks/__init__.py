"""The tricks TRL lacks, as small pure functions on tensors, one module per trick or family;
a module that declares a hook trick registers it (grpo_ablate/hook_tricks.py) when imported.
Native tricks (beta, grad clip, LR schedule, entropy bonus, G, temperature, epsilon-clip with
reuse) are just config: see conf/trick/. trl_hooks.py calls them at TRL's hook points.

reward_shaping    reward clip and length penalty (the rewards point)
advantages        global advantage normalisation, low-reward filtering
dynamic_sampling  DAPO's dynamic sampling (what is sampled)
ema               weight averaging (a callback)
overlong          TRL's soft overlong punishment as a second, counted reward
and one module for each variant declared as a hook trick, named by its own trick YAML
(`trick.modules`), exactly as a user's trick is added.

Importing this package is cheap: each module loads torch itself.
"""
