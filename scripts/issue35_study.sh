#!/usr/bin/env bash
# Issue 35 study: RL from the shipped warm start, 60 steps, checkpoints at 20/40/60, the eval's
# held-out split = the 10 pool subjects not trained on (docs/reward.md, "RL from a warm start that
# follows its prompt"). Usage: scripts/issue35_study.sh ARM SEED [OUT_DIR]; then
#   brushrl eval OUT_DIR/ARM_seedSEED --checkpoint 20 --checkpoint latest
# ARM A: the demo's reward and the total advantage; B: subject + novelty (distinct 0.6) +
# the gate_quality advantage (B, seed 0: novelty rose, pool similarity and subject fell); C: B without
# novelty (its weight to pool similarity); D: C with learner.lr 1e-3 (D, seed 0: the gate fell 24
# points); E: C with a KL to the warm start (learner.beta 0.04, TRL's former default: the reference
# is the warm start itself, the adapter disabled), to keep the gate from falling; F: E with groups of
# 8 (rollout.group_size; 4 before), so a group's passing paintings differ enough to rank; G: E
# trained on 4 of the pool's subjects so that 12 are held out (the issue's 12 prompts x 4 samples);
# H: G with gate_quality's sum at unit spread (learner.scale_rewards batch: a step whose group all
# passed moved the policy a fifth of one with a failure); the LR stays (AdamW divides the
# advantages' overall size out: what changes is that every step moves the policy as far; H, seed 0:
# the KL rose to 0.014, its training prompts' gate fell 25 points, no better paintings); I: G with
# four groups a step (rollout.groups_per_step 4: four prompts drawn at random from the four subjects, so an
# all-pass group shares its batch with failures and the gradient averages four subjects), 30 steps
# (twice G's rollouts), checkpoints at 10/20/30 (I, seed 0: held-out better paintings -0.010 [-0.027, +0.009]).
set -euo pipefail
arm=$1; seed=$2; OUT_DIR=${3:-runs/issue35}
cd "$(dirname "$0")/.."
mkdir -p "$OUT_DIR"
common=(--config configs/local.yaml --steps 60 --name "${arm}_seed${seed}" --output-dir "$OUT_DIR"
  --set run.seed=$seed --set policy.sft.seed=0 --set run.checkpoint_every=20
  --set 'eval.subjects=["a red poppy", "a purple anemone", "a red rose", "a pink lotus", "a red tulip", "an orange marigold", "a red camellia", "a red zinnia", "a pink cosmos", "a wild rose"]')
if [ "$arm" = B ]; then
  common+=(--set learner.advantage=gate_quality
    --set 'reward.weights={gate: 0.05, length: 0.05, pool_similarity: 0.6, subject: 0.2, novelty: 0.1}'
    --set reward.novelty.distinct=0.6)
elif [ "$arm" = C ] || [ "$arm" = D ] || [ "$arm" = E ] || [ "$arm" = F ] || [ "$arm" = G ] || [ "$arm" = H ] || [ "$arm" = I ]; then
  common+=(--set learner.advantage=gate_quality
    --set 'reward.weights={gate: 0.05, length: 0.05, pool_similarity: 0.7, subject: 0.2}')
  if [ "$arm" = D ]; then common+=(--set learner.lr=1.0e-3); fi
  if [ "$arm" = E ] || [ "$arm" = F ] || [ "$arm" = G ] || [ "$arm" = H ] || [ "$arm" = I ]; then common+=(--set learner.beta=0.04); fi
  if [ "$arm" = I ]; then common+=(--steps 30 --set run.checkpoint_every=10 --set rollout.groups_per_step=4); fi
  if [ "$arm" = H ]; then common+=(--set learner.scale_rewards=batch); fi
  if [ "$arm" = F ]; then common+=(--set rollout.group_size=8); fi
  if [ "$arm" = G ] || [ "$arm" = H ] || [ "$arm" = I ]; then
    common+=(--set 'prompts.subjects=["a peach hibiscus", "a coral poppy", "a white anemone", "a violet iris"]'
      --set 'eval.subjects=["a red poppy", "a purple anemone", "a red rose", "a pink lotus", "a red tulip", "an orange marigold", "a red camellia", "a red zinnia", "a pink cosmos", "a wild rose", "a magenta hibiscus", "a yellow hibiscus"]')
  fi
fi
exec .venv/bin/brushrl train "${common[@]}" > "$OUT_DIR/${arm}_seed${seed}.log" 2>&1
