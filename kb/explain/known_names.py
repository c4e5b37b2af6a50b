"""Names the interpreter (kb.explain.simulate) answers itself rather than interpreting:
torch's and the platform's calls read as facts of the profile, Python's builtin types, the
environment readers, file-system probes, and where SGLang defines its profile predicates."""

from __future__ import annotations

# where SGLang defines the functions read as facts of the profile (utils.py, utils/common.py,
# platforms/): a function of the same name elsewhere is its own (layers/quantization's
# get_quantization_config(name) returns a class, utils' get_quantization_config(hf_config)
# the checkpoint's method)
PREDICATE_HOMES = ("python/sglang/srt/utils", "python/sglang/srt/platforms", "python/sglang/utils")
PATHLIB_PATH = ("pathlib", "Path")
OS_PATH_PROBES = ("os.path.exists", "os.path.isdir", "os.path.isfile")

# `ModelConfig.from_server_args(server_args)`: module, class, factory
MODEL_CONFIG_FACTORY = ("sglang.srt.configs.model_config", "ModelConfig", "from_server_args")
EXPRESSION_NAMES = {
    "ListComp": "a list comprehension",
    "SetComp": "a set comprehension",
    "DictComp": "a dict comprehension",
    "GeneratorExp": "a generator expression",
    "Lambda": "a lambda",
    "Await": "an await",
    "Yield": "a yield",
}
# torch calls SGLang makes directly, answered like the helpers that wrap them
TORCH_PREDICATES = {
    "torch.cuda.get_device_capability": "get_device_capability",
    "torch.cuda.is_available": "is_cuda",
    "torch.cuda.device_count": "get_device_count",
}
# torch attributes SGLang reads, answered like predicates of the same names
TORCH_ATTRIBUTES = ("torch.version.cuda", "torch.version.hip")
# methods of sglang.srt.platforms' `current_platform` (era 3), answered from the platform
PLATFORM_METHODS = {
    "current_platform.is_out_of_tree": "is_out_of_tree",
    "current_platform.apply_server_args_defaults": "apply_server_args_defaults",
}
BUILTIN_TYPES: dict[str, type | tuple[type, ...]] = {
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "set": set,
    "str": str,
    "int": (int, bool),
    "float": float,
    "bool": bool,
}
ENV_READERS = {"get_bool_env_var": "false", "get_int_env_var": 0, "get_str_env_var": None}
