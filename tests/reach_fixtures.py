"""A synthetic SGLang-shaped repository for the second hop: a flag read into a module global,
an accessor returning it, a class of accessors, functions named for the feature, model files
with EntryClass, model classes inheriting a user's forward (also through a module) and
classes holding a user (`self.model = X(...)`); backend registries, dispatch
dicts, containment in named constants and enum members reached through a receiver's type.
Made-up flags and code, modelled on SGLang's shapes.
"""

from __future__ import annotations

from pathlib import Path

from tests.fixture_repos import SERVER_ARGS, commit, git, write

SRT = "python/sglang/srt/"

ARGS = """
import argparse
import dataclasses
from typing import Optional

ATTENTION_BACKEND_CHOICES = ["fa3", "triton", "flashinfer", "aiter", "wave"]
MOE_RUNNER_BACKEND_CHOICES = ["auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm"]
MOE_A2A_BACKEND_CHOICES = ["none", "deepep", "flashinfer"]


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    ep_size: int = 1
    quantization: Optional[str] = None
    enable_dual_batch_overlap: bool = False
    enable_lone_batch_overlap: bool = False
    attention_backend: Optional[str] = None
    decode_attention_backend: Optional[str] = None
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"
    schedule_policy: str = "fcfs"
    disable_fusion: bool = False

    def __post_init__(self):
        self._handle_moe()

    def _handle_moe(self):
        model_arch = self.get_model_arch()
        if self.moe_runner_backend == "flashinfer_cutlass":
            assert self.quantization in ["modelopt_fp4", None], "cutlass MoE wants fp4 weights"
            assert self.ep_size in [1, self.tp_size], "expert parallel size must be 1 or tp"
        if self.moe_runner_backend == "flashinfer_trtllm":
            self.disable_fusion = True
        if model_arch in ["AlphaMoeForCausalLM"] and is_sm100_supported():
            if self.moe_runner_backend == "auto":
                self.moe_runner_backend = "flashinfer_trtllm"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True, help="Weights.")
        parser.add_argument("--tp-size", type=int, default=1, help="TP.")
        parser.add_argument("--ep-size", type=int, default=1, help="EP.")
        parser.add_argument(
            "--quantization", type=str, choices=["fp8", "modelopt_fp4", "awq"], help="Q."
        )
        parser.add_argument("--enable-dual-batch-overlap", action="store_true", help="Dbo.")
        parser.add_argument("--enable-lone-batch-overlap", action="store_true", help="Lbo.")
        parser.add_argument(
            "--attention-backend", type=str, choices=ATTENTION_BACKEND_CHOICES, help="Attn."
        )
        parser.add_argument(
            "--decode-attention-backend",
            type=str,
            choices=ATTENTION_BACKEND_CHOICES,
            help="Decode attn.",
        )
        parser.add_argument(
            "--moe-runner-backend",
            type=str,
            choices=MOE_RUNNER_BACKEND_CHOICES,
            default="auto",
            help="MoE runner.",
        )
        parser.add_argument(
            "--moe-a2a-backend",
            type=str,
            choices=MOE_A2A_BACKEND_CHOICES,
            default="none",
            help="MoE all-to-all.",
        )
        parser.add_argument(
            "--schedule-policy",
            type=str,
            choices=["lpm", "dfs-weight", "fcfs", "lof"],
            default="fcfs",
            help="Policy.",
        )
        parser.add_argument("--disable-fusion", action="store_true", help="No fusion.")
"""

MOE_UTILS = """
from typing import Optional

IS_DBO_ENABLED: Optional[bool] = None
IS_LBO_ENABLED: Optional[bool] = None


def initialize_moe_config(server_args):
    global IS_DBO_ENABLED, IS_LBO_ENABLED
    IS_DBO_ENABLED = server_args.enable_dual_batch_overlap
    IS_LBO_ENABLED = server_args.enable_lone_batch_overlap


def is_dbo_enabled() -> bool:
    return IS_DBO_ENABLED


def is_lbo_enabled() -> bool:
    global IS_LBO_ENABLED
    if IS_LBO_ENABLED is None:
        IS_LBO_ENABLED = False
    return IS_LBO_ENABLED
"""

