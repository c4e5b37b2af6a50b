"""Where the model's config.json comes from, for the explain profile: pasted, fetched from
the Hugging Face Hub, read from a local model directory, or transformers' defaults for an
architecture.

The model is named by the profile's `model` field or, failing that, by the command's own
`--model-path` (`--model`): a Hugging Face id (`org/name`) or a directory. Its config.json
(and hf_quant_config.json, where ModelOpt checkpoints keep their quantization) becomes the
profile's config, and `model_source` says where it came from:

- "pasted": the profile's `config`;
- "hub:<id>@<commit>": fetched through huggingface_hub (HF_ENDPOINT, HF_TOKEN and
  HF_HUB_OFFLINE as the client reads them) into a cache directory in huggingface_hub's own
  layout (default_cache_dir), so a model id is fetched once, then read from disk with no
  request. The cache takes concurrent writers (several server workers: the client locks and
  renames atomically) and lives beside the knowledge base, not in it: the server opens the
  knowledge base read-only, and a PostgreSQL one has no directory;
- "local:<dir>": a directory on the machine running flagatlas (the CLI reads any; the server
  only those under a root FLAGATLAS_MODEL_DIRS lists, symlinks resolved);
- "reference:transformers <Class> <version>": the defaults of the transformers config class
  of an architecture the user chose without a config (the optional `models` extra). Those
  defaults are one model's (LlamaConfig's are Llama-2-7B's), never a real checkpoint's, and
  the answer says so.

A model the profile names and that cannot be had is an error (ModelUnavailable, with the
HTTP status it deserves and what to do instead); one the command names is a note in the
answer, and the explain goes on without it. An unreachable hub fails in a few seconds: one
probe with a short timeout and no retries before huggingface_hub's own download (whose
retries after a failed connection take ~25 s), and the failure is remembered for a while.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from kb.explain.shell import tokenize

CONFIG = "config.json"
QUANT_CONFIG = "hf_quant_config.json"  # ModelOpt checkpoints' quantization
MAX_FILE = 2_000_000  # bytes: a config.json is a few KB; refuse anything that is not one
# A Hugging Face model id: `org/name` (huggingface_hub's own rules for the characters).
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
MODEL_DIRS = "FLAGATLAS_MODEL_DIRS"  # roots the server may read model directories under
MODEL_CACHE = "FLAGATLAS_MODEL_CACHE"  # where fetched models are cached
HUB_TIMEOUT = "FLAGATLAS_HUB_TIMEOUT"  # seconds the probe waits for the hub (default 3)
UNREACHABLE_FOR = 30.0  # seconds an unreachable hub is not asked again
REFUSED_FOR = 300.0  # seconds a model the hub refused (no such model, gated) is not asked again
WHAT_TO_DO = "paste the model's config.json into the profile, or give a local model directory"


class ModelUnavailable(ValueError):
    """The model the profile names cannot be read; `status` is the HTTP status it answers."""

    def __init__(self, message: str, status: int = 400, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        # seconds before asking again may answer otherwise (a remembered hub failure)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ModelFiles:
    """A model's config.json (and hf_quant_config.json) and where they came from."""

    config: dict[str, Any]
    quant_config: dict[str, Any] | None
    source: str


@dataclass(frozen=True)
class ModelPlaces:
    """Where models may be read from: the cache of fetched ones, and the local directories
    allowed (`local_roots` None: any path, as for the CLI on the user's own machine)."""

    cache_dir: Path
    local_roots: tuple[Path, ...] | None

    @classmethod
    def for_server(cls, db_url: str) -> ModelPlaces:
        roots = os.environ.get(MODEL_DIRS, "")
        return cls(default_cache_dir(db_url), tuple(Path(r) for r in roots.split(os.pathsep) if r))

    @classmethod
    def for_cli(cls, db_url: str) -> ModelPlaces:
        return cls(default_cache_dir(db_url), None)


def default_cache_dir(db_url: str) -> Path:
    """FLAGATLAS_MODEL_CACHE; else `<db>.models` beside a SQLite knowledge base (as its
    search index, `<db>.search`); else `flagatlas.models` beside FLAGATLAS_INDEX's
    directory, or under data/."""
    if os.environ.get(MODEL_CACHE):
        return Path(os.environ[MODEL_CACHE])
    if db_url.startswith("sqlite:///"):
        return Path(db_url.removeprefix("sqlite:///") + ".models")
    index = os.environ.get("FLAGATLAS_INDEX")
    return (Path(index).parent if index else Path("data")) / "flagatlas.models"


