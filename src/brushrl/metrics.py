"""Ray custom metrics (``ray.util.metrics``), exported by Ray to Prometheus as ``ray_<name>``.

Names and tags:

=====================================  =========  ==========================================
name                                   kind       meaning
=====================================  =========  ==========================================
brushrl_renders_total                  counter    renders finished; tag ``status`` (ok/error/timeout/infra)
brushrl_renders_per_second             gauge      renders per wall second over the last step
brushrl_render_seconds                 gauge      mean render wall seconds over the last step
brushrl_render_cache_hit_rate          gauge      share of the last step's renders answered by the render cache
brushrl_gate_verdicts_total            counter    gate verdicts; tag ``verdict`` (pass or a reason code)
brushrl_gate_pass_rate                 gauge      share of the last step's completions that passed the gate
brushrl_reward_mean                    gauge      mean of a reward component over the last step; tag ``component`` (``total`` too)
brushrl_reward_none_total              counter    samples whose reward is None; tag ``cause``
brushrl_groups_total                   counter    groups by outcome; tag ``status`` (accepted/zero_variance/too_few_valid)
brushrl_step_seconds                   gauge      wall seconds of the last learner step (collect + update + sync)
brushrl_policy_version                 gauge      policy version after the last weight sync
brushrl_pipeline_groups                gauge      group ledger; tag ``state`` (submitted/accepted/filtered/failed/stale/running)
brushrl_staleness                      gauge      policy versions behind, trained groups of the last step; tag ``stat`` (mean/max)
brushrl_learner_idle_share             gauge      share of the last step's wall time the learner was not training
=====================================  =========  ==========================================
"""

from __future__ import annotations

from ray.util import metrics as rm


class PipelineMetrics:
    """Holds the metric objects; create one per process after ``ray.init``."""

    def __init__(self) -> None:
        self.renders = rm.Counter("brushrl_renders_total", "Renders finished", tag_keys=("status",))
        self.renders_per_s = rm.Gauge("brushrl_renders_per_second", "Renders per wall second, last step")
        self.render_s = rm.Gauge("brushrl_render_seconds", "Mean render wall seconds, last step")
        self.render_cache = rm.Gauge("brushrl_render_cache_hit_rate", "Render cache hit rate, last step")
        self.gate = rm.Counter("brushrl_gate_verdicts_total", "Gate verdicts", tag_keys=("verdict",))
        self.gate_pass = rm.Gauge("brushrl_gate_pass_rate", "Gate pass rate, last step")
        self.reward = rm.Gauge("brushrl_reward_mean", "Mean reward component, last step", tag_keys=("component",))
        self.none = rm.Counter("brushrl_reward_none_total", "None rewards", tag_keys=("cause",))
        self.groups = rm.Counter("brushrl_groups_total", "Groups by outcome", tag_keys=("status",))
        self.step_s = rm.Gauge("brushrl_step_seconds", "Wall seconds of the last step")
        self.version = rm.Gauge("brushrl_policy_version", "Policy version after the last sync")
        self.ledger = rm.Gauge("brushrl_pipeline_groups", "Group ledger counts", tag_keys=("state",))
        self.staleness = rm.Gauge("brushrl_staleness", "Staleness of trained groups, last step", tag_keys=("stat",))
        self.idle = rm.Gauge("brushrl_learner_idle_share", "Learner idle share, last step")

    def publish(self, record: dict, counts: dict[str, dict[str, int]]) -> None:
        """Publish one step's metrics.

        Args:
            record: the step's ``metrics.jsonl`` record (keys as written by the orchestrator;
                ``ledger/<state>``, ``staleness/mean|max`` and ``learner/idle_share`` when present).
            counts: this step's increments: ``{"render": {status: n}, "gate": {verdict: n},
                "none": {cause: n}, "groups": {status: n}}``.
        """
        for tag, key, counter in (
            ("status", "render", self.renders),
            ("verdict", "gate", self.gate),
            ("cause", "none", self.none),
            ("status", "groups", self.groups),
        ):
            for value, n in counts.get(key, {}).items():
                if n:
                    counter.inc(n, tags={tag: value})
        self.renders_per_s.set(record.get("render/per_s", 0.0))
        self.render_s.set(record.get("render/mean_s", 0.0))
        self.render_cache.set(record.get("render/cache_hit_rate", 0.0))
        self.gate_pass.set(record.get("gate/pass_rate", 0.0))
        for key, value in record.items():
            if key.startswith("reward/") and value is not None:
                name = "total" if key == "reward/mean" else key.split("/", 1)[1]
                self.reward.set(float(value), tags={"component": name})
        self.step_s.set(record.get("time/step_s", 0.0))
        self.version.set(record.get("policy_version", 0))
        for state in ("submitted", "accepted", "filtered", "failed", "stale", "running"):
            if f"ledger/{state}" in record:
                self.ledger.set(record[f"ledger/{state}"], tags={"state": state})
        for stat in ("mean", "max"):
            if record.get(f"staleness/{stat}") is not None:
                self.staleness.set(record[f"staleness/{stat}"], tags={"stat": stat})
        if "learner/idle_share" in record:
            self.idle.set(record["learner/idle_share"])