MOE_INIT = """
from sglang.srt.layers.moe.utils import is_dbo_enabled, is_lbo_enabled

__all__ = ["is_dbo_enabled", "is_lbo_enabled"]
"""

DBO = """
from sglang.srt.layers.moe import is_dbo_enabled


class DboGraphPlugin:
    def capture(self, batch):
        if not is_dbo_enabled():
            return
        batch.split = True


def model_forward_maybe_dbo(layers, enable_dbo):
    if enable_dbo:
        return [layer for layer in layers]
    return layers


def split_helper(x):
    return x
"""

LBO = """
from sglang.srt.layers.moe.utils import is_lbo_enabled


class LboFlags:
    @classmethod
    def overlap_down(cls):
        return is_lbo_enabled() and True

    @classmethod
    def fuse_inside_lbo(cls):
        return cls.overlap_down()
"""

ALPHA_MODEL = """
from sglang.srt.overlap.dbo_overlap import model_forward_maybe_dbo


class AlphaMoeForCausalLM:
    def forward(self, batch):
        if batch.can_run_dbo:
            return model_forward_maybe_dbo(self.layers, enable_dbo=True)
        return self.layers


EntryClass = AlphaMoeForCausalLM
"""

# Imports a helper of the feature module that is not named for the feature: not a user.
BETA_MODEL = """
from sglang.srt.overlap.dbo_overlap import split_helper


class BetaForCausalLM:
    def forward(self, x):
        return split_helper(x)


EntryClass = BetaForCausalLM
"""

# Defines a name of its own that shadows the imported accessor: two things, not followed.
GAMMA_MODEL = """
from sglang.srt.layers.moe import is_dbo_enabled


def is_dbo_enabled():
    return False


class GammaForCausalLM:
    def forward(self, x):
        if is_dbo_enabled():
            return x
        return x


EntryClass = GammaForCausalLM
"""

DELTA_MODEL = """
from sglang.srt.overlap.lbo_overlap import LboFlags


class DeltaForCausalLM:
    def __init__(self):
        self.fuse = LboFlags.fuse_inside_lbo()


class DeltaVLForConditionalGeneration(DeltaForCausalLM):
    pass


EntryClass = [DeltaForCausalLM, DeltaVLForConditionalGeneration]
"""

# Inherits AlphaMoe's forward, which calls model_forward_maybe_dbo: a user through its base.
EPSILON_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM


class EpsilonMoeForCausalLM(AlphaMoeForCausalLM):
    def load_weights(self, weights):
        return weights


EntryClass = EpsilonMoeForCausalLM
"""

# Inherits Epsilon, so AlphaMoe's forward too: one more inheritance step.
ETA_MODEL = """
from sglang.srt.models.epsilon import EpsilonMoeForCausalLM


class EtaMoeForCausalLM(EpsilonMoeForCausalLM):
    pass


EntryClass = EtaMoeForCausalLM
"""

# Inherits AlphaMoe but overrides the forward that holds the use: not a user.
ZETA_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM


class ZetaForCausalLM(AlphaMoeForCausalLM):
    def forward(self, batch):
        return self.layers


EntryClass = ZetaForCausalLM
"""

# Overrides the forward but calls the base's: a user.
THETA_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM


class ThetaForCausalLM(AlphaMoeForCausalLM):
    def forward(self, batch):
        return super().forward(batch)


EntryClass = ThetaForCausalLM
"""


# --- composition and inheritance through a module attribute ---------------------------------

# A draft model holding the base model and delegating to it: a user through `self.model`.
ALPHA_NEXTN_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM


class AlphaNextNForCausalLM:
    def __init__(self, config):
        self.config = config
        self.model = AlphaMoeForCausalLM(config)

    def forward(self, batch):
        return self.model.forward(batch)


EntryClass = AlphaNextNForCausalLM
"""