@dataclass
class ModelOrigin:
    """Where the profile's model config came from (None: nowhere), and what the answer
    says about it."""

    source: str | None = None
    notes: list[str] = field(default_factory=list)
    # the draft model's config.json, when speculative decoding's draft is a checkpoint of
    # its own: "pasted" (the profile's draft_config), else read as the model's is
    draft_source: str | None = None
    # How long an answer built on it holds: None as long as the knowledge base (pasted,
    # fetched once, reference), 0 not at all (a directory may change), else the seconds
    # before a hub failure it notes is asked again.
    holds_for: float | None = None

    def noted_failure(self, exc: ModelUnavailable, prefix: str = "") -> None:
        self.notes.append(f"{prefix}{exc}")
        if exc.retry_after is not None:
            self.holds_for = min(self.holds_for or exc.retry_after, exc.retry_after)


def with_model(
    data: dict[str, Any] | None, command: str, places: ModelPlaces
) -> tuple[dict[str, Any] | None, ModelOrigin]:
    """The profile's data with the model's config filled in (`config`, `hf_quant_config`),
    and the draft model's (`draft_config`), and where they came from. ModelUnavailable
    when the profile's `model` cannot be read."""
    origin = ModelOrigin()
    data = _with_main_model(data, command, places, origin)
    return _with_draft_model(data, command, places, origin), origin


def _with_draft_model(
    data: dict[str, Any] | None, command: str, places: ModelPlaces, origin: ModelOrigin
) -> dict[str, Any] | None:
    """`draft_config`: pasted, else read from the command's
    `--speculative-draft-model-path` when it names a model other than the model (MTP's
    draft is the model's own checkpoint: its config.json is the model's) by the model's
    own rules; one that cannot be had is a note."""
    given = {k: v for k, v in (data or {}).items() if v not in (None, "")}
    if given.get("draft_config") is not None:
        origin.draft_source = "pasted"
        return data
    path, revision = command_model(command, DRAFT_FLAGS)
    model = given.get("model") or command_model(command)[0]
    if not path or path == model:
        return data
    try:
        files = read_model(path, revision, places)
    except ModelUnavailable as exc:
        origin.noted_failure(exc, f"--speculative-draft-model-path {path}: ")
        return data
    if files is None:
        return data
    origin.draft_source = files.source
    if files.source.startswith("local:"):
        origin.holds_for = 0
    return {**given, "draft_config": files.config}


def _with_main_model(
    data: dict[str, Any] | None, command: str, places: ModelPlaces, origin: ModelOrigin
) -> dict[str, Any] | None:
    given = {k: v for k, v in (data or {}).items() if v not in (None, "")}
    model = given.get("model")
    if given.get("config") is not None:
        origin.source = "pasted"
        if model:
            origin.notes.append(f"{model} was not read: the pasted config.json is used")
        return data
    files = None
    if model:
        files = read_model(str(model), None, places)
        if files is None:
            where = "on this machine" if places.local_roots is None else f"under {MODEL_DIRS}"
            raise ModelUnavailable(
                f"model {str(model)[:200]!r} is neither a Hugging Face model id (org/name) nor "
                f"a directory {where}; paste the model's config.json into the profile"
            )
    else:
        path, revision = command_model(command)
        try:  # a path that is neither (`--model-path m`) is no concern of the answer's
            files = read_model(path, revision, places) if path else None
        except ModelUnavailable as exc:
            origin.noted_failure(exc, f"--model-path {path}: ")
    if files is None and given.get("arch"):
        try:
            files = reference_config(str(given["arch"]), given.get("quant"))
            origin.notes.append(f"assuming {reference_words(files.source)}")
        except ModelUnavailable as exc:
            origin.notes.append(str(exc))
    if files is None:
        return data
    origin.source = files.source
    if files.source.startswith("local:"):
        origin.holds_for = 0
    if files.quant_config is not None:
        quantization = files.quant_config.get("quantization")
        algo = quantization.get("quant_algo") if isinstance(quantization, dict) else None
        origin.notes.append(f"{QUANT_CONFIG}: quant_algo {algo}" if algo else f"has {QUANT_CONFIG}")
    return {**given, "config": files.config, "hf_quant_config": files.quant_config}


MODEL_FLAGS = {"--model-path": "path", "--model": "path", "--revision": "revision"}
DRAFT_FLAGS = {
    "--speculative-draft-model-path": "path",
    "--speculative-draft-model": "path",
    "--speculative-draft-model-revision": "revision",
}


