"""The code explain's simulation reads, stored for every version whether cited or not
(kb/explain/): ServerArgs' hooks, the helpers it calls, and the code SGLang runs past
ServerArgs that the load stage follows. The workers send these files' texts along with
their facts (ingest/analyze.py likely_cited), as the parent stores them all."""

from __future__ import annotations

HOOK_DIR = "python/sglang/srt/arg_groups/"

# Files the explain simulation parses (kb/explain/simulate.py): the predicates' definitions,
# environment variables' defaults, the model config's attention kinds; hooks are in HOOK_DIR.
SIMULATION_FILES = frozenset(
    {
        "python/sglang/srt/utils/common.py",
        "python/sglang/srt/utils.py",
        "python/sglang/srt/environ.py",
        "python/sglang/srt/configs/model_config.py",
        "python/sglang/srt/utils/hf_transformers_utils.py",
        # (2026: hf_transformers_utils re-exports this package; get_context_length is here)
        "python/sglang/srt/utils/hf_transformers/__init__.py",
        "python/sglang/srt/utils/hf_transformers/common.py",
        # which architectures are linear-attention hybrids (server_args asks it, 2026)
        "python/sglang/srt/configs/linear_attn_model_registry.py",
        # the load stage (kb.explain.deploy): the parallel groups' sizes, the scheduler's
        # MoE configuration (kb/explain/moe.py)
        "python/sglang/srt/distributed/parallel_state.py",
        "python/sglang/srt/managers/scheduler.py",
        # ... its checks of the loaded model (kb/explain/model_class.py), and the linear
        # layers the model classes build (their quantization methods' weights, the
        # per-rank sizes `divide` asserts)
        "python/sglang/srt/model_executor/model_runner.py",
        "python/sglang/srt/layers/linear.py",
        # the parameter classes the quantization methods wrap their weights in (a
        # parameter's shape is its data's: the NVFP4 MoE methods check the rows per rank)
        "python/sglang/srt/layers/parameter.py",
        "python/sglang/srt/distributed/__init__.py",
        "python/sglang/srt/distributed/utils.py",
        # the ModelRunner's initial expert location (its assert on the experts per rank)
        "python/sglang/srt/eplb/expert_location.py",
        # ... and its expert distribution recorder (EPLB's gatherer for the DeepEP mode)
        "python/sglang/srt/eplb/expert_distribution.py",
        # the attention layer's types (an encoder-only model's first forward)
        "python/sglang/srt/layers/radix_attention.py",
        # the forward context a model's layers read the batch's attention backend from
        # (`get_attn_backend()`, 2026-07): kb/explain/block_forward.py
        "python/sglang/srt/model_executor/forward_context.py",
        # the forward modes a batch is prepared in, and the CUDA-graph runner whose capture
        # re-raises a RuntimeError as its own (kb/explain/batch_forward.py)
        "python/sglang/srt/model_executor/forward_batch_info.py",
        "python/sglang/srt/model_executor/cuda_graph_runner.py",
        "python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py",
        # the target model's worker the speculative worker is handed (its ModelRunner's
        # ModelConfig gives the draft its context length): kb/explain/draft_stage.py
        "python/sglang/srt/managers/tp_worker.py",
        # two-batch overlap's strategy for the model's decoder layers (its first forward)
        "python/sglang/srt/batch_overlap/operations_strategy.py",
        "python/sglang/srt/operations_strategy.py",
    }
)
# ... and the code SGLang runs past ServerArgs that the load stage follows: its utilities
# (`from sglang.srt.utils import f`), the remote model connectors, the model loader
# building the quantization config, the quantization methods, the MoE implementation,
# runner and dispatcher, the speculative workers, the model classes (their constructors
# and forward signatures)
SIMULATION_DIRS = (
    "python/sglang/srt/utils/",
    "python/sglang/srt/connector/",
    "python/sglang/srt/layers/quantization/",
    "python/sglang/srt/model_loader/",
    "python/sglang/srt/layers/moe/",
    # whether DeepGEMM's JIT kernels are on (the GPU and the environment decide it)
    "python/sglang/srt/layers/deep_gemm_wrapper/",
    "python/sglang/srt/speculative/",
    "python/sglang/srt/models/",
    # the model config classes: `isinstance(hf_config, Qwen3NextConfig)` is decided by the
    # class's `model_type` (the ModelRunner's hybrid-model properties)
    "python/sglang/srt/configs/",
    # the attention backends the registry builds (their constructors check the model)
    "python/sglang/srt/layers/attention/",
)


def simulated(path: str) -> bool:
    """Whether the file is stored for the simulation."""
    return path in SIMULATION_FILES or (
        path.startswith((HOOK_DIR, *SIMULATION_DIRS)) and path.endswith(".py")
    )
