"""The model's files on the Hugging Face Hub as the simulator answers them
(kb/explain/model_files.py), on a synthetic ServerArgs shaped like SGLang's (none of its
code): a load format chosen from the repository's file list (`HfApi().model_info(repo)
.siblings`) is decided under the stated assumption that the checkpoint is its config.json
alone, for the model's own Hub repository only."""

from __future__ import annotations

from kb.explain import derived
from kb.explain.predicates import Profile, Unknown
from kb.explain.simulate import Simulator
from tests import sim_repos

ARGS = "python/sglang/srt/server_args.py"
FILES = {
    ARGS: """
        import os
        from dataclasses import dataclass


        @dataclass
        class ServerArgs:
            model_path: str
            load_format: str = "auto"

            def __post_init__(self):
                if self.load_format == "auto" and self._is_native_format():
                    self.load_format = "native"

            def _is_native_format(self):
                if os.path.isdir(self.model_path):
                    return False
                try:
                    from huggingface_hub import HfApi

                    files = {s.rfilename for s in HfApi().model_info(self.model_path).siblings}
                    return any(f.startswith("consolidated") for f in files)
                except Exception:
                    return False
        """,
}


def load_format(model_path: str) -> tuple[object, dict[str, str]]:
    mods = sim_repos.parsed_modules(FILES)
    # (comprehensions are interpreted by kb.explain.derived, as explain's runs have it)
    sim = Simulator(mods.get, mods[ARGS], {"model_path": model_path}, Profile(), derive=derived)
    result = sim.run()
    return result.fields["load_format"], result.assumptions


def test_a_hub_repository_s_file_list_is_its_config_json_alone() -> None:
    found, assumptions = load_format("org/model")
    assert found == "auto"
    assert "org/model has no file besides config.json" in assumptions["checkpoint-files"]


def test_a_local_directory_s_files_are_not_known() -> None:
    found, assumptions = load_format("/models/mine")
    assert isinstance(found, Unknown)
    assert "checkpoint-files" not in assumptions


# A hook reading a checkpoint's config through SGLang's get_config: the 2026-07 shape, whose
# config comes from a registered parser (`parser.parse(...)`), not AutoConfig.
CONFIG_FILES = {
    ARGS: """
        from dataclasses import dataclass

        from sglang.srt.utils.hf_config import get_config


        @dataclass
        class ServerArgs:
            model_path: str
            speculative_draft_model_path: str = None
            speculative_algorithm: str = "EAGLE"

            def __post_init__(self):
                if self.speculative_draft_model_path:
                    cfg = get_config(self.speculative_draft_model_path, trust_remote_code=False)
                    archs = getattr(cfg, "architectures", None) or []
                    if "AssistantForCausalLM" in archs:
                        self.speculative_algorithm = "FROZEN_KV_MTP"
        """,
    "python/sglang/srt/utils/hf_config.py": """
        _PARSERS = {}


        def get_config(model, trust_remote_code, **kwargs):
            parser = _PARSERS["hf"]()
            config = parser.parse(model, trust_remote_code=trust_remote_code)
            return config
        """,
}
MAIN = {"architectures": ["MainForCausalLM"]}


def algorithm(draft_path: str, profile: dict[str, object]) -> object:
    mods = sim_repos.parsed_modules(CONFIG_FILES)
    fields = {"model_path": "org/main", "speculative_draft_model_path": draft_path}
    sim = Simulator(mods.get, mods[ARGS], fields, Profile.parse(profile), derive=derived)
    return sim.run().fields["speculative_algorithm"]


def test_get_config_reads_the_config_of_the_path_it_is_given() -> None:
    # the model's own path: the profile's config.json
    assert algorithm("org/main", {"config": MAIN}) == "EAGLE"
    # the draft's path: its config.json when the profile has it
    assistant = {"architectures": ["AssistantForCausalLM"]}
    assert algorithm("org/draft", {"config": MAIN, "draft_config": assistant}) == "FROZEN_KV_MTP"
    assert algorithm("org/draft", {"config": MAIN, "draft_config": MAIN}) == "EAGLE"
    # ... else not known (it was the model's config, read as the draft's)
    assert isinstance(algorithm("org/draft", {"config": MAIN}), Unknown)
