"""The orchestrator: connects rollout, gate, render, reward and learner into the training loop.

It imports the stages; no stage imports it. Read ``trainer.py`` first (the driver: build, restore,
loop, stop); docs/async.md has one line per module.
"""
