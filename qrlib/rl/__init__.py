"""RL layer: rewards, the reward environment and the GRPO trainer.

* :mod:`~qrlib.rl.rewards`: the reward registry and the ranking basics rewards share (the
  papers' rewards register from ``qrlib/methods/<paper>/rewards.py``);
* :mod:`~qrlib.rl.env`: :class:`~qrlib.rl.env.RewardEnv`, completions -> retrieval ->
  rewards, with TRL's reward-function signature;
* :mod:`~qrlib.rl.train`: the trainer (``python -m qrlib.rl.train --config FILE``): the
  orchestration of one run, re-exporting the names its callers use; its parts are
  :mod:`~qrlib.rl.config` (``TrainConfig``, the algorithm presets, ``load_config``, the
  device defaults), :mod:`~qrlib.rl.rows` (training rows, the prompt dataset, the reward
  environment), :mod:`~qrlib.rl.steplog` (reward timing, the per-step log, quiet trainer
  output), :mod:`~qrlib.rl.checkpoints` (complete checkpoints, run folders, finished runs),
  :mod:`~qrlib.rl.sft` (the SFT cold start), :mod:`~qrlib.rl.trainer` (TRL's
  ``GRPOConfig`` and qrlib's ``GRPOTrainer`` subclass) and :mod:`~qrlib.rl.cli` (the
  command line);
* :mod:`~qrlib.rl.sharedprefix`: the shared-prompt log-prob pass used by the trainer.

No re-exports: importing :mod:`qrlib.rl.rewards` must not load the trainer.
"""
