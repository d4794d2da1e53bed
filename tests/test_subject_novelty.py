"""The ``subject`` and ``novelty`` reward components (issue 24, item 3; docs/reward.md "subject and
novelty"): on the starter pool's own PNGs, re-painted by Pillow (turned, scaled, moved: not pixel
copies), through the pool scorer actor's own code path, the config, and one real Ray actor."""

from __future__ import annotations

from pathlib import Path

import pytest

from brushrl.config import (POOL_ACTOR, REWARD_COMPONENTS, REWARD_PRESETS, ConfigError, NoveltyConfig,
                            PoolScorerConfig, SubjectConfig, parse_config)
from brushrl.pool.store import ReferencePool
from brushrl.reward import combine
from brushrl.reward.actor import PoolScorerActor
from brushrl.reward.painting_metrics import MOVES, _moved, novelty, subject_values
from brushrl.reward.pool_scorer import image_features
from brushrl.types import GateVerdict

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "pools" / "starter"
#: The snippet of docs/reward.md that turns both components on.
WEIGHTS = {"gate": 0.05, "length": 0.05, "pool_similarity": 0.6, "subject": 0.2, "novelty": 0.1}


def _prompt(subject: str) -> str:
    return f"Paint {subject} in loose watercolour."


@pytest.fixture(scope="module")
def entries():
    return ReferencePool(POOL).entries


@pytest.fixture(scope="module")
def actor():
    """The pool scorer actor's class, in process (the Ray test below runs it as an actor)."""
    return PoolScorerActor(PoolScorerConfig(path=str(POOL)), SubjectConfig(), NoveltyConfig())


@pytest.fixture(scope="module")
def repainted(entries):
    """subject -> its reference turned 12 deg, scaled 0.8 (``MOVES[2]``): an honest re-painting."""
    return {e.prompt: _moved(e.path.read_bytes(), *MOVES[2]) for e in entries}


def _subject(actor, pngs, subject):
    return actor.score_components(pngs, _prompt(subject), 0, ["subject"])["subject"]


