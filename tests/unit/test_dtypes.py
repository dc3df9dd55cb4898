"""The element-type table (rvvkit/dtypes.py): what the plan ABI, the runner's .npy reader and the
kernels' C types are derived from."""
import numpy as np
import pytest

from rvvkit import dtypes


def test_table_matches_numpy_and_onnx():
    from onnx import helper
    for name, d in dtypes.TABLE.items():
        assert d.np == np.dtype(name)
        assert d.size == d.np.itemsize
        assert np.dtype(helper.tensor_dtype_to_np_dtype(d.onnx)) == d.np
        assert np.lib.format.dtype_to_descr(d.np) == d.npy


@pytest.mark.parametrize("name", dtypes.NAMES)
def test_words_round_up_and_as_words_keeps_the_bits(name):
    data = (np.arange(7) * 37 - 100).astype(name)
    w = dtypes.as_words(data)
    assert w.dtype == np.float32 and w.size == dtypes.words(7, name)
    assert np.array_equal(w.view(np.uint8)[:data.nbytes].view(name), data)


def test_unsupported_types_are_named():
    assert not dtypes.supported(np.int16) and not dtypes.supported(np.complex64)
    with pytest.raises(KeyError):
        dtypes.of(np.int16)