def command_model(
    command: str, flags: dict[str, str] = MODEL_FLAGS
) -> tuple[str | None, str | None]:
    """The command's `--model-path` (or `--model`) and `--revision`, the last of each as
    argparse keeps it; None where the command has none. `flags`: DRAFT_FLAGS for the
    draft model's path and revision."""
    try:
        argv = tokenize(command).argv
    except ValueError:
        return None, None
    found: dict[str, str] = {}
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        key = flags.get(name)
        if key is None:
            continue
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                continue
            value = argv[i + 1]
        found[key] = value
    return found.get("path"), found.get("revision")


def read_model(name: str, revision: str | None, places: ModelPlaces) -> ModelFiles | None:
    """The model `name` names: a local directory where one may be read, else a Hugging
    Face id fetched (or read from the cache); None when it is neither."""
    local = _local_dir(name, places.local_roots)
    if local is not None:
        return _read_dir(local, places.local_roots)
    if HUB_ID.fullmatch(name) and ".." not in name and "--" not in name:
        return from_hub(name, revision or "main", places.cache_dir)
    return None


# --- a local directory ------------------------------------------------------------------


def _local_dir(name: str, roots: tuple[Path, ...] | None) -> Path | None:
    """The directory `name` is, when it may be read: the CLI reads any existing one; the
    server only an absolute path under one of its roots (after resolving symlinks), and
    never says whether a path outside them exists. None for a relative path that is no
    directory (it may be a Hugging Face id); ModelUnavailable for an absolute one."""
    if roots is None:
        path = Path(name).expanduser()
        if path.is_dir():
            return path
        if path.is_absolute():
            raise ModelUnavailable(f"no such directory on this machine; {WHAT_TO_DO}")
        return None
    if not os.path.isabs(name):
        return None
    resolved = Path(os.path.realpath(name))
    if not roots:
        raise ModelUnavailable(
            f"the server reads no local model directories ({MODEL_DIRS} is unset); {WHAT_TO_DO}"
        )
    if not any(resolved.is_relative_to(os.path.realpath(root)) for root in roots):
        raise ModelUnavailable(f"not a directory under {MODEL_DIRS}; {WHAT_TO_DO}")
    if not resolved.is_dir():
        raise ModelUnavailable(f"{name}: no such model directory")
    return resolved


def _read_dir(path: Path, roots: tuple[Path, ...] | None) -> ModelFiles:
    config = _read_json(path / CONFIG, roots)
    if config is None:
        raise ModelUnavailable(f"{path}: no {CONFIG} in this directory")
    return ModelFiles(config, _read_json(path / QUANT_CONFIG, roots), f"local:{path}")


def _read_json(path: Path, roots: tuple[Path, ...] | None) -> dict[str, Any] | None:
    """A JSON object file; None when absent. Under `roots`, the file itself (a symlink, as
    in a Hugging Face cache snapshot) must resolve under one of them too."""
    if roots is not None:
        resolved = os.path.realpath(path)
        if not any(Path(resolved).is_relative_to(os.path.realpath(r)) for r in roots):
            raise ModelUnavailable(f"{path}: links outside {MODEL_DIRS}")
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_FILE:
        raise ModelUnavailable(f"{path}: over {MAX_FILE} bytes, not a model's config")
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ModelUnavailable(f"{path}: not a JSON object")
    return value


# --- the Hugging Face Hub ---------------------------------------------------------------

_unreachable: dict[str, tuple[float, str]] = {}  # endpoint -> (until, message)
# (endpoint, repo id, revision) -> (until, the refusal): a page asked again for a missing or
# gated model answers from here instead of sending each visitor's request to the hub.
_refused: dict[tuple[str, str, str], tuple[float, ModelUnavailable]] = {}
_lock = threading.Lock()