# Layers built by a lambda and unpacked with the layer range (held, one step into this file),
# a wrapper of that model in the same file (a step inside it: no second site here).
IOTA_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM
from sglang.srt.utils import make_layers


class IotaModel:
    def __init__(self, config):
        self.layers, self.start_layer, self.end_layer = make_layers(
            config.num_layers,
            lambda idx, prefix: AlphaMoeForCausalLM(config),
        )


class IotaForCausalLM:
    def __init__(self, config):
        self.model = IotaModel(config)


EntryClass = IotaForCausalLM
"""

# A multimodal wrapper holding iota's language model: one more file.
KAPPA_MODEL = """
from sglang.srt.models.iota import IotaForCausalLM


class KappaVLForConditionalGeneration:
    def __init__(self, config):
        self.vision = None
        self.language_model = IotaForCausalLM(config.text_config)


EntryClass = KappaVLForConditionalGeneration
"""

# The holder's name is imported from two places: two things, not followed. Building the
# model outside `__init__` is not holding it.
MU_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM
from sglang.srt.models.beta import BetaForCausalLM as AlphaMoeForCausalLM


class MuForCausalLM:
    def __init__(self, config):
        self.model = AlphaMoeForCausalLM(config)


EntryClass = MuForCausalLM
"""

# Derives from the draft model but builds its own `__init__` without `super()` (as
# glm4_moe_nextn does): `self.model` is no longer alpha's, not a user. A model built in a
# method other than `__init__` is not held.
NU_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM
from sglang.srt.models.alpha_nextn import AlphaNextNForCausalLM


class NuForCausalLM(AlphaNextNForCausalLM):
    def __init__(self, config):
        self.model = None


class NuLoader:
    def load(self, config):
        self.model = AlphaMoeForCausalLM(config)


EntryClass = NuForCausalLM
"""

# The base named through a module: `from ... import alpha_moe`, `import ... as am`.
XI_MODEL = """
from sglang.srt.models import alpha_moe


class XiForCausalLM(alpha_moe.AlphaMoeForCausalLM):
    pass


EntryClass = XiForCausalLM
"""

OMICRON_MODEL = """
import sglang.srt.models.alpha_moe as am


class OmicronForCausalLM(am.AlphaMoeForCausalLM):
    def load_weights(self, weights):
        return weights


EntryClass = OmicronForCausalLM
"""

# The module's name is also assigned here: two things, not followed.
PI_MODEL = """
from sglang.srt.models import alpha_moe

alpha_moe = None


class PiForCausalLM(alpha_moe.AlphaMoeForCausalLM):
    pass


EntryClass = PiForCausalLM
"""

# Holds kappa's model: a third step into another file, past MAX_CLASS_HOPS: not followed.
RHO_MODEL = """
from sglang.srt.models.kappa import KappaVLForConditionalGeneration


class RhoForConditionalGeneration:
    def __init__(self, config):
        self.inner = KappaVLForConditionalGeneration(config)


EntryClass = RhoForConditionalGeneration
"""

# A comment naming the held class after a `self.x = y` line of `__init__` is no call: not a
# holder, not a user.
PHI_MODEL = """
from sglang.srt.models.alpha_moe import AlphaMoeForCausalLM


class PhiForCausalLM:
    def __init__(self, config):
        self.config = config
        # weights load as in AlphaMoeForCausalLM load_weights()
        self.layers = []

    def forward(self, batch):
        return self.layers


EntryClass = PhiForCausalLM
"""

# Two flags reach one class in one step by two ways: dbo held in `__init__` (self.model =
# SigmaModel(...)), lbo inherited from a loader mixin's `load`; then a subclass in the file.
SIGMA_MODEL = """
from sglang.srt.overlap.dbo_overlap import model_forward_maybe_dbo
from sglang.srt.overlap.lbo_overlap import LboFlags


