"""Ray custom metrics (``ray.util.metrics``), exported by Ray to Prometheus as ``ray_<name>``.

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
brushrl_scorer_none_total              counter    samples one scorer could not score; tag ``scorer_cause``
brushrl_groups_total                   counter    groups by outcome; tag ``status`` (accepted/zero_variance/too_few_valid)
brushrl_step_seconds                   gauge      wall seconds of the last learner step (collect + update + sync)
brushrl_policy_version                 gauge      policy version after the last weight sync
brushrl_renderers_unisolated_total     counter    browsers a renderer started without a network namespace (render.network_isolation: none)
brushrl_turn_reward_mean               gauge      multi-turn revision: mean reward of turn k; tag ``turn``
brushrl_turn_gate_pass_rate            gauge      multi-turn revision: gate pass rate of turn k; tag ``turn``
brushrl_trajectories_improved_share    gauge      multi-turn revision: share of trajectories whose last turn beat their first
brushrl_critic_seconds                 gauge      multi-turn revision: seconds groups waited for critiques, last step
brushrl_sync_logprob_gap               gauge      sync canary: mean |engine - learner| log-prob on the probe after the last sync, nats/token
brushrl_sync_logprob_gap_max           gauge      sync canary: largest per-token |engine - learner| log-prob, nats
brushrl_sync_adapter_shift             gauge      sync canary: the learner's mean |log-prob - base| on the probe, nats/token
brushrl_sync_engine_shift              gauge      sync canary: the rollout engine's mean |log-prob - base| on the probe, nats/token
=====================================  =========  ==========================================

Names, kinds and labels are documented in docs/metrics.md (a test keeps that table, this module,
the Grafana dashboard ``cluster/grafana/brushrl.json`` and a real run's Prometheus endpoint in
agreement). Every metric also carries Ray's own labels (``SessionName``, ``NodeAddress``, ...).
"""

from __future__ import annotations

import threading
import time

import ray
from ray.util import metrics as rm

from brushrl.orchestrator.capacity import LEDGER_STATES  # the ledger's group counts, defined once
from brushrl.render.netns import UNISOLATED
from brushrl.stats import quantile

#: Histogram buckets of one render's wall seconds: the CPU box's 0.25-5 s up to the seeds' 69-96 s
#: renders and the 90 s deadline (shared/notes/seeds.md).
RENDER_BUCKETS_S = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 300)
#: Quantiles of the last step's render seconds published as ``brushrl_render_quantile_seconds``.
RENDER_QUANTILES = (0.5, 0.95)


def _refresh_period_s() -> float:
    """Seconds between re-recordings of the gauges: half of Ray's metrics report interval.

    Ray 2.60's metrics agent drops a gauge's series ``2 * metrics_report_interval_ms`` (10 s by
    default) after the process last recorded it (``ray/_private/telemetry/
    open_telemetry_metric_recorder.py``, ``_gauge_metric_ttl_s``), while a learner step lasts
    minutes (the seeds': 15-18 min), so a gauge set once per step would be gone most of the time.
    """
    try:
        return max(0.25, ray._config.metrics_report_interval_ms() / 2000)  # noqa: SLF001 - Ray's own setting
    except Exception:  # noqa: BLE001 - a private API; the default interval is 10 s
        return 5.0


