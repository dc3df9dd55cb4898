"""A tiny image classifier written with onnx.helper, for the examples: small enough that every
path (host, QEMU at any VLEN, a board over SSH, the CUDA emulator) runs it in seconds, yet it
has the kernel families of a real CNN (3x3 convolution, depthwise convolution, 1x1
convolution, max pooling, global pooling, Gemm, Softmax) with seeded random weights.

    python3 examples/tiny_model.py model.onnx --inputs in.npz

writes the model and a matching input file (an .npz keyed by input name, as `rvvkit run
--inputs` reads). The Python examples import `tiny_cnn` and `sample_inputs` from here. For a
real architecture instead, with the same two outputs:

    python3 -m rvvkit.zoo squeezenet model.onnx --inputs in.npz
"""
from __future__ import annotations

import argparse
from typing import Dict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUT, SIZE = "image", 32          # one 3x32x32 image
CLASSES = 10


def tiny_cnn(channels: int = 8, seed: int = 0) -> onnx.ModelProto:
    """conv3x3+relu -> depthwise conv3x3/2+relu -> maxpool -> conv1x1+relu -> global average
    pool -> gemm -> softmax; outputs "probs" (1x10) and "logits". Opset 13, so that
    onnxruntime's quantizer can make per-channel int8 of it (int8_from_onnxruntime.py)."""
    rng = np.random.default_rng(seed)

    def weights(*shape, fan_in):   # He-style scale keeps activations in a sensible range
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    c, c2 = channels, 2 * channels
    inits = {
        "w1": weights(c, 3, 3, 3, fan_in=27), "b1": weights(c, fan_in=50),
        "wd": weights(c, 1, 3, 3, fan_in=9), "bd": weights(c, fan_in=50),
        "w2": weights(c2, c, 1, 1, fan_in=c), "b2": weights(c2, fan_in=50),
        "fc_w": weights(CLASSES, c2, fan_in=c2), "fc_b": weights(CLASSES, fan_in=50),
    }
    node = helper.make_node
    nodes = [
        node("Conv", [INPUT, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "wd", "bd"], ["c2"], group=c, strides=[2, 2], pads=[1, 1, 1, 1],
             name="depthwise"),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        node("Conv", ["p2", "w2", "b2"], ["c3"], name="pointwise"),
        node("Relu", ["c3"], ["r3"], name="relu3"),
        node("GlobalAveragePool", ["r3"], ["gap"], name="gap"),
        node("Flatten", ["gap"], ["flat"], name="flatten"),
        node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, name="fc"),
        node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, CLASSES]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="rvvkit-examples")
    model.ir_version = 8   # readable by every onnxruntime rvvkit supports
    onnx.checker.check_model(model)
    return model


def sample_inputs(seed: int = 0) -> Dict[str, np.ndarray]:
    """One seeded random image, keyed by the model's input name."""
    rng = np.random.default_rng(seed)
    return {INPUT: rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output", help="where to write the .onnx model")
    p.add_argument("--inputs", help="also write a matching input .npz here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    onnx.save(tiny_cnn(seed=args.seed), args.output)
    print(f"wrote {args.output}")
    if args.inputs:
        np.savez(args.inputs, **sample_inputs(args.seed))
        print(f"wrote {args.inputs}")


if __name__ == "__main__":
    main()
