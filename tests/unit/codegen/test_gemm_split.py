"""Which side of a GEMM the thread pool splits (gemm_core._split_side). Numerics of both
choices are the kernel tables' job (tests/kernel_cases: GEMM, MATMUL and CONV hold runtime-row
GEMMs split either way, run on every executor at 1-3 threads); this pins the choice itself."""
from __future__ import annotations

from rvvkit.codegen.kernels.gemm.core import _split_side
from rvvkit.codegen.kernels.gemm.spec import Side

PACKED, STRIDED = Side("packed"), Side("strided", si=1, sk=169)


def test_few_pixel_panels_against_many_weight_columns_split_by_columns():
    # squeezenet's last conv as a transposed GEMM: 169 pixels (13 panels of 13) x 1000
    # channels: by rows two threads would split 7/6 and each stream all 2 MB of weights
    assert _split_side(169, 1000, 512, STRIDED, PACKED, 13, 32, True) == "cols"
    # resnet50's 7x7 layers: 7 row panels could never feed 8 threads
    assert _split_side(49, 2048, 512, STRIDED, PACKED, 7, 32, True) == "cols"


def test_many_pixel_panels_against_few_columns_split_by_rows():
    assert _split_side(784, 256, 512, STRIDED, PACKED, 14, 32, True) == "rows"
    assert _split_side(196, 32, 1152, STRIDED, PACKED, 14, 32, True) == "rows"


def test_a_runtime_column_side_is_split_by_columns():
    assert _split_side(64, 3025, 16, PACKED, STRIDED, 8, 32, False) == "cols"
    assert _split_side(4096, 32, 64, PACKED, PACKED, 8, 32, False) == "rows"
