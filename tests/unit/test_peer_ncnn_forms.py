"""benchmarks/peer_ncnn_forms.py: pnnx's Gemm layers rewritten as ncnn InnerProduct layers, the
weight file re-laid out to match (what ncnn then computes is checked by the peer benchmark
itself, against onnxruntime, at every VLEN it counts)."""
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from peer_ncnn_build import PeerError  # noqa: E402
from peer_ncnn_forms import gemm_as_innerproduct  # noqa: E402

TAG0 = struct.pack("<I", 0)


def floats(n, start):
    return np.arange(start, start + n, dtype=np.float32).tobytes()


def write(tmp_path, layers, weights):
    param = tmp_path / "m.param"
    param.write_text("7767517\n%d %d\n" % (len(layers), 9) + "\n".join(layers) + "\n")
    binf = tmp_path / "m.bin"
    binf.write_bytes(b"".join(weights))
    return param, binf


LAYERS = [
    "Input in0 0 1 in0",
    "MemoryData mask 0 1 m0 0=4",
    "Gemm lin 1 1 in0 a 10=4 2=0 3=1 4=0 5=1 6=1 7=2 8=3 9=4",
    "LayerNorm ln 1 1 a b 0=3 1=1e-5 2=1",
    "Gemm nobias 1 1 b c 10=-1 2=0 3=1 4=0 5=1 6=0 7=2 8=4 9=3",
    "Gemm notrans 1 1 c d 10=4 2=0 3=0 4=0 5=1 6=1 7=2 8=4 9=4",
]


def test_gemm_layers_become_innerproduct_with_an_untagged_bias(tmp_path):
    w = [floats(4, 0),                                  # MemoryData, raw
         TAG0 + floats(12, 10), TAG0 + floats(3, 30),   # lin: B (3 x 4), C (3)
         floats(3, 40), floats(3, 50),                  # LayerNorm gamma, beta
         TAG0 + floats(12, 60),                         # nobias: B (4 x 3)
         TAG0 + floats(16, 80), TAG0 + floats(4, 99)]   # notrans: kept as it is
    param, binf = write(tmp_path, LAYERS, w)
    got = gemm_as_innerproduct(param, binf, tmp_path / "out")
    assert got["rewritten"] == 2
    lines = Path(got["param"]).read_text().splitlines()
    assert lines[4] == "InnerProduct lin 1 1 in0 a 0=3 1=1 2=12"
    assert lines[6] == "InnerProduct nobias 1 1 b c 0=4 1=0 2=12"
    assert lines[7].startswith("Gemm notrans")
    want = b"".join([w[0], w[1], w[2][4:], w[3], w[4], w[5], w[6], w[7]])
    assert Path(got["bin"]).read_bytes() == want


def test_refuses_what_it_cannot_size_or_a_short_file(tmp_path):
    param, binf = write(tmp_path, LAYERS[:1] + ["Convolution c 1 1 in0 a 0=8 6=72"], [b""])
    with pytest.raises(PeerError, match="Convolution"):
        gemm_as_innerproduct(param, binf, tmp_path / "a")
    param, binf = write(tmp_path, LAYERS[:3], [floats(4, 0), TAG0 + floats(5, 0)])
    with pytest.raises(PeerError, match="inside layer lin"):
        gemm_as_innerproduct(param, binf, tmp_path / "b")
    param, binf = write(tmp_path, LAYERS[:2], [floats(5, 0)])
    with pytest.raises(PeerError, match="left after"):
        gemm_as_innerproduct(param, binf, tmp_path / "c")