def test_a_painting_of_a_scores_high_for_a_and_low_for_every_other_subject(actor, repainted):
    """For each pool subject A, A's re-painted reference as a painting of every subject: the value
    is the probability of the prompt's subject, so over the 16 prompts it sums to 1; A's own prompt
    gets the most, far above chance, and the other prompts below chance."""
    subjects = list(repainted)
    chance = 1 / len(subjects)
    own_values, other_values = [], []
    temperature = actor.subject_cfg.temperature
    for a in subjects:
        # the actor's own function (score_components calls it), the painting's features computed once
        f, c = image_features(repainted[a]), actor.scorer.copy_correlation(repainted[a])
        values = {b: subject_values(actor.subjects, [f], [c], _prompt(b), temperature)[0].value for b in subjects}
        assert values[a] == _subject(actor, [repainted[a]], a)[0].value
        assert sum(values.values()) == pytest.approx(1.0)
        assert max(values, key=values.get) == a, (a, sorted(values.items(), key=lambda kv: -kv[1])[:3])
        own_values.append(values[a])
        other_values += [v for b, v in values.items() if b != a]
    print("own", sorted(round(v, 3) for v in own_values))
    assert min(own_values) > 2 * chance and sorted(own_values)[len(own_values) // 2] > 0.5
    assert sum(other_values) / len(other_values) < chance


def test_copies_score_zero_and_raw_says_why(actor, entries, repainted):
    """A pool image itself (the copy guard's case) scores 0, though it resembles its own subject
    most (``raw.own`` 1); the re-painting is no copy and scores."""
    rose = next(e for e in entries if e.prompt == "a red rose")
    copy, honest = _subject(actor, [rose.path.read_bytes(), repainted["a red rose"]], "a red rose")
    assert copy.value == 0.0 and copy.raw["own"] == pytest.approx(1.0) and copy.raw["own"] > copy.raw["rival"]
    assert honest.value > 1 / 16 and honest.raw["own"] > honest.raw["rival"]


def test_a_subject_the_pool_does_not_know_is_none_with_a_cause_not_zero(actor, repainted):
    pngs = [repainted["a red rose"], repainted["a pink lotus"]]
    out = actor.score_components(pngs, _prompt("a blue orchid"), 0, ["subject", "novelty"])
    assert [(o.value, o.cause) for o in out["subject"]] == [(None, "unknown_subject")] * 2
    assert all(o.value is not None for o in out["novelty"])  # novelty needs no subject
    # weighted, the sample's total is None (excluded from its group, counted by cause), never 0
    components = {"length": 1.0, "pool_similarity": 0.5, "subject": None, "novelty": 1.0}
    total = combine(GateVerdict("pass", "", "runtime"), components, WEIGHTS, none_cause="subject:unknown_subject")
    assert total.total is None and total.none_cause == "subject:unknown_subject"
    # the longest pool subject a prompt names is its subject, as for pool_similarity's references
    assert actor.subjects.subject_of("Paint a wild rose.") == "a wild rose"
    assert actor.subjects.subject_of("Paint a wild rose next to a red tulip.") is None  # two as long: ambiguous


def test_novelty_of_identical_distinct_and_one_duplicated_pair(actor, repainted):
    rose, lotus, iris, marigold = (repainted[s] for s in ("a red rose", "a pink lotus", "a violet iris",
                                                           "an orange marigold"))
    prompt = _prompt("a red rose")

    def novelty_of(pngs):
        return [o.value for o in actor.score_components(pngs, prompt, 0, ["novelty"])["novelty"]]

    assert novelty_of([rose] * 4) == [0.0] * 4
    distinct = novelty_of([rose, lotus, iris, marigold])
    assert min(distinct) > 0.5, distinct
    pair = novelty_of([rose, rose, lotus, iris])
    assert pair[0] == pair[1] == 0.0 and min(pair[2:]) > 0.5, pair  # both of the pair lose, the rest keep theirs
    assert novelty_of([rose]) == [1.0]  # alone in its group: nothing duplicates it
    # an unreadable PNG is None (bad_image) and left out of the others' comparison
    out = actor.score_components([rose, b"junk", rose], prompt, 0, ["novelty"])["novelty"]
    assert [o.value for o in out] == [0.0, None, 0.0] and out[1].cause == "bad_image"
    # distinct = 1 is the plain 1 - (largest resemblance to another painting)
    feats = [image_features(p) for p in (rose, lotus, iris)]
    plain, ramped = novelty(feats, 1.0), novelty(feats, 0.3)
    assert all(r == pytest.approx(min(1.0, p / 0.3)) for p, r in zip(plain, ramped))


def test_no_hack_beats_the_median_honest_painting_under_the_documented_weights(actor, entries):
    """Each reward hack (``ranking.hacks``: copies, flat colour, flat disc of the subject's pigment,
    noise) made from each subject's reference, scored as a painting of that subject with the
    docs' weights and its novelty at the most (1), stays below the median of that subject's four
    honest re-paintings (their own group's novelty). Gate and length are the same for both."""
    from brushrl.reward.ranking import hacks

    def total(out, i, nov=None):
        return (WEIGHTS["pool_similarity"] * out["pool_similarity"][i].value
                + WEIGHTS["subject"] * out["subject"][i].value
                + WEIGHTS["novelty"] * (out["novelty"][i].value if nov is None else nov))

    asked = ["pool_similarity", "subject", "novelty"]
    for e in entries:
        reference, prompt = e.path.read_bytes(), _prompt(e.prompt)
        honest = actor.score_components([_moved(reference, *m) for m in MOVES], prompt, 0, asked)
        median = sorted(total(honest, i) for i in range(len(MOVES)))[len(MOVES) // 2 - 1]  # the lower median
        made = hacks(reference, {})
        out = actor.score_components(list(made.values()), prompt, 0, asked)
        for i, name in enumerate(made):
            assert total(out, i, nov=1.0) < median, (e.prompt, name, total(out, i, nov=1.0), median)


def test_one_call_gives_every_component_asked_with_pool_similarity_as_before(actor, repainted):
    pngs = [repainted["a red rose"], repainted["a red tulip"], b"junk"]
    out = actor.score_components(pngs, _prompt("a red rose"), 3, ["pool_similarity", "subject", "novelty"])
    assert set(out) == {"pool_similarity", "subject", "novelty"} and all(len(v) == 3 for v in out.values())
    alone = actor.score_group(pngs, _prompt("a red rose"), 3)
    assert [(o.value, o.raw, o.cause) for o in out["pool_similarity"]] == [(o.value, o.raw, o.cause) for o in alone]
    assert [o.cause for o in out["subject"]] == [None, None, "bad_image"]
    assert out["subject"][0].value > out["subject"][1].value  # the rose is more a rose than the tulip is
    with pytest.raises(ValueError, match="does not give"):
        PoolScorerActor(PoolScorerConfig(path=str(POOL))).score_components(pngs, "p", 0, ["subject"])


def test_config_names_the_components_and_starts_one_pool_actor_only_when_weighted():
    from brushrl.plan.resources import reward_actor_asks
    from brushrl.reward.actor import start_reward_actors

    assert {"subject", "novelty"} <= set(REWARD_COMPONENTS)
    assert not any({"subject", "novelty"} & set(w) for w in REWARD_PRESETS.values())  # off by default
    cfg = parse_config({"reward": {"weights": WEIGHTS, "subject": {"temperature": 0.2}, "novelty": {"distinct": 0.5}}})
    assert cfg.reward.scorers == ["pool_similarity", "subject", "novelty"]
    assert cfg.reward.pool_components == ("pool_similarity", "subject", "novelty")
    assert cfg.reward.subject.temperature == 0.2 and cfg.reward.novelty.distinct == 0.5
    assert reward_actor_asks(cfg) == reward_actor_asks(parse_config({}))  # one scorer actor, as before
    only_subject = parse_config({"reward": {"weights": {"gate": 0.5, "subject": 0.5}}}).reward
    assert only_subject.pool_components == ("subject",) and only_subject.scorers == ["subject"]
    assert parse_config({}).reward.pool_components == ("pool_similarity",)
    for bad in ({"subject": {"temperature": 0}}, {"novelty": {"distinct": 1.5}}, {"subject": {"temprature": 0.1}}):
        with pytest.raises(ConfigError, match="reward"):
            parse_config({"reward": bad})
    # weights 0 (or absent) start nothing: no pool actor, no Ray call
    none = parse_config({"reward": {"weights": {"gate": 1.0, "subject": 0.0, "novelty": 0.0}}}).reward
    assert none.pool_components == () and start_reward_actors(none).scorers == {}


def test_a_subject_the_pool_lacks_is_refused_before_any_actor_starts():
    """With ``subject`` weighted, a training or held-out subject the pool has no image of stops the
    run (and ``brushrl eval``) before an actor starts, naming the field; unweighted, it is allowed."""
    from brushrl.orchestrator.actors import Pipeline, refuse_unknown_subjects

    pool = {"path": str(POOL)}
    refuse_unknown_subjects(parse_config({"reward": {"weights": WEIGHTS, "pool": pool}}))  # the defaults: all known
    for field, extra in (("prompts.subjects", {"prompts": {"subjects": ["a coral poppy", "a blue gentian"]}}),
                         ("eval.subjects", {"eval": {"subjects": ["a red rose", "a white lily"]}})):
        cfg = parse_config({"reward": {"weights": WEIGHTS, "pool": pool}, **extra})
        pipe = Pipeline()
        with pytest.raises(ConfigError, match=rf"^{field}: \['a (blue gentian|white lily)'\] name no subject"):
            pipe.start(cfg, "system")  # raises before Ray is touched: no cluster in this test
        assert pipe.render_pool is None and pipe.rollout is None
        refuse_unknown_subjects(parse_config({"reward": {"pool": pool}, **extra}))  # subject off: allowed


class SlowPoolScorer(PoolScorerActor):
    def score_components(self, pngs, prompt, seed, components):
        import time

        time.sleep(30)
        return super().score_components(pngs, prompt, seed, components)


@pytest.fixture(scope="module")
def local_ray():
    import ray

    from brushrl.ray_setup import start_local_ray

    # workers import this module's SlowPoolScorer by name: tests/ (and this tree's src/) on their path
    start_local_ray(num_cpus=2, runtime_env={"env_vars": {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}",
                                                          "OMP_NUM_THREADS": "1"}})
    yield
    ray.shutdown()


def test_reward_actors_give_the_new_components_through_the_scorer_set(local_ray, repainted):
    """``start_reward_actors`` with both weighted starts one pool actor; the producer's
    ``ScorerSet`` gets every component of a group from it in one call, keyed by component (values,
    causes, per-component seconds); a call it cannot answer is None for each of its components."""
    import ray

    from brushrl.orchestrator.producer import GroupProducer
    from brushrl.reward.actor import make_scorer_actor, start_reward_actors
    from brushrl.reward.scorers import ScorerSet

    cfg = parse_config({"reward": {"weights": WEIGHTS, "pool": {"path": str(POOL)}}})
    reward = start_reward_actors(cfg.reward)
    try:
        assert list(reward.scorers) == [POOL_ACTOR]
        reward.wait_loaded(120, print)
        producer = GroupProducer(cfg, None, None, reward.scorers, None)  # the producer's own ScorerSet
        group = [repainted["a pink lotus"], repainted["a pink lotus"], repainted["a red tulip"], b"junk"]
        (out,), wall_s = producer.scorers.score_timed([(group, _prompt("a pink lotus"), 5)])
        assert set(out) == set(wall_s) == {"pool_similarity", "subject", "novelty"}
        assert out["subject"][0].value > 0.5 > out["subject"][2].value and out["subject"][3].cause == "bad_image"
        assert [o.value for o in out["novelty"][:2]] == [0.0, 0.0] and out["novelty"][2].value > 0
        assert 0 < out["pool_similarity"][0].value <= 1
        (out,), _ = producer.scorers.score_timed([(group[:2], _prompt("a blue orchid"), 5)])
        assert [o.cause for o in out["subject"]] == ["unknown_subject"] * 2
        # an actor started without reward.subject cannot give it: scorer_error for every component asked;
        # not named in ``components`` it is a plain GroupScorer of its own name (pool_similarity)
        bare = make_scorer_actor(cfg.reward.pool, num_cpus=0.25)
        slow = ray.remote(num_cpus=0.25)(SlowPoolScorer).remote(cfg.reward.pool, cfg.reward.subject)
        ray.get([a.__ray_ready__.remote() for a in (bare, slow)], timeout=120)  # the timeout is not their start
        components = {"bare": ("pool_similarity", "subject"), "slow": ("novelty",)}
        with pytest.raises(ValueError, match="pool_similarity"):  # one component from two actors
            ScorerSet({"bare": bare, "pool_similarity": bare}, timeout_s=8, components=components)
        scorers = ScorerSet({"bare": bare, "slow": slow}, timeout_s=8, components=components)
        (out,) = scorers.score([(group[:1], _prompt("a pink lotus"), 0)])
        assert {c: [o.cause for o in v] for c, v in out.items()} == {
            "pool_similarity": ["scorer_error:ValueError"], "subject": ["scorer_error:ValueError"],
            "novelty": ["scorer_timeout"]}
        (out,) = ScorerSet({"pool_similarity": bare}, timeout_s=60).score([(group[:1], _prompt("a pink lotus"), 0)])
        assert list(out) == ["pool_similarity"] and out["pool_similarity"][0].value > 0
        for a in (bare, slow):
            ray.kill(a)
    finally:
        for a in reward.actors:
            ray.kill(a)
