"""brushrl: Ray-distributed GRPO that teaches code LLMs to paint watercolours with p5.brush.

Stages, one package each: ``rollout`` (policy sampling), ``gate`` (static and runtime checks),
``render`` (headless Chromium pool), ``reward`` (components and their combination), ``learner``
(TRL GRPO loss + PEFT LoRA), ``orchestrator`` (the loop that connects them), ``artifacts`` (the run
directory and gallery). The floors they sit on, each importing only from below: docs/architecture.md.
"""

__version__ = "0.1.0"