class SigmaLoaderMixin:
    def load(self, weights):
        if LboFlags.fuse_inside_lbo():
            return weights
        return None


class SigmaModel:
    def forward(self, batch):
        return model_forward_maybe_dbo(self.layers, enable_dbo=True)


class SigmaForCausalLM(SigmaLoaderMixin):
    def __init__(self, config):
        self.model = SigmaModel(config)


class SigmaV3ForCausalLM(SigmaForCausalLM):
    pass


EntryClass = [SigmaForCausalLM, SigmaV3ForCausalLM]
"""

# A draft model two steps down from the holder, building its own `__init__` without
# `super()`: dbo's model is not its own (a user of lbo still: `load` is inherited).
TAU_MODEL = """
from sglang.srt.models.sigma import SigmaV3ForCausalLM


class TauNextNForCausalLM(SigmaV3ForCausalLM):
    def __init__(self, config):
        object.__init__(self)
        self.model = None

    def forward(self, batch):
        return self.model(batch)


EntryClass = TauNextNForCausalLM
"""

# The same, calling `super().__init__()`: a user of both.
UPSILON_MODEL = """
from sglang.srt.models.sigma import SigmaV3ForCausalLM


class UpsilonForCausalLM(SigmaV3ForCausalLM):
    def __init__(self, config):
        super().__init__(config)
        self.extra = None


EntryClass = UpsilonForCausalLM
"""

# The same through the two-argument `super(Cls, self)` older model files use.
OMEGA_MODEL = """
from sglang.srt.models.sigma import SigmaV3ForCausalLM


class OmegaForCausalLM(SigmaV3ForCausalLM):
    def __init__(self, config):
        super(OmegaForCausalLM, self).__init__(config)


EntryClass = OmegaForCausalLM
"""

# A class using dbo in a method of its own and inheriting its base's use: a subclass
# overriding the first method without `super()` still inherits the base's.
CHI_MODEL = """
from sglang.srt.overlap.dbo_overlap import model_forward_maybe_dbo


class ChiBase:
    def forward(self, batch):
        return model_forward_maybe_dbo(self.layers, enable_dbo=True)


class ChiForCausalLM(ChiBase):
    def capture(self, batch):
        return model_forward_maybe_dbo(batch, enable_dbo=False)


EntryClass = ChiForCausalLM
"""

PSI_MODEL = """
from sglang.srt.models.chi import ChiForCausalLM


class PsiForCausalLM(ChiForCausalLM):
    def capture(self, batch):
        return batch


EntryClass = PsiForCausalLM
"""

# lbo used only in weight loading: a holder that loads the weights itself never runs it
# (lam_vl), one that calls the held model's loader does (lam_delegate).
LAM_MODEL = """
from sglang.srt.overlap.lbo_overlap import LboFlags


class LamForCausalLM:
    def load_weights(self, weights):
        if LboFlags.fuse_inside_lbo():
            return weights
        return None


EntryClass = LamForCausalLM
"""

LAM_VL_MODEL = """
from sglang.srt.models.lam import LamForCausalLM


class LamVLForConditionalGeneration:
    def __init__(self, config):
        self.language_model = LamForCausalLM(config)

    def load_weights(self, weights):
        return list(weights)


EntryClass = LamVLForConditionalGeneration
"""

LAM_DELEGATE_MODEL = """
from sglang.srt.models.lam import LamForCausalLM


class LamDelegateForConditionalGeneration:
    def __init__(self, config):
        self.language_model = LamForCausalLM(config)

    def load_weights(self, weights):
        return self.language_model.load_weights(weights)


