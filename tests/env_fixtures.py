"""A synthetic repository for environment variables and docs drift, in SGLang's shapes:
direct reads (`os.environ.get`, `os.getenv`, `get_bool_env_var`, ...) before environ.py
existed, then `class Envs` declarations read through `envs.X.get()`, and the docs pages in
their three table/bullet shapes. Made-up names and text; nothing is copied from SGLang."""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import commit, git, write

SERVER_ARGS = "python/sglang/srt/server_args.py"
RUNNER = "python/sglang/srt/runner.py"
ENGINE = "python/sglang/srt/entrypoints/engine.py"
ENVIRON = "python/sglang/srt/environ.py"

OLD_SERVER_ARGS = """
import argparse
import dataclasses
import os


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    enable_widget: bool = False
    widget_mode: str = "fast"

    def __post_init__(self):
        if os.environ.get("SGL_WIDGET_FORCE", "0") == "1":
            self.enable_widget = True

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Model path.")
        parser.add_argument("--tp-size", type=int, default=ServerArgs.tp_size, help="TP size.")
        parser.add_argument("--enable-widget", action="store_true", help="Use the widget.")
        parser.add_argument(
            "--widget-mode",
            type=str,
            default=ServerArgs.widget_mode,
            choices=["fast", "safe"],
            help="Widget mode.",
        )
"""

OLD_RUNNER = """
import os

from sglang.srt.utils import get_bool_env_var, get_int_env_var

CHUNK = int(os.environ.get("SGL_CHUNK_SIZE", "512"))
DEBUG = get_bool_env_var("SGL_DEBUG_WIDGET")
WORKERS = get_int_env_var("SGL_WIDGET_WORKERS", 4)
HOME = os.getenv("WIDGET_HOME", "/tmp")
# os.environ.get("SGL_IN_A_COMMENT") is not a read


def _set_envs_and_config(server_args):
    if "NCCL_WIDGET" not in os.environ or server_args.enable_widget:
        os.environ["NCCL_WIDGET"] = str(int(server_args.enable_widget))
    os.environ["CUDA_WIDGET_CONNECTIONS"] = "8"
"""

OLD_DOCS = """
# Server Arguments

## Model

* `model_path`: Path of the model.
* `tp_size`: Tensor parallel size.
* `widget_size`: Not a flag anywhere.
"""

NEW_SERVER_ARGS = (
    OLD_SERVER_ARGS.replace(
        "import os\n", "import os\n\nfrom sglang.srt.utils import get_bool_env_var\n"
    )
    .replace(
        """    def __post_init__(self):
        if os.environ.get("SGL_WIDGET_FORCE", "0") == "1":
            self.enable_widget = True
""",
        """    def __post_init__(self):
        self._handle_environment_variables()
        if get_bool_env_var("SGLANG_WIDGET_STRICT"):
            assert self.widget_mode == "safe", "strict widgets need the safe mode"
        if envs.SGLANG_WIDGET_WAIT.get() > 60:
            assert self.widget_mode == "safe", "a wait over a minute needs the safe mode"
        if envs.SGLANG_WIDGET_CACHE.get() == "/srv/widget":  # its default reads XDG_WIDGET_HOME
            assert self.widget_mode == "safe", "a shared widget cache needs the safe mode"

    def _handle_environment_variables(self):
        os.environ["SGLANG_WIDGET_COMPILE"] = (
            "1" if self.enable_widget else "0"
        )
        if self.tp_size > 1:
            if envs.SGLANG_WIDGET_CHECK.get():
                envs.SGLANG_WIDGET_LEVEL.set(2)
""",
    )
    .replace("import os\n", "import os\n\nfrom sglang.srt.environ import envs\n")
)