class _GaugeRefresher:
    """Re-records the last value of every gauge series of this process until a newer run replaces them.

    One per process (``REFRESHER``), on a daemon thread started with the first value. ``forget``
    drops every remembered series: a new ``PipelineMetrics`` (a new run in the same process) must
    not have the previous run's values re-recorded over its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple, tuple] = {}
        self._thread: threading.Thread | None = None

    def remember(self, gauge: rm.Gauge, value: float, tags: dict | None) -> None:
        with self._lock:
            self._last[(id(gauge), tuple(sorted((tags or {}).items())))] = (gauge, value, tags)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="brushrl-gauge-refresh", daemon=True)
                self._thread.start()

    def forget(self) -> None:
        with self._lock:
            self._last.clear()

    def _run(self) -> None:
        period = _refresh_period_s()
        while True:
            time.sleep(period)
            if not ray.is_initialized():
                continue
            with self._lock:
                series = list(self._last.values())
            for gauge, value, tags in series:
                try:
                    gauge.set(value, tags=tags)
                except Exception:  # noqa: BLE001 - Ray shut down between the check and the call
                    break


REFRESHER = _GaugeRefresher()


class KeptGauge:
    """A ``ray.util.metrics.Gauge`` whose last value per tag set stays on the endpoint between sets
    (``_GaugeRefresher``); same ``set(value, tags=None)``."""

    def __init__(self, name: str, description: str, tag_keys: tuple[str, ...] = ()) -> None:
        self._gauge = rm.Gauge(name, description, tag_keys=tag_keys)

    def set(self, value: float, tags: dict[str, str] | None = None) -> None:
        self._gauge.set(value, tags=tags)
        REFRESHER.remember(self._gauge, value, tags)


class PipelineMetrics:
    """Holds the metric objects; create one per process after ``ray.init``.

    Every gauge is a ``KeptGauge``: its last value stays on the node's Prometheus endpoint while
    the process lives (Ray alone drops it ~20 s after the last ``set``, long before the next step),
    until a newer ``PipelineMetrics`` in the same process takes over the names.
    """

    def __init__(self) -> None:
        REFRESHER.forget()
        self.renders = rm.Counter("brushrl_renders_total", "Renders finished", tag_keys=("status",))
        self.renders_per_s = KeptGauge("brushrl_renders_per_second", "Renders per wall second, last step")
        self.render_s = KeptGauge("brushrl_render_seconds", "Mean render wall seconds, last step")
        self.render_q = KeptGauge("brushrl_render_quantile_seconds", "Render wall seconds quantile, last step",
                                 tag_keys=("quantile",))
        self.render_hist = rm.Histogram("brushrl_render_duration_seconds", "Wall seconds of one render",
                                        boundaries=list(RENDER_BUCKETS_S))
        self.queue = KeptGauge("brushrl_queue_depth", "Jobs waiting for a free worker", tag_keys=("queue",))
        self.inflight = KeptGauge("brushrl_inflight_groups", "Groups being generated, rendered or scored")
        self.renderers = KeptGauge("brushrl_renderers", "Renderer actors in the pool")
        self.samples = rm.Counter("brushrl_samples_total", "Completions produced")
        self.render_cache = KeptGauge("brushrl_render_cache_hit_rate", "Render cache hit rate, last step")
        self.gate = rm.Counter("brushrl_gate_verdicts_total", "Gate verdicts", tag_keys=("verdict",))
        self.gate_pass = KeptGauge("brushrl_gate_pass_rate", "Gate pass rate, last step")
        self.reward = KeptGauge("brushrl_reward_mean", "Mean reward component, last step", tag_keys=("component",))
        self.none = rm.Counter("brushrl_reward_none_total", "None rewards", tag_keys=("cause",))
        self.scorer_none = rm.Counter("brushrl_scorer_none_total", "Samples a scorer could not score",
                                      tag_keys=("scorer_cause",))
        self.groups = rm.Counter("brushrl_groups_total", "Groups by outcome", tag_keys=("status",))
        self.staleness = KeptGauge("brushrl_staleness_steps", "Largest policy-version lag of a trained sample, last step")
        self.step_s = KeptGauge("brushrl_step_seconds", "Wall seconds of the last step")
        self.update_s = KeptGauge("brushrl_learner_update_seconds", "Optimizer-step seconds of the last step")
        self.idle = KeptGauge("brushrl_learner_idle_share", "Share of the last step the learner was idle")
        self.sync_s = KeptGauge("brushrl_weight_sync_seconds", "Seconds of the last weight sync to the rollout engine")
        self.version = KeptGauge("brushrl_policy_version", "Policy version that generated the last step's rollouts")
        self.ledger = KeptGauge("brushrl_pipeline_groups", "Group ledger counts", tag_keys=("state",))
        # Incremented by the renderer actors (count_unisolated_renderer); declared here so that the
        # driver's metric table is complete.
        self.unisolated = rm.Counter(*UNISOLATED)
        self.turn_reward = KeptGauge("brushrl_turn_reward_mean", "Mean reward of one revision turn, last step",
                                    tag_keys=("turn",))
        self.turn_gate = KeptGauge("brushrl_turn_gate_pass_rate", "Gate pass rate of one revision turn, last step",
                                  tag_keys=("turn",))
        self.improved = KeptGauge("brushrl_trajectories_improved_share",
                                 "Share of trajectories whose last turn beat their first, last step")
        self.critic_s = KeptGauge("brushrl_critic_seconds", "Seconds groups waited for critiques, last step")
        #: the sync canary's gauges by metrics.jsonl key (brushrl.orchestrator.sync_check)
        self.sync = {
            "sync/logprob_gap": KeptGauge("brushrl_sync_logprob_gap",
                                          "Mean |engine - learner| log-prob on the sync probe, nats/token"),
            "sync/logprob_gap_max": KeptGauge("brushrl_sync_logprob_gap_max",
                                              "Largest |engine - learner| token log-prob on the sync probe, nats"),
            "sync/adapter_shift": KeptGauge("brushrl_sync_adapter_shift",
                                            "Learner's mean |log-prob - base| on the sync probe, nats/token"),
            "sync/engine_shift": KeptGauge("brushrl_sync_engine_shift",
                                           "Rollout engine's mean |log-prob - base| on the sync probe, nats/token"),
        }
        #: what the step's passing paintings look like (brushrl.reward.painting_metrics), by metrics.jsonl key
        self.paint = {
            "paint/subject_fidelity": KeptGauge("brushrl_paint_subject_fidelity",
                                                "Share of the last step's passing paintings attributed to their own pool subject"),
            "paint/diversity": KeptGauge("brushrl_paint_diversity",
                                         "Mean within-group diversity of the last step's passing paintings, 0-1"),
            "paint/copies": KeptGauge("brushrl_paint_copies", "Passing paintings of the last step flagged as pool copies"),
        }
        # Measured with Ray 2.60: one gauge that was declared but never set made the node's exporter
        # drop *every* gauge (counters still came through), so each gauge starts at 0.
        for state in LEDGER_STATES:
            self.ledger.set(0, tags={"state": state})
        self.queue.set(0, tags={"queue": "render"})
        for gauge in (self.turn_reward, self.turn_gate):
            gauge.set(0, tags={"turn": "1"})
        for gauge in (self.inflight, self.renderers, self.render_cache, self.gate_pass, self.staleness,
                      self.step_s, self.update_s, self.idle, self.sync_s, self.version, self.improved, self.critic_s,
                      *self.sync.values(), *self.paint.values()):
            gauge.set(0)

    def render_queue(self, queued: int, in_flight: int) -> None:
        """``RenderPool`` progress: ``queued`` jobs wait for a renderer, ``in_flight`` are rendering."""
        self.queue.set(queued, tags={"queue": "render"})

    def groups_in_flight(self, n: int) -> None:
        """Groups the producer is working on now."""
        self.inflight.set(n)

    def publish(self, record: dict, counts: dict[str, dict[str, int]], render_times: list[float] = ()) -> None:
        """Publish one step's metrics.

        Args:
            record: the step's ``metrics.jsonl`` record (keys as written by the orchestrator).
            counts: this step's increments: ``{"render": {status: n}, "gate": {verdict: n},
                "none": {cause: n}, "groups": {status: n}}``.
            render_times: wall seconds of each of the step's renders.
        """
        for tag, key, counter in (
            ("status", "render", self.renders),
            ("verdict", "gate", self.gate),
            ("cause", "none", self.none),
            ("status", "groups", self.groups),
            ("scorer_cause", "scorer_none", self.scorer_none),
        ):
            for value, n in counts.get(key, {}).items():
                if n:
                    counter.inc(n, tags={tag: value})
        if record.get("samples"):
            self.samples.inc(record["samples"])
        for t in render_times:
            self.render_hist.observe(t)
        for q in RENDER_QUANTILES:
            self.render_q.set(quantile(list(render_times), q), tags={"quantile": f"{q:g}"})
        self.renders_per_s.set(record.get("render/per_s", 0.0))
        self.render_s.set(record.get("render/mean_s", 0.0))
        self.render_cache.set(record.get("render/cache_hit_rate", 0.0))
        self.gate_pass.set(record.get("gate/pass_rate", 0.0))
        for key, value in record.items():
            if key.startswith("reward/") and value is not None:
                name = "total" if key == "reward/mean" else key.split("/", 1)[1]
                self.reward.set(float(value), tags={"component": name})
        self.staleness.set(record.get("staleness/max") or 0)
        step_s = record.get("time/step_s", 0.0)
        self.step_s.set(step_s)
        update_s, sync_s = record.get("time/update_s", 0.0), record.get("time/sync_s", 0.0)
        self.update_s.set(update_s)
        self.sync_s.set(sync_s)
        if "learner/idle_share" in record:  # measured by the async loop
            self.idle.set(record["learner/idle_share"])
        else:
            self.idle.set(max(0.0, 1.0 - (update_s + sync_s) / step_s) if step_s else 0.0)
        for state in LEDGER_STATES:
            if f"ledger/{state}" in record:
                self.ledger.set(record[f"ledger/{state}"], tags={"state": state})
        self.version.set(record.get("policy_version", 0))
        for key, value in record.items():  # multi-turn revision: turn/<k>/reward_mean, turn/<k>/gate_pass_rate
            if key.startswith("turn/") and value is not None:
                _, turn, name = key.split("/")
                gauge = {"reward_mean": self.turn_reward, "gate_pass_rate": self.turn_gate}.get(name)
                if gauge is not None:
                    gauge.set(float(value), tags={"turn": turn})
        if record.get("trajectory/improved_share") is not None:
            self.improved.set(record["trajectory/improved_share"])
        if "time/critic_s" in record:
            self.critic_s.set(record["time/critic_s"])
        for key, gauge in self.sync.items():  # absent: a skipped step (no sync) or the canary disabled
            if key in record:
                gauge.set(record[key])
        for key, gauge in self.paint.items():  # None: nothing measurable this step; the gauge keeps its value
            if record.get(key) is not None:
                gauge.set(record[key])