EntryClass = LamDelegateForConditionalGeneration
"""

# lbo two ways into KaiForCausalLM, as in DeepSeek's: a helper its loader mixin calls only
# from `do_load_weights` (the shorter chain), and the MoE its `__init__` builds. kai_vl loads
# the weights itself (it calls a post-load hook only): cited through `__init__`, the way that
# runs there; kai_delegate calls the held model's loader: the loader's chain holds.
KAI_MODEL = """
from sglang.srt.layers.moe import is_lbo_enabled
from sglang.srt.overlap.lbo_overlap import LboFlags


class KaiLoaderMixin:
    def do_load_weights(self, weights):
        return self._maybe_cast_weights(weights)

    def post_load_weights(self):
        return None

    def _maybe_cast_weights(self, weights):
        if is_lbo_enabled():
            return [w for w in weights]
        return weights


class KaiMoE:
    def __init__(self, config):
        self.fused = LboFlags.fuse_inside_lbo()


class KaiDecoderLayer:
    def __init__(self, config):
        self.mlp = KaiMoE(config)


class KaiModel:
    def __init__(self, config):
        self.layer = KaiDecoderLayer(config)


class KaiForCausalLM(KaiLoaderMixin):
    def __init__(self, config):
        self.model = KaiModel(config)

    def load_weights(self, weights):
        return self.do_load_weights(weights)


EntryClass = KaiForCausalLM
"""

KAI_VL_MODEL = """
from sglang.srt.models.kai import KaiForCausalLM


class KaiVLForConditionalGeneration:
    def __init__(self, config):
        self.language_model = KaiForCausalLM(config)

    def load_weights(self, weights):
        loaded = [w for w in weights]
        self.language_model.post_load_weights()
        return loaded


EntryClass = KaiVLForConditionalGeneration
"""

KAI_DELEGATE_MODEL = """
from sglang.srt.models.kai import KaiForCausalLM


class KaiDelegateForConditionalGeneration:
    def __init__(self, config):
        self.language_model = KaiForCausalLM(config)

    def load_weights(self, weights):
        return self.language_model.load_weights(weights)


EntryClass = KaiDelegateForConditionalGeneration
"""

# A model built by a factory method its base's `__init__` calls (`self.model =
# self._init_model(...)`), as llama's ForCausalLM: the base holds OmniModel (lbo) through
# its own `_init_model`; omni3 inherits that; omni4 overrides the factory (Omni4Model, dbo):
# not lbo, dbo, and held by omni4_vl; omni5's factory builds one of two classes: neither;
# omni_mtp replaces `__init__` without `super()`, so the factory never runs: not lbo.
OMNI_MODEL = """
from sglang.srt.overlap.lbo_overlap import LboFlags


class OmniModel:
    def forward(self, batch):
        if LboFlags.fuse_inside_lbo():
            return batch
        return None


class OmniForCausalLM:
    def __init__(self, config, prefix=""):
        self.config = config
        self.model = self._init_model(config, prefix=prefix + "model")

    def _init_model(self, config, prefix=""):
        return OmniModel(config, prefix=prefix)

    @property
    def dtype(self):
        return None


EntryClass = OmniForCausalLM
"""

OMNI3_MODEL = """
from sglang.srt.models.omni import OmniForCausalLM


class Omni3ForCausalLM(OmniForCausalLM):
    pass


EntryClass = Omni3ForCausalLM
"""

OMNI4_MODEL = """
from sglang.srt.models.omni import OmniForCausalLM
from sglang.srt.overlap.dbo_overlap import model_forward_maybe_dbo


class Omni4Model:
    def forward(self, batch):
        return model_forward_maybe_dbo(self.layers, enable_dbo=True)


class Omni4ForCausalLM(OmniForCausalLM):
    def __init__(self, config, prefix=""):
        super().__init__(config, prefix)

    def _init_model(self, config, prefix=""):
        return Omni4Model(config, prefix=prefix)


EntryClass = Omni4ForCausalLM
"""

OMNI_MTP_MODEL = """
from sglang.srt.models.omni import OmniForCausalLM


class OmniMTPForCausalLM(OmniForCausalLM):
    def __init__(self, config, prefix=""):
        object.__init__(self)
        self.model = None


