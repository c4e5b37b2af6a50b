"""The server's disk, as far as the model's path decides it.

SGLang probes the model's directory while it loads (`os.path.exists(self.model_path)`,
`Path(model_path, "quant_model_description.json").is_file()` for a ModelSlim export). When
`--model-path` is a Hugging Face model id (`org/name`), as the profile's config.json comes
from the Hub, no such path is on the server's disk: each probe under it is false, and the
run lists that as an assumption. Any other path (a local directory) is unknown: what it holds
is not known here.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from kb.explain.abstract_values import Obj, run_owned
from kb.explain.known_names import OS_PATH_PROBES
from kb.explain.predicates import MODEL, unknown

Simulator = Any  # kb.explain.simulate.Simulator (which this module must not import)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
PROBES = frozenset({"exists", "is_file", "is_dir", "isfile", "isdir"})


@dataclass(frozen=True)
class LocalPath:
    """`pathlib.Path(...)` of known parts."""

    path: str

    def __truediv__(self, other: Any) -> LocalPath:
        if not isinstance(other, str):
            raise TypeError(other)  # (the interpreter's lift turns it into unknown)
        return LocalPath(posixpath.join(self.path, other))


def make_path(args: list[Any]) -> Any:
    if args and all(isinstance(a, str | LocalPath) for a in args):
        return LocalPath(posixpath.join(*(a.path if isinstance(a, LocalPath) else a for a in args)))
    return unknown("a path on the server")


def join(args: list[Any]) -> Any:
    """`os.path.join` of known strings (under a downloaded snapshot's folder too)."""
    if args and isinstance(args[0], Snapshot) and all(isinstance(a, str) for a in args[1:]):
        return SnapshotPath(args[0].repo, posixpath.join("", *args[1:]))
    if args and all(isinstance(a, str) for a in args):
        return posixpath.join(*args)
    return unknown("a path on the server")


# the server args naming a model's checkpoint: the model's, speculative decoding's draft's
MODEL_PATHS = {"model_path": "--model-path", "speculative_draft_model_path": (
    "--speculative-draft-model-path"
)}  # fmt: skip


def _hub_model(sim: Simulator, path: str) -> tuple[str, str] | None:
    """(the flag, the Hub id) of the run's model path that `path` is or lies under, when
    that path is a Hugging Face model id."""
    for field, flag in MODEL_PATHS.items():
        model = sim.fields.get(field)
        if (
            isinstance(model, str)
            and HUB_ID.fullmatch(model)
            and not model.startswith(".")
            and (path == model or path.startswith(model + "/"))
        ):
            return flag, model
    return None


def probe(sim: Simulator, path: Any) -> Any:
    """Whether `path` exists on the server: false under a model path that is a Hub id."""
    if isinstance(path, LocalPath):
        path = path.path
    hub = _hub_model(sim, path) if isinstance(path, str) else None
    if hub is not None:
        flag, model = hub
        key = "model-path-is-a-hub-id" if flag == "--model-path" else "draft-path-is-a-hub-id"
        sim.result.assumptions[key] = (
            f"{flag} {model} is a Hugging Face model id, not a directory on the "
            "server: no file of it is on the server's disk"
        )
        return False
    shown = path if isinstance(path, str) else "a path"
    return unknown(f"whether {shown} exists on the server")


# --- the Hugging Face Hub: a checkpoint's files besides config.json ------------------------

HUB_MODULES = ("huggingface_hub", "modelscope")
HUB_CLIENTS = frozenset({"HfApi", "HubApi"})
# what `hf_hub_download` raises for a file the repository does not have (offline: not cached)
NOT_FOUND = ("LocalEntryNotFoundError", "EntryNotFoundError")


@dataclass(frozen=True)
class Snapshot:
    """`snapshot_download(repo)`: the local folder of the repository's files."""

    repo: str


@dataclass(frozen=True)
class SnapshotPath:
    """A path under a Snapshot's folder (`os.path.join(folder, "*.json")`)."""

    repo: str
    path: str


def glob(sim: Simulator, pattern: Any) -> Any:
    """`glob.glob(pattern)` in a downloaded snapshot: the repository's files are config.json
    alone (the profile describes the checkpoint by it), as the paths of the snapshot's."""
    if not isinstance(pattern, SnapshotPath) or "/" in pattern.path:
        return unknown("the files glob.glob() finds")
    names = ["config.json"]
    if _given(sim, pattern.repo, QUANT_CONFIG):  # (the profile gives it too)
        sim.reads.add(MODEL)
        names.append(QUANT_CONFIG)
    else:
        _assume_config_alone(
            sim, pattern.repo, f"has no file matching {pattern.path} but config.json"
        )
    return [
        _snapshot_file(pattern.repo, name)
        for name in names
        if fnmatch.fnmatchcase(name, pattern.path)
    ]


def _snapshot_file(repo: str, name: str) -> str:
    return posixpath.join(f"<snapshot of {repo}>", name)


@dataclass(frozen=True)
class HubFile:
    """A file of the model's Hub repository whose content the profile gives (its
    hf_quant_config.json): `hf_hub_download` returns its path, `open` of it the file, and
    `json.load` of that the content."""

    repo: str
    filename: str


QUANT_CONFIG = "hf_quant_config.json"  # (ModelOpt's; the profile's hf_quant_config)


def _given(sim: Simulator, repo: Any, filename: Any) -> bool:
    """The file is the model's hf_quant_config.json and the profile gives its content."""
    return (
        filename == QUANT_CONFIG
        and isinstance(repo, str)
        and sim.profile is not None
        and sim.profile.hf_quant_config is not None
        and repo == sim.fields.get("model_path")
        and _hub_model(sim, repo) is not None
    )


def open_file(sim: Simulator, args: list[Any]) -> Any:
    """`open(path)`: the file of a HubFile path (or of the file's path in a downloaded
    snapshot); else not known."""
    path = args[0] if args else None
    if isinstance(path, HubFile):
        return path
    model = sim.fields.get("model_path")
    if isinstance(model, str) and path == _snapshot_file(model, QUANT_CONFIG):
        if _given(sim, model, QUANT_CONFIG):
            return HubFile(model, QUANT_CONFIG)
    return unknown("an opened file")


def json_load(sim: Simulator, args: list[Any]) -> Any:
    """`json.load(f)` of a HubFile: the profile's content of it (the run's own copy)."""
    if args and isinstance(args[0], HubFile) and sim.profile is not None:
        sim.reads.add(MODEL)
        return run_owned(sim.profile.hf_quant_config)
    return unknown("what json.load() reads")


@dataclass(frozen=True)
class HubClient:
    """`HfApi()`: asked whether the model's repository has a file."""


def hub_call(sim: Simulator, name: str, args: list[Any], kwargs: dict[str, Any], ctx: Any) -> Any:
    """A call into huggingface_hub (or modelscope): the client, `hf_hub_download` of a file
    other than config.json (raises as for a file the repository lacks, when the run's code
    catches that), anything else unknown."""
    if name in HUB_CLIENTS:
        return HubClient()
    if name == "snapshot_download":  # (its allow_patterns fetch a part of them: a subset)
        repo = kwargs.get("repo_id", args[0] if args else None)
        if isinstance(repo, str) and _hub_model(sim, repo) == (_flag_of(sim, repo), repo):
            return Snapshot(repo)
    if name in ("hf_hub_download", "model_file_download"):
        repo = kwargs.get("repo_id", kwargs.get("model_id", args[0] if args else None))
        filename = kwargs.get(
            "filename", kwargs.get("file_path", args[1] if len(args) > 1 else None)
        )
        if _given(sim, repo, filename):
            sim.reads.add(MODEL)
            return HubFile(str(repo), str(filename))
        if _absent(sim, repo, filename):
            from kb.explain import exceptions

            for error in NOT_FOUND:
                if any(exceptions.catches(names, error) for names in sim.catching):
                    exceptions.handled(sim, error, ctx)
    return unknown(f"what {name}() returns")


def hub_method(sim: Simulator, name: str, args: list[Any]) -> Any:
    """`HfApi().file_exists(repo, filename)`; `HfApi().model_info(repo)`, whose `siblings`
    list the repository's files (read by attribute: a dict here), config.json alone."""
    if name == "file_exists":
        repo, filename = (args + [None, None])[:2]
        if _given(sim, repo, filename):
            sim.reads.add(MODEL)
            return True
        if _absent(sim, repo, filename):
            return False
        return unknown("whether the model's repository has the file")
    if name == "model_info" and args and _absent(sim, args[0], "file besides config.json"):
        return {"siblings": [{"rfilename": "config.json"}]}
    return unknown(f"what .{name}() returns")


def _absent(sim: Simulator, repo: Any, filename: Any) -> bool:
    """A file of a model's own Hub repository (the model's, the draft's) other than
    config.json: assumed absent, as the profile describes the checkpoint by its config.json
    alone."""
    if not (isinstance(repo, str) and isinstance(filename, str)):
        return False
    if filename == "config.json" or _hub_model(sim, repo) != (_flag_of(sim, repo), repo):
        return False
    if _given(sim, repo, filename):
        return False
    _assume_config_alone(sim, repo, f"has no {filename}")
    return True


def _flag_of(sim: Simulator, repo: str) -> str:
    hub = _hub_model(sim, repo)
    return hub[0] if hub is not None else ""


def _assume_config_alone(sim: Simulator, repo: str, what: str) -> None:
    """`what`: "has no <file>", "has no file matching <pattern> but config.json"."""
    sim.result.assumptions["checkpoint-files"] = (
        f"{repo} {what} (the checkpoint is described by its config.json alone: "
        "a ModelOpt export's hf_quant_config.json would change its quantization)"
    )


PATH_VALUES = (LocalPath, HubClient)  # values whose methods the interpreter asks here


NOT_A_PATH = object()  # path_call's answer for a call it does not answer


def path_call(sim: Simulator, dotted: str, args: list[Any]) -> Any:
    """`os.path.exists(p)` and the other probes, `os.path.join(...)`, `glob.glob(pattern)`;
    NOT_A_PATH for any other call."""
    if dotted in OS_PATH_PROBES:
        return probe(sim, args[0]) if args else unknown("a path")
    if dotted == "os.path.join":
        return join(args)
    if dotted == "glob.glob":
        return glob(sim, args[0]) if args else unknown("a glob")
    if dotted == "json.load" and args and isinstance(args[0], HubFile):
        return json_load(sim, args)
    return NOT_A_PATH


def loaded_config(sim: Simulator, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """What SGLang's get_config(path, ...) returns: the model's config (the profile's) for
    the model's path or a path not known here; for the speculative draft's own path, the
    draft's config.json when the profile gives it; for another known path, unknown (a
    config that is not the model's: the draft's is read to tell a Gemma-4 assistant)."""
    first = fn.args.args[0].arg if fn.args.args else None
    path = args[0] if args else kwargs.get(first or "")
    model_path = sim.fields.get("model_path")
    if not isinstance(path, str) or not isinstance(model_path, str) or path == model_path:
        return Obj("hf_config")
    draft = sim.profile.draft_config if sim.profile is not None else None
    if path == sim.fields.get("speculative_draft_model_path") and draft is not None:
        return Obj("draft_hf_config")
    return unknown(f"the config.json of {path}")