ENVIRON_PY = """
import os
import warnings


class EnvField:
    def __init__(self, default):
        self.default = default

    def __bool__(self):
        raise TypeError("Call `envs.SOME_SETTING.get()`, not `envs.SOME_SETTING`")


class EnvBool(EnvField):
    pass


class EnvInt(EnvField):
    pass


class EnvFloat(EnvField):
    pass


class EnvStr(EnvField):
    pass


class EnvTuple(EnvField):
    pass


class _DeprecatedFallback:
    '''Reads an older name when the new one is unset, as in

        SGLANG_WIDGET_FUSE = EnvBoolWithAlias(True, deprecated_name="SGLANG_GADGET_FUSE")
    '''

    def __init__(self, default, deprecated_name):
        super().__init__(default)
        self.deprecated_name = deprecated_name


class EnvBoolWithAlias(_DeprecatedFallback, EnvBool):
    pass


class Level:
    OFF = 0
    HIGH = 2


class Envs:
    # fmt: off

    # Widgets
    SGLANG_WIDGET_COMPILE = EnvBool(False)
    SGLANG_WIDGET_CHECK = EnvBool(True)
    SGLANG_WIDGET_LEVEL = EnvInt(Level.OFF)
    SGLANG_CHUNK_SIZE = EnvInt(512)  # tokens per chunk
    SGLANG_WIDGET_WORKSPACE = EnvInt(64 * 1024 * 1024)
    SGLANG_WIDGET_RATIO = EnvFloat(0.5)
    SGLANG_WIDGET_DIR = EnvStr(os.path.expanduser("~/.cache/widget"))
    SGLANG_WIDGET_TAGS = EnvTuple(tuple())

    # Renamed
    # Reads the old name when the new one is unset.
    SGLANG_WIDGET_FUSE = EnvBoolWithAlias(True, deprecated_name="SGLANG_GADGET_FUSE")
    SGLANG_LOG_WIDGET = EnvBool(False)
    SGLANG_WIDGET_WAIT = EnvFloat(-1)  # an int default: still a float
    SGLANG_WIDGET_TURBO = EnvBool(False)
    SGLANG_WIDGET_POLL_MS = EnvInt(100)
    SGLANG_WIDGET_IDLE_MIN = EnvFloat(1.0)
    SGLANG_WIDGET_CACHE = EnvStr(os.environ.get("XDG_WIDGET_HOME", "/var/widget"))

    # fmt: on


envs = Envs()


def _note_renamed(old_name, new_name=None):
    if old_name in os.environ:
        if new_name is None:
            warnings.warn(f"{old_name} is deprecated and ignored now.")
        else:
            warnings.warn(f"{old_name} is deprecated, set {new_name} instead")
            os.environ[new_name] = os.environ[old_name]


def _note_now_a_flag(env_name, hint):
    if env_name in os.environ:
        warnings.warn(f"{env_name} is deprecated: {hint}")


def _convert_SGL_to_SGLANG():
    _note_renamed("SGLANG_WIDGET_LOG", "SGLANG_LOG_WIDGET")
    _note_renamed("SGLANG_WIDGET_LEGACY")
    in_seconds = {
        "SGLANG_WIDGET_WAIT_MS": "SGLANG_WIDGET_WAIT",
    }
    for old_name, new_name in in_seconds.items():
        if old_name in os.environ:
            warnings.warn(f"{old_name} (in ms) is deprecated, {new_name} is in seconds")
            os.environ[new_name] = str(float(os.environ[old_name]) / 1000)
    for old_name, new_name in {"SGLANG_WIDGET_POLL_S": "SGLANG_WIDGET_POLL_MS"}.items():
        if old_name in os.environ:
            s_val = os.environ[old_name]
            warnings.warn(f"{old_name} (in s) is deprecated, {new_name} is in ms")
            os.environ[new_name] = str(1000 * int(s_val))
    for old_name, new_name in {"SGLANG_WIDGET_GRACE_MS": "SGLANG_WIDGET_GRACE"}.items():
        if old_name in os.environ:
            warnings.warn(f"{old_name} (in ms) is deprecated, {new_name} is in seconds")
            secs = str(float(os.environ[old_name]) / 1000)
            os.environ[new_name] = secs
    for old_name, new_name in {"SGLANG_WIDGET_IDLE_S": "SGLANG_WIDGET_IDLE_MIN"}.items():
        if old_name in os.environ:
            warnings.warn(f"{old_name} (in s) is deprecated, {new_name} is in minutes")
            os.environ[new_name] = str(round(float(os.environ[old_name]) / 60))
    for key, value in os.environ.items():
        if key.startswith("SGL_"):
            new_key = key.replace("SGL_", "SGLANG_", 1)
            warnings.warn(f"{key} is deprecated, use {new_key}")
            os.environ[new_key] = value


_convert_SGL_to_SGLANG()
_note_now_a_flag("SGLANG_WIDGET_TURBO", "Pass '--widget-mode' instead.")
_note_now_a_flag("SGLANG_WIDGET_GIZMO", "Pass '--widget-gizmo' instead.")
_note_now_a_flag("SGLANG_WIDGET_SAFE", "Pass '--widget-mode=safe' instead.")
_note_now_a_flag(os.environ.get("SGLANG_WIDGET_WHICH", ""), "not a literal name")
"""

