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
    "torch.cuda.get_device_properties": "get_device_properties",
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

# torch.nn.Module's methods that make their first argument an attribute of the module
TORCH_SETTERS = frozenset(
    {"register_parameter", "register_buffer", "register_module", "add_module", "__setattr__"}
)

# torch.nn.Module (the base of SGLang's model and layer classes) as a base class: the
# attributes it defines (torch 2.x), so that any other attribute a class deriving from it
# does not define is known to be missing (`getattr(model_class, "hf_to_sglang_mapper",
# None)`); names starting with `_` may be its private ones
TORCH_MODULE_ATTRS = frozenset(
    [
        "T_destination",
        "add_module",
        "apply",
        "bfloat16",
        "buffers",
        "call_super_init",
        "children",
        "compile",
        "cpu",
        "cuda",
        "double",
        "dump_patches",
        "eval",
        "extra_repr",
        "float",
        "forward",
        "get_buffer",
        "get_extra_state",
        "get_parameter",
        "get_submodule",
        "half",
        "ipu",
        "load_state_dict",
        "modules",
        "mtia",
        "named_buffers",
        "named_children",
        "named_modules",
        "named_parameters",
        "parameters",
        "register_backward_hook",
        "register_buffer",
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook",
        "register_module",
        "register_parameter",
        "register_state_dict_post_hook",
        "register_state_dict_pre_hook",
        "requires_grad_",
        "set_extra_state",
        "set_submodule",
        "share_memory",
        "state_dict",
        "to",
        "to_empty",
        "train",
        "training",
        "type",
        "xpu",
        "zero_grad",
    ]
)

# builtins the interpreter handles itself (beside kb.explain.pure_calls.PURE_BUILTINS)
OTHER_BUILTINS = frozenset({"getattr", "hasattr", "isinstance", "dict", "object", "type", "open"})
