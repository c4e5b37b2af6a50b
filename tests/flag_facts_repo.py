"""A synthetic three-era repository with one instance of each flag-fact class of issue 9:
custom Action classes that set nargs in __init__, that imply store_true, that take a value,
that raise; BooleanOptionalAction; `CONST + [extra]` choices; Arg(action_kwargs=...);
Arg(choices=...) over a Literal; folded defaults; argparse dest vs ServerArgs field; soft
deprecation; type functions; choices from comprehensions over enums.

Unlike the ingested history, this code is ours, so the differential test may run it to get
argparse's own view of each flag. Made-up flags and text; nothing is copied from SGLang.
"""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

# Shared by eras 1 and 2 (defined inside server_args.py there), imported in era 3.
ACTIONS = '''
class DeprecatedAction(argparse.Action):
    def __init__(self, option_strings, dest, nargs=0, **kwargs):
        super(DeprecatedAction, self).__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        {deprecated_call}


class DeprecatedStoreTrueAction(argparse.Action):
    """Still stores True, and says it is deprecated."""

    def __init__(self, option_strings, dest, new_flag=None, nargs=0, const=True,
                 default=False, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default,
                         **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print_deprecated_warning(f"{{option_string}} is deprecated.")
        setattr(namespace, self.dest, True)


class DeprecatedAliasStoreAction(argparse.Action):
    """An old spelling that stores its value under the new flag's dest."""

    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print_deprecated_warning(f"{{option_string}} is deprecated.")
        setattr(namespace, self.dest, values)


class RemovedAction(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        kwargs["nargs"] = 0
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ValueError("This option was removed; drop it from the command.")


class PathListAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [v.strip() for v in values])


def print_deprecated_warning(message):
    print(message)
'''

MANUAL_FLAGS = """
        parser.add_argument(
            "--tensor-parallel-size",
            "--tp-size",
            type=int,
            default=ServerArgs.tp_size,
            help="Tensor parallel degree.",
        )
        parser.add_argument(
            "--ngram-capacity", type=int, default=ServerArgs.ngram_capacity, help="Cells."
        )
        parser.add_argument(
            "--max-queued", type=int, default=ServerArgs.max_queued, help="Queue bound."
        )
        parser.add_argument(
            "--eviction-policy",
            type=str,
            default=DEFAULT_EVICTION_POLICY,
            choices=["lru", "fifo"],
            help="Eviction policy.",
        )
        parser.add_argument(
            "--strict-loading",
            action=argparse.BooleanOptionalAction,
            default=False,
            help="Refuse adapters with missing keys.",
        )
        parser.add_argument(
            "--window", type=int, default=ServerArgs.window, help="Draft window."
        )
        parser.add_argument(
            "--use-legacy-kernel",
            action="store_true",
            help="(Deprecated) Use the legacy kernel.",
        )
        parser.add_argument(
            "--max-prefill", type=human_readable_int, default=None, help="Prefill budget."
        )
"""

DEPRECATED_FLAGS = """
        parser.add_argument(
            "--enable-old-schedule",
            action=DeprecatedAction,
            help="'--enable-old-schedule' is deprecated. Please drop it.",
        )
        parser.add_argument(
            "--old-store-true",
            action=DeprecatedStoreTrueAction,
            new_flag="--use-legacy-kernel",
            help="[Deprecated] Use --use-legacy-kernel instead.",
        )
        parser.add_argument(
            "--old-window",
            type=int,
            dest="window",
            action=DeprecatedAliasStoreAction,
            new_flag="--window",
            help="Deprecated alias for --window.",
        )
        parser.add_argument(
            "--removed-option", action=RemovedAction, help="Gone."
        )
"""

ADAPTER_FLAG = """
        parser.add_argument(
            "--dp", type=int, dest="data_parallel_size", default=1, help="Data parallel degree."
        )
        parser.add_argument(
            "--adapter-paths", type=str, nargs="*", action=PathListAction, help="Adapters."
        )
"""

ERA1 = (
    """
import argparse
import dataclasses
import sys
from typing import Optional

DEFAULT_EVICTION_POLICY = "lru"
LOCAL_MODULES = ["q_proj", "k_proj"]
ALL_MODULES_TOKEN = "all"


def human_readable_int(text):
    return int(text)


@dataclasses.dataclass
class ServerArgs:
    tp_size: int = 1
    ngram_capacity: int = 10 * 1000 * 1000
    max_queued: int = sys.maxsize
    window: int = 4
    target_modules: Optional[list] = None

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
"""
    + MANUAL_FLAGS
    + """
        parser.add_argument(
            "--target-modules",
            type=str,
            nargs="*",
            choices=LOCAL_MODULES + [ALL_MODULES_TOKEN],
            help="Modules to adapt.",
        )
"""
    + DEPRECATED_FLAGS
    + ADAPTER_FLAG
    + """
    @classmethod
    def from_cli_args(cls, args: argparse.Namespace):
        args.tp_size = args.tensor_parallel_size
        args.dp_size = args.data_parallel_size
"""
    + ACTIONS.format(deprecated_call="raise ValueError(self.help)")
)

