"""The shapes of the tensors a quantization method makes and reshapes (kb.explain.tensors):
known dimensions are computed, an undecided one stays unknown, never guessed."""

from __future__ import annotations

from kb.explain import tensors
from kb.explain.abstract_values import Symbol
from kb.explain.predicates import Unknown, unknown


def empty(*dims: object) -> tensors.Tensor:
    made = tensors.created("torch.empty", list(dims), {"dtype": Symbol("torch.uint8")})
    assert made is not None
    return made


def test_factories_take_the_dimensions_as_arguments_or_one_sequence() -> None:
    assert empty(4, 192, 1024).shape == (4, 192, 1024)
    assert empty((4, 192)).shape == (4, 192)
    assert tensors.created("torch.zeros", [], {"size": (2, 3)}).shape == (2, 3)  # type: ignore[union-attr]
    full = tensors.created("torch.full", [(8,), 1.0], {})
    assert full is not None and full.shape == (8,)
    assert tensors.created("torch.tensor", [[1, 2]], {}) is None  # not a factory held here


def test_a_parameter_is_its_data_with_its_shape_and_dtype() -> None:
    param = tensors.created("torch.nn.Parameter", [empty(3, 5)], {})
    assert param is not None and param.parameter and param.shape == (3, 5)
    assert param.dtype == Symbol("torch.uint8")


def test_size_reshape_and_permute() -> None:
    t = empty(2, 256, 12)
    assert tensors.method(t, "size", [1], {}) == 256
    assert tensors.method(t, "size", [-1], {}) == 12
    assert tensors.method(t, "size", [], {}) == (2, 256, 12)
    tiles = tensors.method(t, "reshape", [2, -1, 4, 32, 3, 4], {})
    assert tiles.shape == (2, 2, 4, 32, 3, 4)
    assert tensors.method(tiles, "permute", [(0, 1, 4, 3, 2, 5)], {}).shape == (2, 2, 3, 32, 4, 4)
    assert tensors.method(t, "unsqueeze", [0], {}).shape == (1, 2, 256, 12)
    assert tensors.method(t, "narrow", [1, 0, 128], {}).shape == (2, 128, 12)
    assert tensors.method(t, "transpose", [0, 2], {}).shape == (12, 256, 2)
    assert tensors.method(t, "numel", [], {}) == 2 * 256 * 12


def test_cat_and_pad_add_to_the_dimension() -> None:
    joined = tensors.created("torch.cat", [[empty(4, 96), empty(4, 96)], 1], {})
    assert joined is not None and joined.shape == (4, 192)
    padded = tensors.created("torch.nn.functional.pad", [empty(4, 192, 8), (0, 0, 0, 64)], {})
    assert padded is not None and padded.shape == (4, 256, 8)


def test_what_the_inputs_do_not_decide_stays_unknown() -> None:
    t = empty(unknown("the experts per rank"), 192)
    assert isinstance(tensors.method(t, "size", [0], {}), Unknown)
    assert tensors.method(t, "size", [1], {}) == 192
    # the -1 of a reshape needs every other size
    assert isinstance(tensors.method(t, "reshape", [-1, 2], {}).shape[0], Unknown)
    assert tensors.method(t, "size", [5], {}) != 192 and isinstance(
        tensors.method(t, "size", [5], {}), Unknown
    )
    # an indexed tensor or another function's result has no shape here
    assert isinstance(tensors.attribute(tensors.Tensor(None, False), "shape"), Unknown)
    assert isinstance(tensors.method(empty(2, 3), "repeat", [4], {}).shape, type(None))


def test_a_conversion_to_a_dtype_not_decided_is_unknown() -> None:
    # `.to(param_dtype)` with the parameter dtype undecided: not the tensor's own dtype
    scale = tensors.created("torch.empty", [1], {"dtype": Symbol("torch.float32")})
    assert scale is not None
    assert isinstance(tensors.method(scale, "to", [unknown("the params dtype")], {}).dtype, Unknown)
    half = Symbol("torch.float16")
    assert tensors.method(scale, "to", [half], {}).dtype == half
    assert tensors.method(scale, "to", ["cuda"], {}).dtype == Symbol("torch.float32")
    assert tensors.method(scale, "to", ["cuda", half], {}).dtype == half
    # `.view(torch.int16)` reinterprets the bytes: another dtype, and not the same shape
    viewed = tensors.method(scale, "view", [Symbol("torch.int16")], {})
    assert viewed.dtype == Symbol("torch.int16") and viewed.shape is None


def test_torch_s_default_dtype_is_the_model_s_while_the_loader_builds_it() -> None:
    bf16 = Symbol("torch.bfloat16")
    assert tensors.created("torch.get_default_dtype", [], {}, bf16) == bf16
    made = tensors.created("torch.empty", [4, 8], {}, bf16)
    assert made is not None and made.dtype == bf16
    # outside the loader's `set_default_torch_dtype`, not known
    assert isinstance(tensors.created("torch.get_default_dtype", [], {}), Unknown)
    assert isinstance(tensors.created("torch.empty", [4], {}).dtype, Unknown)


def test_assigning_a_tensor_s_data_gives_it_the_new_data_s_dtype_and_shape() -> None:
    from kb.explain.frames import Ctx

    weight = tensors.created("torch.empty", [4, 8], {"dtype": Symbol("torch.bfloat16")})
    assert weight is not None
    fp8 = tensors.created("torch.empty", [4, 8], {"dtype": Symbol("torch.float8_e4m3fn")})
    tensors.set_attribute(weight, "data", fp8, Ctx())
    assert weight.dtype == Symbol("torch.float8_e4m3fn") and weight.shape == (4, 8)
    # data a function not followed made (an online quantizer): not known
    tensors.set_attribute(weight, "data", unknown("what mxfp8_group_quantize returns"), Ctx())
    assert isinstance(weight.dtype, Unknown) and weight.shape is None
