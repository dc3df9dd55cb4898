"""The peer benchmarks' K1 variants: what decides a variant's flags and what confirms its fast
path (benchmarks/peer_*.py; nothing here builds a peer or runs QEMU)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import peer_llama as P  # noqa: E402
import peer_llama_build as LB  # noqa: E402
import peer_ncnn_build as B  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from peer_ncnn_build import PeerError  # noqa: E402

LOG = """llama_model_loader: - type q4_0:  169 tensors
repack: repack tensor blk.0.attn_q.weight with q4_0_16x1
repack: repack tensor blk.0.attn_k.weight with q4_0_16x1
load_tensors:   CPU_REPACK model buffer size =   261.00 MiB
load_tensors:          CPU model buffer size =    38.50 MiB
"""


def test_repack_log_is_read():
    info = P.repack_info(LOG)
    assert info == {"buffers": {"CPU_REPACK": 261.0, "CPU": 38.5},
                    "repacked": {"q4_0_16x1": 2}, "used": True}
    assert not P.repack_info(LOG.replace("CPU_REPACK", "CPU_Mapped"))["used"]


def test_k1_without_repack_fails_loudly_at_vlen_256_only():
    plain = P.repack_info("load_tensors:   CPU model buffer size = 300.0 MiB\n")
    with pytest.raises(PeerError, match="did not repack"):
        P.check_repack(plain, "k1", 256)
    P.check_repack(plain, "k1", 128)       # llama.cpp has no 16x1 kernels at VLEN 128
    P.check_repack(plain, "fp32", 256)
    with pytest.raises(PeerError, match="has Zvfh after all"):
        P.check_repack(P.repack_info(LOG), "fp32", 256)


def test_variants_and_their_flags():
    assert B.variants("both") == ("k1", "fp32")
    assert B.variants("k1") == ("k1",)
    with pytest.raises(PeerError, match="k1, fp32 or both"):
        B.variants("fp16")
    assert "-DNCNN_ZVFH=ON" in B.VARIANTS["k1"]["cmake"]
    assert "-DNCNN_ZVFH=OFF" in B.VARIANTS["fp32"]["cmake"]
    assert B.VARIANTS["k1"]["build"] != B.VARIANTS["fp32"]["build"]
    # llama.cpp's K1 variant passes no RISC-V option (its defaults); plain RVV turns them off
    assert not any("GGML_RV" in o for o in LB.VARIANTS["k1"]["opts"])
    assert "-DGGML_RV_ZVFH=OFF" in LB.VARIANTS["fp32"]["opts"]


def test_qemu_prefix_takes_the_profile():
    k1 = LB.qemu_prefix(256, "k1")[-1]
    assert "vlen=256" in k1 and "Zfh=true" in k1
    assert "Zfh" not in LB.qemu_prefix(256)[-1]
    with pytest.raises(PeerError, match="no ISA profile"):
        LB.qemu_prefix(256, "no-such-board")


def test_tinyllama_config_counts_its_matrices():
    cfg = P.CONFIGS["tinyllama-1.1b"]
    assert (cfg["vocab"], cfg["hidden"], cfg["layers"], cfg["kv_heads"]) == (32000, 2048, 22, 4)
    # 22 layers x (q, o: 2048^2; k, v: 2048x256; gate, up, down: 2048x5632) + the token table
    assert P.matrix_params(cfg) == 32000 * 2048 + 22 * (
        2 * 2048 ** 2 + 2 * 2048 * 256 + 3 * 2048 * 5632)
    # a prompt token (not the last) skips the tied LM head; a generated token runs it
    assert P.block_params(cfg, "per_generated_token") == P.matrix_params(cfg)
    assert P.block_params(cfg, "per_prompt_token") == P.matrix_params(cfg) - 32000 * 2048


def test_precision_passes_through_only_where_supported(monkeypatch):
    monkeypatch.setattr(R, "supports_precision", lambda: False)
    assert R.build_kwargs("fp32") == {}
    with pytest.raises(R.PrecisionUnsupported, match="only fp32"):
        R.build_kwargs("fp16")
    monkeypatch.setattr(R, "supports_precision", lambda: True)
    assert R.build_kwargs("auto") == {"precision": "auto"}
    with pytest.raises(R.PrecisionUnsupported, match="expected one of"):
        R.build_kwargs("int4")


def test_rescaled_copy_scales_batchnorm_only():
    import onnx
    from onnx import helper, numpy_helper
    import peer_ncnn as N
    scale = numpy_helper.from_array(np.array([2.0, 4.0], np.float32), "s")
    bias = numpy_helper.from_array(np.array([1.0, 1.0], np.float32), "b")
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "b", "b"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 2, 1, 1])],
                          [helper.make_tensor_value_info("y", 1, [1, 2, 1, 1])], [scale, bias])
    m = helper.make_model(g)
    out = N.rescaled_bn(m, 0.5)
    got = {i.name: numpy_helper.to_array(i) for i in out.graph.initializer}
    assert got["s"].tolist() == [1.0, 2.0] and got["b"].tolist() == [1.0, 1.0]
    assert numpy_helper.to_array(m.graph.initializer[0]).tolist() == [2.0, 4.0]   # a copy
    onnx.checker.check_model(out)
