"""Quantized versions of the test suite's models, made the way users make them: onnxruntime's
quantize_static (QDQ and QOperator formats, per-channel int8 weights, calibrated on a few seeded
random inputs) and quantize_dynamic. Test and benchmark material like rvvkit.zoo: it needs
onnxruntime (a measuring tool), which rvvkit itself never imports."""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Dict, Tuple

import numpy as np

# the stored exports of a checkout (rvvkit/zoo/ is two folders below its root)
MODELS = Path(__file__).resolve().parents[2] / "tests" / "models"
FORMATS = ("qdq", "qop", "dynamic")


def float_model(name: str):
    """(float ModelProto, feeds): a light model (onnx wheel) or one of tests/models."""
    import onnx
    from rvvkit.zoo import light as zoo
    if name in zoo.LIGHT_MODELS:
        from onnx import version_converter
        model = zoo.light_model(name, 0)
        feeds = zoo.sample_inputs(model, 0)
        if zoo.expose_logits(model):   # random weights saturate the softmax: compare logits
            del model.graph.output[0]
        # per-channel weights need DequantizeLinear's axis (opset 13)
        return version_converter.convert_version(model, 13), feeds
    model = onnx.load(str(MODELS / f"{name}_legacy.onnx"))
    data = np.load(MODELS / f"{name}_legacy.npz")
    feeds = {k[3:]: v for k, v in data.items() if k.startswith("in.")}
    return model, feeds


def _calibration(model, feeds, n: int = 4):
    """Seeded variations of `feeds`: normal noise for float inputs, the same tokens otherwise."""
    rng = np.random.default_rng(123)
    out = []
    for _ in range(n):
        out.append({k: (rng.standard_normal(v.shape).astype(v.dtype)
                        if v.dtype == np.float32 else v) for k, v in feeds.items()})
    return out


def _pre_processed(src: Path) -> Path:
    """The model after onnxruntime's quantization pre-processing (BatchNormalization folded
    into convolutions, shapes inferred), as its documentation asks users to do; the model as
    it was when pre-processing cannot take it."""
    from onnxruntime.quantization.shape_inference import quant_pre_process
    dst = src.with_name(src.stem + "_pre.onnx")
    try:
        quant_pre_process(str(src), str(dst))
    except Exception:   # noqa: BLE001 - pre-processing is advice, not a requirement
        return src
    return dst


@functools.lru_cache(maxsize=None)
def quantized(name: str, fmt: str, root: str, activation: str = "int8") -> Tuple[str, Dict]:
    """(path of the quantized model written under `root`, feeds). `fmt`: qdq, qop or
    dynamic; `activation`: the static formats' activation type, int8 or uint8."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    logging.getLogger().setLevel(logging.ERROR)   # the quantizer's advice on every call
    model, feeds = float_model(name)
    src = Path(root) / f"{name}_float.onnx"
    onnx.save(model, str(src))
    src = _pre_processed(src)
    dst = Path(root) / f"{name}_{fmt}_{activation}.onnx"
    if fmt == "dynamic":
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
        return str(dst), feeds

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(_calibration(model, feeds))

        def get_next(self):
            return next(self.it, None)

    act = QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8
    quantize_static(str(src), str(dst), Reader(),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                    activation_type=act, weight_type=QuantType.QInt8, per_channel=True)
    return str(dst), feeds