ERA2 = (
    """
import argparse
import dataclasses
import sys
from enum import Enum, IntEnum
from typing import Optional

from sglang.srt.utils import ALL_MODULES_TOKEN, SUPPORTED_MODULES

DEFAULT_EVICTION_POLICY = "lru"
TRANSFER_BACKEND_CHOICES = ["zmq", "shm"]


class HashMode(IntEnum):
    NONE = 0
    PARTIAL = 1
    ALL = 2


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


def human_readable_int(text):
    return int(text)


@dataclasses.dataclass
class ServerArgs:
    tp_size: int = 1
    ngram_capacity: int = 10 * 1000 * 1000
    max_queued: int = sys.maxsize
    window: int = 4
    target_modules: Optional[list] = None
    transfer_backend: str = TRANSFER_BACKEND_CHOICES[0]

    def __post_init__(self):
        def _check_window():
            if self.window > 64:
                raise ValueError("window is too large")

        _check_window()

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
"""
    + MANUAL_FLAGS
    + """
        parser.add_argument(
            "--target-modules",
            type=str,
            nargs="*",
            choices=SUPPORTED_MODULES + [ALL_MODULES_TOKEN],
            help="Modules to adapt.",
        )
        parser.add_argument(
            "--transfer-backend",
            type=str,
            default=ServerArgs.transfer_backend,
            choices=TRANSFER_BACKEND_CHOICES,
            help="Transfer backend.",
        )
        parser.add_argument(
            "--hash-mode",
            type=str,
            default="none",
            choices=[m.name.lower() for m in HashMode],
            help="Hash mode.",
        )
        parser.add_argument(
            "--color", type=str, default="red", choices=list(Color), help="Color."
        )
"""
    + DEPRECATED_FLAGS
    + ADAPTER_FLAG
    + """
    @classmethod
    def from_cli_args(cls, args: argparse.Namespace):
        args.tp_size = args.tensor_parallel_size
        args.dp_size = args.data_parallel_size
"""
    + ACTIONS.format(deprecated_call='print_deprecated_warning(f"{option_string} is deprecated.")')
)

UTILS_INIT = "from .common import *\n"
UTILS_COMMON = """
SUPPORTED_MODULES = [
    "q_proj",
    "k_proj",
    "v_proj",
]

ALL_MODULES_TOKEN = "all"


def unrelated():
    return 1
"""

ARG_UTILS = '''
"""A small dataclass -> argparse bridge with the rules the flag extractor mirrors."""

import dataclasses
import types
from typing import Annotated, Any, List, Literal, Optional, Union, get_args, get_origin
from typing import get_type_hints

A = Annotated


@dataclasses.dataclass(frozen=True)
class Arg:
    help: str = ""
    choices: Optional[list] = None
    aliases: Optional[List[str]] = None
    cli_name: Optional[str] = None
    type_parser: Optional[Any] = None
    nargs: Optional[str] = None
    action: Optional[Any] = None
    action_kwargs: Optional[dict] = None
    no_cli: bool = False


def _scalar(tp):
    return tp if tp in (str, int, float) else str


def add_cli_args_from_dataclass(parser, cls):
    hints = get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if get_origin(hint) is not Annotated:
            continue
        inner, *meta = get_args(hint)
        arg = next((Arg(help=m) if isinstance(m, str) else m for m in meta), None)
        if arg is None or arg.no_cli:
            continue
        name = arg.cli_name or "--" + f.name.replace("_", "-")
        names = [name] + (arg.aliases or [])
        kw = {"help": arg.help}
        if name.lstrip("-").replace("-", "_") != f.name:
            kw["dest"] = f.name
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        if arg.action is not None:
            parser.add_argument(*names, action=arg.action, **kw, **(arg.action_kwargs or {}))
            continue
        if get_origin(inner) in (Union, types.UnionType):
            rest = [a for a in get_args(inner) if a is not type(None)]
            inner = rest[0] if len(rest) == 1 else inner
        if get_origin(inner) is Literal:
            values = list(get_args(inner))
            kw["choices"] = arg.choices or values
            kw["type"] = arg.type_parser or _scalar(type(values[0]))
        elif get_origin(inner) in (list, List) and arg.type_parser is None:
            kw["type"] = _scalar(get_args(inner)[0])
            kw["nargs"] = arg.nargs or "+"
            if arg.choices:
                kw["choices"] = arg.choices
        elif inner is bool:
            kw["action"] = "store_true"
        else:
            kw["type"] = arg.type_parser or _scalar(inner)
            if arg.choices:
                kw["choices"] = arg.choices
        parser.add_argument(*names, **kw)
'''