NEW_RUNNER = """
import os

from sglang.srt.environ import envs
from sglang.srt.utils import get_int_env_var

CHUNK = envs.SGLANG_CHUNK_SIZE.get()
RATIO = envs.SGLANG_WIDGET_RATIO.value
HOME = os.getenv("WIDGET_HOME", "/var/tmp")
# Defaults read from another variable, or another's declared default.
SCRATCH = os.environ.get("WIDGET_SCRATCH", os.environ.get("WIDGET_TMPDIR", "/tmp"))
BATCH = get_int_env_var("WIDGET_BATCH", get_int_env_var("WIDGET_BATCH_OLD"))
HOST = os.getenv(
    "WIDGET_HOSTNAME", envs.SGLANG_CHUNK_SIZE.default
)


def _lazy_bool(name, default):
    return default


FAST = _lazy_bool("SGLANG_WIDGET_FAST", False)
"""

NEW_FLAGS_DOC = """
# Server Arguments

## Model
| Argument | Description | Defaults | Options |
| --- | --- | --- | --- |
| `--model-path`<br>`--model` | The model. | `None` | Type: str |
| `--tp-size`<br>`--tp` | TP size. | `2` | Type: int |
| `--widget-mode` | Mode. | `fast` | `fast`, `safe`, `turbo` |
| `--widget-size` | Gone. | `1` | Type: int |
"""

OLD_TABLE_FLAGS_DOC = """
| Arguments | Description | Defaults |
|-----------|-------------|----------|
| `--model-path` | The model. | None |
| `--enable-widget` | Widget. | False |
"""

ENV_DOC = """
# Environment Variables

| Environment Variable | Description | Default Value |
| --- | --- | --- |
| `SGLANG_WIDGET_COMPILE` | Compile widgets | `true` |
| `SGL_CHUNK_SIZE` | Chunk size | `512` |
| `SGLANG_GADGET_FUSE` | Fuse | `true` |
| `SGLANG_WIDGET_GONE` | Removed long ago | `false` |
| `SGLANG_WIDGET_WARMUP_OFF` | Skip the kernels' warm-up | `false` |
| `SGLANG_WIDGET_RATIO` | Ratio \\| fraction | `0.5` |
"""

# sgl-kernel's Python package reads variables of its own; its benchmarks are not installed.
KERNEL_PY = """
import os


def warm_up():
    if os.getenv("SGLANG_WIDGET_WARMUP_OFF", "").lower() in ("1", "true"):
        return
"""
KERNEL_BENCH = 'import os\nMODE = os.environ.get("SGLANG_WIDGET_BENCH_MODE", "")\n'


def build_env_repo(root: Path) -> Path:
    """v0.4.0: direct reads and bullet docs; v0.5.0: environ.py, envs.X, table docs."""
    repo = root / "envrepo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, OLD_SERVER_ARGS)
    write(repo, RUNNER, OLD_RUNNER)
    write(repo, "docs/backend/server_arguments.md", OLD_DOCS)
    commit(repo, "old", "2025-01-01T12:00:00Z", "v0.4.0")
    write(repo, "docs/backend/server_arguments.md", OLD_TABLE_FLAGS_DOC)
    commit(repo, "old table", "2025-02-01T12:00:00Z", "v0.4.1")
    git(repo, "rm", "-q", "docs/backend/server_arguments.md")
    write(repo, SERVER_ARGS, NEW_SERVER_ARGS)
    write(repo, RUNNER, NEW_RUNNER)
    # Still reads the SGL_ names directly.
    write(repo, ENGINE, OLD_RUNNER.replace('HOME = os.getenv("WIDGET_HOME", "/tmp")\n', ""))
    write(repo, ENVIRON, ENVIRON_PY)
    write(repo, "docs/advanced_features/server_arguments.md", NEW_FLAGS_DOC)
    write(repo, "docs/references/environment_variables.md", ENV_DOC)
    write(repo, "docs/diffusion/environment_variables.md", ENV_DOC.replace("SGLANG_", "DIFF_"))
    write(repo, "sgl-kernel/python/sgl_kernel/warmup.py", KERNEL_PY)
    write(repo, "sgl-kernel/benchmark/bench_widget.py", KERNEL_BENCH)
    commit(repo, "new", "2025-06-01T12:00:00Z", "v0.5.0")
    return repo
