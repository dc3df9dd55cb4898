"""The real architectures shipped with the `onnx` wheel (onnx/backend/test/data/light), with
their constant `ConstantOfShape` weights replaced by seeded random tensors of realistic scale.

The shipped weights are constants, so outputs are uniform and prove nothing; random He-style
weights (positive BatchNorm variances) exercise every kernel with meaningful values."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")


def light_dir() -> Path:
    import onnx
    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


def light_model_path(name: str) -> Path:
    path = light_dir() / f"light_{name}.onnx"
    if not path.exists():
        raise FileNotFoundError(f"{path} (known models: {', '.join(LIGHT_MODELS)})")
    return path


def _role(consumers: Dict[str, List[Tuple[object, int]]], name: str) -> Tuple[str, int]:
    """(op, input index) of the first real consumer, looking through Unsqueeze/Reshape."""
    seen = 0
    while name in consumers and seen < 4:
        node, idx = consumers[name][0]
        if node.op_type in ("Unsqueeze", "Reshape", "Identity"):
            name, seen = node.output[0], seen + 1
            continue
        return node.op_type, idx
    return "", -1


def _random_tensor(rng, shape, op: str, idx: int) -> np.ndarray:
    shape = tuple(int(d) for d in shape)
    if (op == "Conv" and idx == 1) or (op in ("Gemm", "MatMul") and idx == 1):
        fan_in = int(np.prod(shape[1:])) if op == "Conv" or op == "Gemm" else shape[0]
        return rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)
    if op == "BatchNormalization":
        if idx in (1, 4):  # scale, variance: positive, around 1
            return rng.uniform(0.5, 1.5, shape)
        return rng.normal(0.0, 0.1, shape)
    if op == "Mul":
        return rng.uniform(0.5, 1.5, shape)
    return rng.normal(0.0, 0.05, shape)  # biases, shifts


def randomize_weights(model, seed: int = 0):
    """A copy of `model` whose ConstantOfShape weights are seeded random initializers."""
    import onnx
    from onnx import numpy_helper
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    consumers: Dict[str, List[Tuple[object, int]]] = {}
    for n in g.node:
        for k, i in enumerate(n.input):
            consumers.setdefault(i, []).append((n, k))
    rng = np.random.default_rng(seed)
    keep = []
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in inits:
            keep.append(n)
            continue
        shape = numpy_helper.to_array(inits[n.input[0]])
        op, idx = _role(consumers, n.output[0])
        value = _random_tensor(rng, shape, op, idx).astype(np.float32)
        g.initializer.append(numpy_helper.from_array(value, n.output[0]))
    del g.node[:]
    g.node.extend(keep)
    weight_names = {i.name for i in g.initializer}
    used = {i for n in g.node for i in n.input}
    for name in [i.name for i in g.initializer if i.name.endswith("__SHAPE")
                 and i.name not in used]:
        g.initializer.remove(next(i for i in g.initializer if i.name == name))
    # Pre-IR-4 models list weights among the inputs; keep only inputs that are not weights.
    real_inputs = [vi for vi in g.input if vi.name not in weight_names]
    del g.input[:]
    g.input.extend(real_inputs)
    # IR 4 lets initializers stand outside the input list, as they now do.
    model.ir_version = max(model.ir_version, 4)
    return model


def light_model(name: str, seed: int = 0):
    import onnx
    return randomize_weights(onnx.load(str(light_model_path(name))), seed)


def sample_inputs(model, seed: int = 0) -> Dict[str, np.ndarray]:
    """Seeded standard-normal inputs for every graph input of `model` (static shapes)."""
    rng = np.random.default_rng(seed + 1)
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def expose_logits(model) -> Optional[str]:
    """Add the input of the last Softmax as a graph output (random-weight softmaxes saturate to
    one-hot vectors, which prove little when comparing numerics); returns its name, or None."""
    from onnx import TensorProto, helper
    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"]
    outputs = {o.name for o in model.graph.output}
    if not softmaxes or softmaxes[-1].input[0] in outputs:
        return None
    name = softmaxes[-1].input[0]
    model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return name


def main(argv=None) -> int:
    """`python -m rvvkit.zoo NAME OUT.onnx [--inputs IN.npz]`: export a randomised light model."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m rvvkit.zoo", description=main.__doc__)
    p.add_argument("name", choices=LIGHT_MODELS)
    p.add_argument("output", help="where to write the .onnx")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", help="also write matching random inputs to this .npz")
    p.add_argument("--logits", action="store_true",
                   help="also output the final Softmax's input (random weights saturate it)")
    args = p.parse_args(argv)
    import onnx
    model = light_model(args.name, args.seed)
    if args.logits:
        expose_logits(model)
    onnx.save(model, args.output)
    if args.inputs:
        np.savez(args.inputs, **sample_inputs(model, args.seed))
    print(f"wrote {args.output}" + (f" and {args.inputs}" if args.inputs else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
