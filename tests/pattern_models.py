"""The decomposed activations and LayerNorm as exporters write them (torch.onnx before the
fused ops existed, HuggingFace's hand-written forms), for tests/unit/passes/test_patterns.py and
tests/ops/test_ops_patterns.py. Each builder takes the input and output tensor names and
returns (nodes, initializers); constants are 0-d float32 like torch's.

Not a conftest.py: imported by name (`from pattern_models import ...`)."""
import math

import numpy as np
from onnx import helper

node = helper.make_node
F = np.float32


def _k(prefix, **values):
    return {f"{prefix}_{k}": F(v) for k, v in values.items()}


def silu(x, y, p="silu", swapped=False):
    mul = [f"{p}_s", x] if swapped else [x, f"{p}_s"]
    return [node("Sigmoid", [x], [f"{p}_s"], name=f"{p}/Sigmoid"),
            node("Mul", mul, [y], name=f"{p}/Mul")], {}


def quick_gelu(x, y, p="qg"):
    """CLIP's QuickGELU: x * sigmoid(1.702 x)."""
    return [node("Mul", [x, f"{p}_k"], [f"{p}_kx"], name=f"{p}/Mul"),
            node("Sigmoid", [f"{p}_kx"], [f"{p}_s"], name=f"{p}/Sigmoid"),
            node("Mul", [x, f"{p}_s"], [y], name=f"{p}/Mul_1")], _k(p, k=1.702)


def gelu_torch(x, y, p="gelu"):
    """torch nn.GELU(): Mul(Mul(x, 1 + Erf(x / 1.4142135)), 0.5)."""
    return [node("Div", [x, f"{p}_sqrt2"], [f"{p}_d"], name=f"{p}/Div"),
            node("Erf", [f"{p}_d"], [f"{p}_e"], name=f"{p}/Erf"),
            node("Add", [f"{p}_e", f"{p}_one"], [f"{p}_a"], name=f"{p}/Add"),
            node("Mul", [x, f"{p}_a"], [f"{p}_m"], name=f"{p}/Mul"),
            node("Mul", [f"{p}_m", f"{p}_half"], [y], name=f"{p}/Mul_1")], \
        _k(p, sqrt2=1.4142135623730951, one=1.0, half=0.5)


def gelu_hf(x, y, p="gelu"):
    """HuggingFace x * 0.5 * (1.0 + erf(x * 0.70710678)): the 0.5 first, Mul by 1/sqrt(2)."""
    return [node("Mul", [x, f"{p}_half"], [f"{p}_h"], name=f"{p}/Mul"),
            node("Mul", [x, f"{p}_rsqrt2"], [f"{p}_d"], name=f"{p}/Mul_1"),
            node("Erf", [f"{p}_d"], [f"{p}_e"], name=f"{p}/Erf"),
            node("Add", [f"{p}_one", f"{p}_e"], [f"{p}_a"], name=f"{p}/Add"),
            node("Mul", [f"{p}_h", f"{p}_a"], [y], name=f"{p}/Mul_2")], \
        _k(p, rsqrt2=0.7071067811865476, one=1.0, half=0.5)


def gelu_onnx_function(x, y, p="gelu"):
    """ONNX's own Gelu function body: Sum(1, Erf(x / sqrt 2)), (0.5 * x) * that."""
    return [node("Div", [x, f"{p}_sqrt2"], [f"{p}_d"], name=f"{p}/Div"),
            node("Erf", [f"{p}_d"], [f"{p}_e"], name=f"{p}/Erf"),
            node("Sum", [f"{p}_one", f"{p}_e"], [f"{p}_a"], name=f"{p}/Sum"),
            node("Mul", [f"{p}_half", x], [f"{p}_h"], name=f"{p}/Mul"),
            node("Mul", [f"{p}_h", f"{p}_a"], [y], name=f"{p}/Mul_1")], \
        _k(p, sqrt2=1.4142135623730951, one=1.0, half=0.5)


def gelu_tanh_torch(x, y, p="gelu"):
    """torch nn.GELU(approximate='tanh'): cube as x * (x * x), constants on the left."""
    return [node("Mul", [x, x], [f"{p}_xx"], name=f"{p}/Mul"),
            node("Mul", [x, f"{p}_xx"], [f"{p}_x3"], name=f"{p}/Mul_1"),
            node("Mul", [f"{p}_kappa", f"{p}_x3"], [f"{p}_kx3"], name=f"{p}/Mul_2"),
            node("Add", [x, f"{p}_kx3"], [f"{p}_in"], name=f"{p}/Add"),
            node("Mul", [f"{p}_beta", f"{p}_in"], [f"{p}_u"], name=f"{p}/Mul_3"),
            node("Tanh", [f"{p}_u"], [f"{p}_t"], name=f"{p}/Tanh"),
            node("Add", [f"{p}_one", f"{p}_t"], [f"{p}_a"], name=f"{p}/Add_1"),
            node("Mul", [x, f"{p}_a"], [f"{p}_m"], name=f"{p}/Mul_4"),
            node("Mul", [f"{p}_half", f"{p}_m"], [y], name=f"{p}/Mul_5")], \
        _k(p, kappa=0.044715, beta=math.sqrt(2 / math.pi), one=1.0, half=0.5)