GRAPH_CONFIG = '''
class Backend:
    """Capture backends."""

    FULL = "full"
    BREAKABLE = "breakable"
    DISABLED = "disabled"
    ALL = (FULL, BREAKABLE, DISABLED)
'''

HASH_CONSTS = """
from enum import IntEnum


class HashMode(IntEnum):
    NONE = 0
    PARTIAL = 1
    ALL = 2
"""

ERA3 = (
    """
import argparse
import dataclasses
import sys
from typing import List, Literal, Optional

from sglang.srt.arg_groups.arg_utils import A, Arg, add_cli_args_from_dataclass
from sglang.srt.arg_groups.argparse_actions import (
    DeprecatedAction,
    DeprecatedAliasStoreAction,
    DeprecatedStoreTrueAction,
    PathListAction,
    RemovedAction,
)
from sglang.srt.graph_config import Backend
from sglang.srt.kv_consts import HashMode
from sglang.srt.utils import ALL_MODULES_TOKEN, SUPPORTED_MODULES

DEFAULT_EVICTION_POLICY = "lru"


def human_readable_int(text):
    return int(text)


@dataclasses.dataclass
class ServerArgs:
    tp_size: A[
        int, Arg(help="Tensor parallel degree.", cli_name="--tensor-parallel-size",
                 aliases=["--tp-size"])
    ] = 1
    ngram_capacity: A[int, "Cells."] = 10 * 1000 * 1000
    max_queued: A[int, "Queue bound."] = sys.maxsize
    eviction_policy: A[
        str, Arg(help="Eviction policy.", choices=["lru", "fifo"])
    ] = DEFAULT_EVICTION_POLICY
    strict_loading: A[
        bool, Arg(help="Refuse adapters with missing keys.", action=argparse.BooleanOptionalAction)
    ] = False
    window: A[int, "Draft window."] = 4
    use_legacy_kernel: A[bool, "(Deprecated) Use the legacy kernel."] = False
    max_prefill: A[
        Optional[int], Arg(help="Prefill budget.", type_parser=human_readable_int)
    ] = None
    target_modules: A[
        Optional[List[str]],
        Arg(help="Modules to adapt.", nargs="*", choices=SUPPORTED_MODULES + [ALL_MODULES_TOKEN]),
    ] = None
    adapter_paths: A[
        Optional[List[str]],
        Arg(help="Adapters.", action=PathListAction, action_kwargs={"type": str, "nargs": "*"}),
    ] = None
    graph_backend: A[
        Optional[Literal["breakable", "disabled"]],
        Arg(help="Graph backend.", choices=Backend.ALL),
    ] = None
    exchange_backend: A[
        Literal[None, "ring", "mesh"],
        Arg(help="Exchange backend.", choices=["none", "ring", "mesh"]),
    ] = None
    hash_mode: str = "none"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument(
            "--hash-mode",
            type=str,
            default=ServerArgs.hash_mode,
            choices=[m.name.lower() for m in HashMode],
            help="Hash mode.",
        )
"""
    + DEPRECATED_FLAGS
)

ACTIONS_MODULE = "import argparse\n" + ACTIONS.format(
    deprecated_call='print_deprecated_warning(f"{option_string} is deprecated.")'
)


def build_flag_facts_repo(root: Path) -> Path:
    """v1.0.0 (era 1), v2.0.0 (era 2), v3.0.0 (era 3)."""
    repo = root / "facts"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ERA1)
    commit(repo, "era 1", "2024-03-01T12:00:00Z", "v1.0.0")
    write(repo, SERVER_ARGS, ERA2)
    write(repo, "python/sglang/srt/utils/__init__.py", UTILS_INIT)
    write(repo, "python/sglang/srt/utils/common.py", UTILS_COMMON)
    commit(repo, "era 2", "2025-06-01T12:00:00Z", "v2.0.0")
    write(repo, SERVER_ARGS, ERA3)
    write(repo, "python/sglang/srt/arg_groups/arg_utils.py", ARG_UTILS)
    write(repo, "python/sglang/srt/arg_groups/argparse_actions.py", ACTIONS_MODULE)
    write(repo, "python/sglang/srt/graph_config.py", GRAPH_CONFIG)
    write(repo, "python/sglang/srt/kv_consts.py", HASH_CONSTS)
    commit(repo, "era 3", "2026-07-01T12:00:00Z", "v3.0.0")
    return repo