def from_hub(repo_id: str, revision: str, cache_dir: Path) -> ModelFiles:
    """config.json (and hf_quant_config.json) of `repo_id` at `revision`: from the cache
    when both were fetched before (no request), else from the hub (HF_ENDPOINT)."""
    from huggingface_hub import constants, errors, get_hf_file_metadata, hf_hub_download, hf_hub_url

    cached = _from_cache(repo_id, revision, cache_dir)
    if cached is not None:
        return cached
    # Read at each call (huggingface_hub reads HF_ENDPOINT once, when imported).
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or constants.ENDPOINT
    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    if offline or constants.HF_HUB_OFFLINE:
        raise ModelUnavailable(
            f"{repo_id} is not in the model cache and HF_HUB_OFFLINE is set; {WHAT_TO_DO}", 503
        )
    asked = (endpoint, repo_id, revision)
    with _lock:
        until, message = _unreachable.get(endpoint, (0.0, ""))
        refused_until, refusal = _refused.get(asked, (0.0, None))
    now = time.monotonic()
    if now < until:
        raise ModelUnavailable(message, 503, until - now)
    if refusal is not None and now < refused_until:
        raise ModelUnavailable(str(refusal), refusal.status, refused_until - now)
    timeout = float(os.environ.get(HUB_TIMEOUT) or 3)
    try:
        # The probe: one HEAD, no retries, a short timeout. hf_hub_download retries a failed
        # connection with backoff (~25 s) before giving up; this fails within `timeout`.
        url = hf_hub_url(repo_id, CONFIG, revision=revision, endpoint=endpoint)
        meta = get_hf_file_metadata(url, timeout=timeout, endpoint=endpoint)
        if meta.size is not None and meta.size > MAX_FILE:
            raise ModelUnavailable(f"{repo_id}: its {CONFIG} is over {MAX_FILE} bytes")
        options: dict[str, Any] = {"cache_dir": cache_dir, "endpoint": endpoint}
        options["etag_timeout"] = timeout
        config_path = hf_hub_download(repo_id, CONFIG, revision=revision, **options)
        commit = Path(config_path).parent.name
        try:  # at the commit config.json came from; its absence is cached too (.no_exist)
            quant_path = hf_hub_download(repo_id, QUANT_CONFIG, revision=commit, **options)
        except errors.EntryNotFoundError:
            quant_path = None
    except ModelUnavailable:
        raise
    except (errors.HfHubHTTPError, OSError) as exc:  # HTTP errors, network, file system
        raise _failed(asked, _hub_error(exc, repo_id, revision, endpoint)) from None
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2"):  # the client's transport
            raise _failed(asked, _hub_error(exc, repo_id, revision, endpoint)) from None
        raise
    return _files(repo_id, commit, Path(config_path), Path(quant_path) if quant_path else None)


def cached_model(name: str, revision: str | None, cache_dir: Path) -> ModelFiles | None:
    """The config of Hugging Face id `name` if it was fetched before, else None: read from
    the cache alone, never from the network (a check of many commands at once must not
    reach out)."""
    if not HUB_ID.fullmatch(name) or ".." in name or "--" in name:
        return None
    try:
        return _from_cache(name, revision or "main", cache_dir)
    except (ModelUnavailable, OSError, ValueError):
        return None


def _from_cache(repo_id: str, revision: str, cache_dir: Path) -> ModelFiles | None:
    """Both files as fetched before (hf_quant_config.json's absence is cached as such),
    or None when either was not."""
    from huggingface_hub import try_to_load_from_cache

    config = try_to_load_from_cache(repo_id, CONFIG, cache_dir=cache_dir, revision=revision)
    if not isinstance(config, str):
        return None
    commit = Path(config).parent.name
    quant = try_to_load_from_cache(repo_id, QUANT_CONFIG, cache_dir=cache_dir, revision=commit)
    if quant is None:
        return None
    return _files(repo_id, commit, Path(config), Path(quant) if isinstance(quant, str) else None)


def _files(repo_id: str, commit: str, config: Path, quant: Path | None) -> ModelFiles:
    config_json = _read_json(config, None)
    if config_json is None:
        raise ModelUnavailable(f"{repo_id}: its cached {CONFIG} is gone", 503)
    quant_json = _read_json(quant, None) if quant is not None else None
    return ModelFiles(config_json, quant_json, f"hub:{repo_id}@{commit}")


def _failed(asked: tuple[str, str, str], error: ModelUnavailable) -> ModelUnavailable:
    """`error`, remembered for a while when the hub refused the model itself (a 4xx)."""
    if 400 <= error.status < 500:
        error.retry_after = REFUSED_FOR
        with _lock:
            _refused[asked] = (time.monotonic() + REFUSED_FOR, error)
    return error