def gelu_tanh_hf(x, y, p="gelu"):
    """HuggingFace gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))."""
    return [node("Mul", [f"{p}_half", x], [f"{p}_h"], name=f"{p}/Mul"),
            node("Pow", [x, f"{p}_three"], [f"{p}_x3"], name=f"{p}/Pow"),
            node("Mul", [f"{p}_kappa", f"{p}_x3"], [f"{p}_kx3"], name=f"{p}/Mul_1"),
            node("Add", [x, f"{p}_kx3"], [f"{p}_in"], name=f"{p}/Add"),
            node("Mul", [f"{p}_beta", f"{p}_in"], [f"{p}_u"], name=f"{p}/Mul_2"),
            node("Tanh", [f"{p}_u"], [f"{p}_t"], name=f"{p}/Tanh"),
            node("Add", [f"{p}_one", f"{p}_t"], [f"{p}_a"], name=f"{p}/Add_1"),
            node("Mul", [f"{p}_h", f"{p}_a"], [y], name=f"{p}/Mul_3")], \
        _k(p, three=3.0, kappa=0.044715, beta=math.sqrt(2 / math.pi), one=1.0, half=0.5)


def hard_swish_hsig(x, y, p="hsw"):
    return [node("HardSigmoid", [x], [f"{p}_h"], alpha=1 / 6, beta=0.5, name=f"{p}/HardSigmoid"),
            node("Mul", [x, f"{p}_h"], [y], name=f"{p}/Mul")], {}


def hard_swish_clip(x, y, p="hsw", sixth=False, inner=False):
    """x * relu6(x + 3) / 6 (Clip with constant bounds); `sixth`: Mul by 1/6 instead of Div;
    `inner`: x * (relu6(x + 3) / 6)."""
    def by6(src, dst):
        if sixth:
            return node("Mul", [src, f"{p}_sixth"], [dst], name=f"{p}/Mul_1")
        return node("Div", [src, f"{p}_six"], [dst], name=f"{p}/Div")
    nodes = [node("Add", [x, f"{p}_three"], [f"{p}_a"], name=f"{p}/Add"),
             node("Clip", [f"{p}_a", f"{p}_zero", f"{p}_six"], [f"{p}_c"], name=f"{p}/Clip")]
    if inner:
        nodes += [by6(f"{p}_c", f"{p}_q"), node("Mul", [x, f"{p}_q"], [y], name=f"{p}/Mul")]
    else:
        nodes += [node("Mul", [x, f"{p}_c"], [f"{p}_m"], name=f"{p}/Mul"), by6(f"{p}_m", y)]
    return nodes, _k(p, three=3.0, zero=0.0, six=6.0, sixth=1 / 6)


def hard_sigmoid_relu6(x, y, p="hsig"):
    """relu6(x + 3) * (1/6), as TensorFlow models write hard sigmoid."""
    return [node("Add", [x, f"{p}_three"], [f"{p}_a"], name=f"{p}/Add"),
            node("Clip", [f"{p}_a", f"{p}_zero", f"{p}_six"], [f"{p}_c"], name=f"{p}/Clip"),
            node("Mul", [f"{p}_c", f"{p}_sixth"], [y], name=f"{p}/Mul")], \
        _k(p, three=3.0, zero=0.0, six=6.0, sixth=1 / 6)


