"""The orchestrator: connects rollout, gate, render, reward and learner into the training loop."""