def _hub_error(exc: Exception, repo_id: str, revision: str, endpoint: str) -> ModelUnavailable:
    """What a failed fetch means for the user, with the status to answer."""
    from huggingface_hub import errors

    status = getattr(getattr(exc, "response", None), "status_code", None)
    gated = f"{repo_id} is gated or private on the hub: set HF_TOKEN on the server, or {WHAT_TO_DO}"
    if isinstance(exc, errors.GatedRepoError):
        return ModelUnavailable(gated, 403)
    if isinstance(exc, errors.RepositoryNotFoundError):
        if status == 401:  # the hub answers 401 for a private repo and a missing one alike
            return ModelUnavailable(f"no such model on the hub, or it is private: {gated}", 404)
        return ModelUnavailable(f"no such model on the hub: {repo_id} ({endpoint})", 404)
    if isinstance(exc, errors.RevisionNotFoundError):
        return ModelUnavailable(f"{repo_id} has no revision {revision!r} on the hub", 404)
    if isinstance(exc, errors.EntryNotFoundError):
        return ModelUnavailable(f"{repo_id} has no {CONFIG} on the hub", 404)
    if isinstance(exc, errors.HfHubHTTPError) and status in (401, 403):
        return ModelUnavailable(gated, 403)
    if isinstance(exc, errors.HfHubHTTPError) and status is not None and status < 500:
        return ModelUnavailable(f"the hub refused {repo_id} ({status}); {WHAT_TO_DO}")
    if isinstance(exc, PermissionError):
        return ModelUnavailable(f"the model cache is not writable ({exc}); set {MODEL_CACHE}", 503)
    message = (
        f"the Hugging Face Hub is unreachable from here ({endpoint}: {type(exc).__name__}: "
        f"{str(exc)[:200]}); {WHAT_TO_DO}"
    )
    with _lock:
        _unreachable[endpoint] = (time.monotonic() + UNREACHABLE_FOR, message)
    return ModelUnavailable(message, 503, UNREACHABLE_FOR)


# --- transformers' reference configs ----------------------------------------------------


def reference_words(source: str) -> str:
    """ "reference:transformers LlamaConfig 5.25.0" in words."""
    _, cls, version = source.split(" ")
    return f"transformers' default {cls} config (transformers {version}), not a real checkpoint's"


def reference_config(arch: str, quant: Any = None) -> ModelFiles:
    """The defaults of the transformers config class of `arch` (which transformers maps
    to a model type), as a config.json: its architectures the one chosen, its quantization
    the profile's. ModelUnavailable when transformers is not installed or has no class."""
    config, source = _reference(arch)
    if quant:
        config = {**config, "quantization_config": {"quant_method": str(quant)}}
    return ModelFiles(config, None, source)


@lru_cache(maxsize=64)
def _reference_cached(arch: str) -> tuple[str, str]:
    try:
        import transformers
        from transformers import CONFIG_MAPPING

        # by its full name: `from transformers.models.auto import modeling_auto` gives a
        # stand-in that needs torch; the module's name tables do not
        modeling_auto = importlib.import_module("transformers.models.auto.modeling_auto")
    except ImportError:
        raise ModelUnavailable(
            f"no reference config for {arch}: transformers is not installed "
            "(pip install 'flagatlas[models]')"
        ) from None
    # The model types whose model classes include `arch` (several share LlamaForCausalLM);
    # the one whose config class is named after the architecture (Llama -> LlamaConfig).
    types = {
        key
        for name, mapping in vars(modeling_auto).items()
        if name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict)
        for key, classes in mapping.items()
        if key in CONFIG_MAPPING
        and (arch == classes or (isinstance(classes, tuple | list) and arch in classes))
    }
    named = arch.partition("For")[0].lower() + "config"
    same = [t for t in types if CONFIG_MAPPING[t].__name__.lower() == named]
    if len(same) == 1 or len(types) == 1:
        model_type = (same or list(types))[0]
    else:
        classes = ", ".join(sorted(CONFIG_MAPPING[t].__name__ for t in types))
        raise ModelUnavailable(
            f"no reference config for {arch}: transformers {transformers.__version__} has "
            + (f"several config classes for it ({classes})" if types else "no config class for it")
        )
    cls = CONFIG_MAPPING[model_type]
    config = json.loads(json.dumps(cls().to_dict(), default=str))  # as a config.json reads
    config["architectures"] = [arch]
    return json.dumps(config), f"reference:transformers {cls.__name__} {transformers.__version__}"


def _reference(arch: str) -> tuple[dict[str, Any], str]:
    text, source = _reference_cached(arch)
    return json.loads(text), source


def source_words(source: str | None) -> str:
    """A model_source in words, for the page and the terminal."""
    if source is None:
        return "none: the model's facts stay unknown"
    kind, _, rest = source.partition(":")
    if kind == "hub":
        repo_id, _, commit = rest.rpartition("@")
        return f"config.json of {repo_id} at commit {commit[:12]}, from the Hugging Face Hub"
    if kind == "local":
        return f"config.json read from {rest}"
    if kind == "reference":
        return reference_words(source) + " (the defaults of transformers' config classes)"
    return "the pasted config.json"