def layernorm(x, y, p="ln", width=None, square="Pow", affine=True, opset=13, eps=1e-5,
              seed=0):
    """torch LayerNorm exported before opset 17: ReduceMean over the last axis, Sub, Pow(2)
    (or Mul by itself), ReduceMean, Add(eps), Sqrt, Div, Mul(weight), Add(bias)."""
    rng = np.random.default_rng(seed)
    inits = _k(p, eps=eps, two=2.0)

    def mean(src, dst, name):
        if opset >= 18:
            inits[f"{p}_axes"] = np.array([-1], np.int64)
            return node("ReduceMean", [src, f"{p}_axes"], [dst], name=name)
        return node("ReduceMean", [src], [dst], axes=[-1], name=name)
    sq = (node("Pow", [f"{p}_d", f"{p}_two"], [f"{p}_p"], name=f"{p}/Pow") if square == "Pow"
          else node("Mul", [f"{p}_d", f"{p}_d"], [f"{p}_p"], name=f"{p}/Mul_sq"))
    last = y if not affine else f"{p}_n"
    nodes = [mean(x, f"{p}_m", f"{p}/ReduceMean"),
             node("Sub", [x, f"{p}_m"], [f"{p}_d"], name=f"{p}/Sub"), sq,
             mean(f"{p}_p", f"{p}_v", f"{p}/ReduceMean_1"),
             node("Add", [f"{p}_v", f"{p}_eps"], [f"{p}_ve"], name=f"{p}/Add"),
             node("Sqrt", [f"{p}_ve"], [f"{p}_s"], name=f"{p}/Sqrt"),
             node("Div", [f"{p}_d", f"{p}_s"], [last], name=f"{p}/Div")]
    if affine:
        inits[f"{p}_weight"] = (1 + 0.3 * rng.standard_normal(width)).astype(F)
        inits[f"{p}_bias"] = (0.3 * rng.standard_normal(width)).astype(F)
        nodes += [node("Mul", [f"{p}_n", f"{p}_weight"], [f"{p}_g"], name=f"{p}/Mul"),
                  node("Add", [f"{p}_g", f"{p}_bias"], [y], name=f"{p}/Add_1")]
    return nodes, inits


def rmsnorm(x, y, p="rms", width=None, inverse="Reciprocal", weight=True, eps=1e-6, seed=0):
    """LLaMA's RMSNorm as torch exports it: Pow(x, 2), ReduceMean(-1), Add(eps), Sqrt,
    Reciprocal (torch.rsqrt), Mul(x, .), Mul(weight, .); `inverse`: "Div" for x / Sqrt(..),
    "one_over" for x * (1 / Sqrt(..))."""
    inits = _k(p, eps=eps, two=2.0, one=1.0)
    nodes = [node("Pow", [x, f"{p}_two"], [f"{p}_p"], name=f"{p}/Pow"),
             node("ReduceMean", [f"{p}_p"], [f"{p}_v"], axes=[-1], name=f"{p}/ReduceMean"),
             node("Add", [f"{p}_v", f"{p}_eps"], [f"{p}_ve"], name=f"{p}/Add"),
             node("Sqrt", [f"{p}_ve"], [f"{p}_s"], name=f"{p}/Sqrt")]
    last = f"{p}_n" if weight else y
    if inverse == "Div":
        nodes.append(node("Div", [x, f"{p}_s"], [last], name=f"{p}/Div"))
    else:
        nodes += [node("Reciprocal", [f"{p}_s"], [f"{p}_r"], name=f"{p}/Reciprocal")
                  if inverse == "Reciprocal" else
                  node("Div", [f"{p}_one", f"{p}_s"], [f"{p}_r"], name=f"{p}/Div"),
                  node("Mul", [x, f"{p}_r"], [last], name=f"{p}/Mul")]
    if weight:
        inits[f"{p}_weight"] = (1 + 0.3 * np.random.default_rng(seed).standard_normal(width)
                                ).astype(F)
        nodes.append(node("Mul", [f"{p}_weight", f"{p}_n"], [y], name=f"{p}/Mul_1"))
    return nodes, inits


ACTIVATION_PATTERNS = {
    # id: (builder, the op it becomes, the ops it needs besides Mul/Add/Div)
    "silu": (silu, "rvvkit.Silu", ()),
    "silu_swapped": (lambda x, y: silu(x, y, swapped=True), "rvvkit.Silu", ()),
    "quick_gelu": (quick_gelu, "Swish", ()),
    "gelu_torch": (gelu_torch, "Gelu", ("Erf",)),
    "gelu_hf": (gelu_hf, "Gelu", ("Erf",)),
    "gelu_onnx_function": (gelu_onnx_function, "Gelu", ("Erf",)),
    "gelu_tanh_torch": (gelu_tanh_torch, "Gelu", ()),
    "gelu_tanh_hf": (gelu_tanh_hf, "Gelu", ("Pow",)),
    "hardsigmoid_relu6": (hard_sigmoid_relu6, "HardSigmoid", ()),
    "hardswish_hardsigmoid": (hard_swish_hsig, "HardSwish", ()),
    "hardswish_clip_div": (hard_swish_clip, "HardSwish", ()),
    "hardswish_clip_mul_sixth": (lambda x, y: hard_swish_clip(x, y, sixth=True),
                                 "HardSwish", ()),
    "hardswish_clip_inner_div": (lambda x, y: hard_swish_clip(x, y, inner=True),
                                 "HardSwish", ()),
}
