"""Does a LoRA adapter reach vLLM's modules? Asked of vLLM's own code, without serving anything.

    .venv-vllm/bin/python -m brushrl.rollout.vllm_reach MODEL_DIR ADAPTER_DIR [--target-modules a,b]

Builds the engine config vLLM builds for ``vllm.LLM(model=MODEL_DIR, enable_lora=True,
lora_target_modules=...)`` (``EngineArgs.create_engine_config``), instantiates vLLM's model class
for the checkpoint on the meta device (no weights read, no memory) and wraps it with vLLM's
``LoRAModelManager`` (the layers vLLM would give LoRA slots), then loads the adapter as vLLM's
worker does (``LoRAModel.from_local_checkpoint`` with the model's ``hf_to_vllm_mapper`` rename
mapper and ``lora_skip_prefixes``, as in ``vllm.lora.worker_manager``) and registers it
(``add_adapter``, which merges packed parts such as q/k/v into ``qkv_proj``). An adapter module
*reaches* vLLM when a wrapped layer then finds weights for it (``LoRAModel.get_lora``, as
``activate_adapter`` looks them up); one that does not is silently ignored at serving time (vLLM
logs at debug level only), which is how a whole adapter can be a no-op (vllm-project/vllm#48019).

Prints one JSON object: ``adapter_modules`` (module names the adapter's keys parse to, after the
mapper), ``wrapped`` (vLLM modules with LoRA slots), ``reached`` / ``unreached`` (adapter modules),
``lora_target_modules``. Exit status 0 even when some are unreached: the caller judges.
"""

from __future__ import annotations

import argparse
import json
import socket


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reach(model_dir: str, adapter_dir: str, target_modules: list[str] | None, max_lora_rank: int = 64) -> dict:
    """See the module docstring. ``target_modules`` None: vLLM's default (every supported layer).

    Raises:
        Whatever vLLM raises building the config, the model or the LoRA manager, or loading the
        adapter (e.g. ``ValueError`` for adapter modules whose suffix vLLM does not support).
    """
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.model_manager import LoRAModelManager
    from vllm.lora.peft_helper import PEFTHelper
    from vllm.model_executor.model_loader.utils import initialize_model

    args = EngineArgs(model=model_dir, dtype="float32", enable_lora=True, max_lora_rank=max_lora_rank,
                      lora_target_modules=target_modules, max_model_len=256, enforce_eager=True)
    cfg = args.create_engine_config()
    with set_current_vllm_config(cfg):  # vLLM's layers ask the tensor-parallel group for their shards
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method=f"tcp://127.0.0.1:{_free_port()}", backend="gloo")
        initialize_model_parallel(1, 1)
    with torch.device("meta"):
        model = initialize_model(cfg)
        manager = LoRAModelManager(model=model, max_num_seqs=1, max_num_batched_tokens=256,
                                   vocab_size=cfg.model_config.get_vocab_size(), lora_config=cfg.lora_config,
                                   vllm_config=cfg, device=torch.device("cpu"))
    # vllm.lora.worker_manager.WorkerLoRAManager._load_adapter, minus the request plumbing
    expected: set[str] = set()
    for module in manager.supported_lora_modules:
        expected.update(manager.packed_modules_mapping.get(module, [module]))
        if module == "experts":
            expected.add(module)
    mapper = getattr(model, "hf_to_vllm_mapper", None)
    lora = LoRAModel.from_local_checkpoint(
        adapter_dir, expected, PEFTHelper.from_local_dir(adapter_dir, cfg.model_config.max_model_len),
        lora_model_id=1, device="cpu", dtype=torch.float32, model_vocab_size=manager.vocab_size,
        weights_mapper=mapper.get_rename_mapper() if mapper is not None else None,
        skip_prefixes=getattr(model, "lora_skip_prefixes", None))
    adapter_modules = sorted(lora.loras)
    manager.add_adapter(lora)  # merges packed parts under the packed layer's name
    reached = set()
    for name in manager.modules:
        if lora.get_lora(name) is not None:
            reached.update(manager.packed_modules.get(name, [name]))
    return {"lora_target_modules": target_modules, "wrapped": sorted(manager.modules),
            "adapter_modules": adapter_modules, "reached": sorted(set(adapter_modules) & reached),
            "unreached": sorted(set(adapter_modules) - reached)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m brushrl.rollout.vllm_reach", description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("adapter_dir")
    parser.add_argument("--target-modules", default=None,
                        help="comma-separated vLLM module suffixes (vllm.LLM lora_target_modules); default: "
                             "brushrl.rollout.vllm_lora.engine_lora_target_modules of the checkpoint (all-linear)")
    parser.add_argument("--max-lora-rank", type=int, default=64)
    args = parser.parse_args(argv)
    if args.target_modules is None:
        from brushrl.rollout.vllm_lora import engine_lora_target_modules

        targets = engine_lora_target_modules(args.model_dir, "all-linear", False)
    else:
        targets = args.target_modules.split(",")
    print(json.dumps(reach(args.model_dir, args.adapter_dir, targets, args.max_lora_rank)))


if __name__ == "__main__":
    main()