EntryClass = OmniMTPForCausalLM
"""

OMNI4_VL_MODEL = """
from sglang.srt.models.omni4 import Omni4ForCausalLM


class Omni4VLForConditionalGeneration:
    def __init__(self, config):
        self.vision = None
        self.language_model = Omni4ForCausalLM(config.text_config)


EntryClass = Omni4VLForConditionalGeneration
"""

OMNI5_MODEL = """
from sglang.srt.models.omni import OmniForCausalLM, OmniModel
from sglang.srt.models.omni4 import Omni4Model


class Omni5ForCausalLM(OmniForCausalLM):
    def _init_model(self, config, prefix=""):
        if config.moe:
            return Omni4Model(config, prefix=prefix)
        return OmniModel(config, prefix=prefix)


EntryClass = Omni5ForCausalLM
"""

HOLDING_MODELS = {
    "alpha_nextn": ALPHA_NEXTN_MODEL,
    "iota": IOTA_MODEL,
    "kappa": KAPPA_MODEL,
    "mu": MU_MODEL,
    "nu": NU_MODEL,
    "xi": XI_MODEL,
    "omicron": OMICRON_MODEL,
    "pi": PI_MODEL,
    "rho": RHO_MODEL,
    "phi": PHI_MODEL,
    "sigma": SIGMA_MODEL,
    "tau": TAU_MODEL,
    "upsilon": UPSILON_MODEL,
    "omega": OMEGA_MODEL,
    "lam": LAM_MODEL,
    "lam_vl": LAM_VL_MODEL,
    "lam_delegate": LAM_DELEGATE_MODEL,
    "kai": KAI_MODEL,
    "kai_vl": KAI_VL_MODEL,
    "kai_delegate": KAI_DELEGATE_MODEL,
    "chi": CHI_MODEL,
    "psi": PSI_MODEL,
    "omni": OMNI_MODEL,
    "omni3": OMNI3_MODEL,
    "omni4": OMNI4_MODEL,
    "omni4_vl": OMNI4_VL_MODEL,
    "omni5": OMNI5_MODEL,
    "omni_mtp": OMNI_MTP_MODEL,
}


# Accessors of two carriers each: in the carriers' own file (a global and a flag's global
# in one return) and in another module (two imported accessors in one return). Each carries
# both flags, each with its own chain.
# A property carrying dbo, read as an attribute (`self.overlap_on`): its chain shows no `()`.
QUANT_METHOD = """
from sglang.srt.layers.moe import is_dbo_enabled


class Fp4MoEMethod:
    @property
    def overlap_on(self) -> bool:
        return is_dbo_enabled()

    def apply(self, x):
        if self.overlap_on:
            return x
        return None
"""

GATHER_IN_FILE = """
from typing import Optional

GATHER_QUANT: Optional[str] = None
GATHER_TP: Optional[int] = None


def init_gather(server_args):
    global GATHER_QUANT, GATHER_TP
    GATHER_QUANT = server_args.quantization
    GATHER_TP = server_args.tp_size


def quant_gather_enabled() -> bool:
    return GATHER_QUANT == "modelopt_fp4" and GATHER_TP > 1
"""

GATHER_ACROSS = """
from sglang.srt.layers.moe.utils import is_dbo_enabled, is_lbo_enabled


def should_gather_early():
    return not is_dbo_enabled() and is_lbo_enabled()
"""

GATHER_USER = """
from sglang.srt.layers.gather import should_gather_early
from sglang.srt.layers.gather_quant import quant_gather_enabled


def gather(x):
    if should_gather_early():
        return x
    if quant_gather_enabled():
        return None
    return x
"""

# Uses a class named for the feature outside the model files: the class carries the flag.
DBO_RUNNER = """
from sglang.srt.overlap.dbo_overlap import DboGraphPlugin


def make_plugins():
    return [DboGraphPlugin()]
