"""RL layer: rewards, the reward environment and the GRPO trainer.

* :mod:`~qrlib.rl.rewards`: the reward registry and the ranking basics rewards share (the
  papers' rewards register from ``qrlib/methods/<paper>/rewards.py``);
* :mod:`~qrlib.rl.env`: :class:`~qrlib.rl.env.RewardEnv`, completions -> retrieval ->
  rewards, with TRL's reward-function signature;
* :mod:`~qrlib.rl.train`: the trainer (``python -m qrlib.rl.train --config FILE``);
* :mod:`~qrlib.rl.sharedprefix`: the shared-prompt log-prob pass used by the trainer.

No re-exports: importing :mod:`qrlib.rl.rewards` must not load the trainer.
"""