"""


def build_reach_repo(root: Path) -> Path:
    repo = root / "reach"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo, SERVER_ARGS, ARGS)
    write(repo, SRT + "layers/moe/utils.py", MOE_UTILS)
    write(repo, SRT + "layers/moe/__init__.py", MOE_INIT)
    write(repo, SRT + "overlap/dbo_overlap.py", DBO)
    write(repo, SRT + "overlap/lbo_overlap.py", LBO)
    write(repo, SRT + "overlap/dbo_runner.py", DBO_RUNNER)
    write(repo, SRT + "layers/gather_quant.py", GATHER_IN_FILE)
    write(repo, SRT + "layers/gather.py", GATHER_ACROSS)
    write(repo, SRT + "layers/gather_user.py", GATHER_USER)
    write(repo, SRT + "layers/quantization/fp4.py", QUANT_METHOD)
    write(repo, SRT + "models/alpha_moe.py", ALPHA_MODEL)
    write(repo, SRT + "models/beta.py", BETA_MODEL)
    write(repo, SRT + "models/gamma.py", GAMMA_MODEL)
    write(repo, SRT + "models/delta.py", DELTA_MODEL)
    write(repo, SRT + "models/epsilon.py", EPSILON_MODEL)
    write(repo, SRT + "models/eta.py", ETA_MODEL)
    write(repo, SRT + "models/zeta.py", ZETA_MODEL)
    write(repo, SRT + "models/theta.py", THETA_MODEL)
    for name, text in HOLDING_MODELS.items():
        write(repo, SRT + f"models/{name}.py", text)
    add_choice_shapes(repo)
    commit(repo, "reach", "2025-09-01T12:00:00Z", "v0.4.0")
    return repo


# --- choice handling shapes -------------------------------------------------------------------

ATTN_REGISTRY = """
ATTENTION_BACKENDS = {}


def register_attention_backend(name):
    def wrap(fn):
        ATTENTION_BACKENDS[name] = fn
        return fn

    return wrap


@register_attention_backend("fa3")
def create_fa3_backend(runner):
    return runner


class AttnRegistry:
    table = {}

    @classmethod
    def register(cls, name, fn):
        cls.table[name] = fn


AttnRegistry.register("wave", create_fa3_backend)

DECODE_ATTENTION_KERNELS = {
    # name -> kernel
    "triton": "TritonKernel",
    "flashinfer": "FlashinferKernel",
}
"""

KINDS = """
from enum import Enum


class MoeRunnerBackend(Enum):
    AUTO = "auto"
    TRITON = "triton"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    FLASHINFER_TRTLLM = "flashinfer_trtllm"


class AttentionKernelKind(Enum):
    FA3 = "fa3"
    TRITON = "triton"
    FLASHINFER = "flashinfer"

    def is_triton(self):
        return self == AttentionKernelKind.TRITON


SUPPORTED_RUNNERS = ["triton", "flashinfer_cutlass"]
"""

RUNNER = """
from sglang.srt.layers.kinds import SUPPORTED_RUNNERS, MoeRunnerBackend


def pick(backend: MoeRunnerBackend):
    if backend.is_triton():
        return 1
    return 0


def check(runner_backend):
    if runner_backend not in SUPPORTED_RUNNERS:
        raise ValueError(runner_backend)


def unrelated(block):
    if block.type == "lof":
        return True
"""

POLICY = """
from enum import Enum


class CacheAwarePolicy(Enum):
    LPM = "lpm"
    DFS_WEIGHT = "dfs-weight"


class CacheAgnosticPolicy(Enum):
    FCFS = "fcfs"
    LOF = "lof"


def order(policy, queue):
    if policy == CacheAwarePolicy.LPM:
        return sorted(queue)
    elif policy == CacheAwarePolicy.DFS_WEIGHT:
        return list(reversed(queue))
    return queue
"""


# Registering functions whose arguments are choices of different flags: the key tuple's
# annotated types say which (`first`, `second` say nothing), or the parameter's name
# (`runner_backend_name`), or its conversion to an enum that backs no flag (`QueueOrder`).
STEP_POOL = """
from enum import Enum
from typing import Callable, Dict, Tuple

from sglang.srt.layers.kinds import MoeRunnerBackend


class MoeA2ABackend(Enum):
    NONE = "none"
    DEEPEP = "deepep"
    FLASHINFER = "flashinfer"


class QueueOrder(Enum):
    FCFS = "fcfs"
    STACK = "stack"


class StepPool:
    _steps: Dict[Tuple[MoeA2ABackend, MoeRunnerBackend], Callable] = {}

    @classmethod
    def add(cls, first, second, fn):
        key = (first, second)
        cls._steps[key] = fn

    @classmethod
    def add_policy(cls, policy_name, fn):
        cls._policies[QueueOrder(policy_name)] = fn


def register_fused_step(first, second):
    def wrap(fn):
        StepPool.add(first, second, fn)
        return fn

    return wrap


def register_policy_step(
    policy_name: str,  # (a QueueOrder)
    runner_backend_name: str,
    *,
    strict: bool = False,
):
    return lambda fn: fn
"""

STEPS = """
from sglang.srt.layers.moe.step_pool import register_fused_step, register_policy_step
from sglang.srt.layers.moe.elsewhere import register_other_step


@register_fused_step("none", "triton")
def none_triton(x):
    return x


@register_fused_step("flashinfer", "flashinfer_cutlass")
def flashinfer_cutlass(x):
    return x


@register_policy_step("fcfs", "triton")
def fcfs_triton(x):
    return x


@register_other_step("deepep", "flashinfer_trtllm")
def deepep_trtllm(x):
    return x
"""


# Dicts keyed by choice values, named for something else or not (lines matter: tests);
# the names share a word with the flag (`policy`), as a model's `packed_modules_mapping`
# does with --lora-target-modules.
TABLES = """
class OrderModel:
    policy_modules_mapping = {
        "fcfs": ["first", "come"],
        "lof": ["longest", "output"],
    }


def load_order(cfg):
    policy_params_mapping = {
        "a_proj": "a",
        "b_proj": "b",
        # the next two are qualified
        # because the bare names
        # collide elsewhere
        "fcfs": "order.fcfs",
        "lof": "order.lof",
    }
    return policy_params_mapping.get(cfg.base_name, cfg.base_name)


def extend(policy_mapping):
    policy_mapping.update(
        {
            "visual": {
                "fcfs": ["q"],
                "lof": ["k"],
            },
        }
    )


QKV_BACKEND_IMPL = {
    "aiter": "AiterVision",
    "wave": "WaveVision",
}


def vision(qkv_backend):
    return QKV_BACKEND_IMPL[qkv_backend]


def router(cfg):
    dtype_map = {
        "aiter": 1,
        "wave": 2,
    }
    return dtype_map.get(cfg.router_cfg, None)


def sizes(self):
    backend_sizes = {
        "triton": 1,
        "flashinfer": 2,
    }
    return backend_sizes.get(
        self.server_args.decode_attention_backend, None
    )


def orders(self):
    old_to_order = {
        "first": "fcfs",
        "longest": "lof",
    }
    order_to_old = {
        "fcfs": "first",
        "lof": "longest",
    }
    return order_to_old[self.schedule_policy], old_to_order
"""


def add_choice_shapes(repo: Path) -> None:
    write(repo, SRT + "layers/tables.py", TABLES)
    write(repo, SRT + "layers/moe/step_pool.py", STEP_POOL)
    write(repo, SRT + "layers/moe/steps.py", STEPS)
    write(repo, SRT + "layers/attention/registry.py", ATTN_REGISTRY)
    write(repo, SRT + "layers/kinds.py", KINDS)
    write(repo, SRT + "layers/moe/runner.py", RUNNER)
    write(repo, SRT + "managers/schedule_policy.py", POLICY)
