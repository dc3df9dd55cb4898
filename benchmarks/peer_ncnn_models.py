"""The models of benchmarks/peer_ncnn.py: ONNX -> ncnn with pnnx (fp32), the opset-9 Softmax
axis fix, onnxruntime references, and ncnn's own int8 conversion (ncnn2table + ncnn2int8)."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from peer_ncnn_build import PNNX_VERSION, PeerError, log, need_pnnx, run


def digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def current_record(meta: Path, key: str):
    """The record a cached step wrote to `meta` (JSON with "key", "param" and "bin"), when it was
    made from `key` and the files it names are still there; else None (the step runs again)."""
    try:
        done = json.loads(meta.read_text())
        if done["key"] == key and Path(done["param"]).is_file() and Path(done["bin"]).is_file():
            return done
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def ort_outputs(model, feeds: dict) -> dict:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def agreement(got: np.ndarray, want: np.ndarray) -> dict:
    """Largest difference over the reference's range, and whether the top-1 classes agree."""
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    if g.size != w.size:
        raise PeerError(f"ncnn output has {g.size} values, onnxruntime's {w.size}")
    return {"max_diff_of_range": float(np.abs(g - w).max() / (np.ptp(w) or 1.0)),
            "same_top1": bool(int(g.argmax()) == int(w.argmax()))}


def check(label, got: list, refs: list, tolerance: float, strict: bool,
          top1: bool = True) -> dict:
    """got/refs: [logits] or [logits, final output]; refuse (strict) on a mismatch. `top1`:
    the output is a classifier's, whose top-1 class must agree too (not an encoder's)."""
    res = agreement(got[0], refs[0])
    res["final_same_top1"] = all(agreement(g, r)["same_top1"] for g, r in zip(got, refs))
    if not top1:
        res = {"max_diff_of_range": res["max_diff_of_range"]}
    log(f"{label}: ncnn vs onnxruntime: max diff / range {res['max_diff_of_range']:.2e}"
        + (f", same top-1 {res['same_top1']}" if top1 else ""))
    agrees = res["max_diff_of_range"] <= tolerance and (
        not top1 or (res["same_top1"] and res["final_same_top1"]))
    res["agrees"] = bool(agrees)
    if strict and not agrees:
        raise PeerError(f"{label}: the ncnn conversion does not match onnxruntime (max diff / "
                        f"range {res['max_diff_of_range']:.3g} > {tolerance:g} or top-1 differs); "
                        "not reporting its counts")
    return res


def fp32_model(name: str) -> tuple:
    """(model, feeds, refs, top1): a model both engines run; onnxruntime's outputs to check
    ncnn against, [logits, final output] for the onnx light models (their random weights
    saturate the softmax) or [final output]; whether top-1 agreement applies.

    Names: the onnx light models; tests/models' float models (rvvkit.zoo.quant.float_model,
    e.g. mobilenet_v2, the width-0.25 64x64 test model bench_threads.py counts);
    "mobilenet_v2_224", benchmarks/mobilenet.py's full-size MobileNetV2; "encoder",
    benchmarks/encoder.py's BERT-style encoder with its attention mask a constant (the runner
    feeds one input)."""
    from rvvkit import zoo
    if name in zoo.LIGHT_MODELS:
        model = zoo.light_model(name)
        feeds = zoo.sample_inputs(model)
        exposed = ort_outputs(with_logits(model), feeds)
        return model, feeds, [exposed[n] for n in (logits_name(model),
                                                   model.graph.output[0].name)], True
    if name == "encoder":
        model, feeds = encoder_model()
        return model, feeds, list(ort_outputs(model, feeds).values()), False
    if name == "mobilenet_v2_224":
        from mobilenet import mobilenet_v2
        model, feeds = mobilenet_v2()
        return model, feeds, list(ort_outputs(model, feeds).values()), True
    from rvvkit.zoo.quant import float_model
    try:
        model, feeds = float_model(name)
    except OSError:
        raise PeerError(f"unknown model {name!r}: an onnx light model, one of tests/models' "
                        "(e.g. mobilenet_v2), mobilenet_v2_224 or encoder") from None
    if len(feeds) != 1 or len(model.graph.output) != 1:
        raise PeerError(f"{name}: the ncnn runner takes one input and one output")
    return model, feeds, list(ort_outputs(model, feeds).values()), True


def encoder_model():
    """(model, feeds): the BERT-style encoder (2 layers, 512 wide, 8 heads, 128 tokens) with
    the (1, 128) attention mask made an initializer, so that x is the only input."""
    from onnx import numpy_helper
    from encoder import bert_encoder
    model, feeds = bert_encoder()
    mask = feeds.pop("mask")
    model.graph.initializer.append(numpy_helper.from_array(mask, "mask"))
    keep = [i for i in model.graph.input if i.name != "mask"]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    return model, feeds


def logits_name(model) -> str:
    return next(n.input[0] for n in model.graph.node if n.op_type == "Softmax")


def with_logits(model):
    import onnx
    from rvvkit import zoo
    m = onnx.ModelProto.FromString(model.SerializeToString())
    zoo.expose_logits(m)
    return m


def rvvkit_host_agreement(art, feeds, ref) -> dict:
    from rvvkit.runtime.host import HostSession
    with HostSession(art) as hs:
        (got,) = hs.run(feeds).values()
    return agreement(got, ref)


# -- param files --------------------------------------------------------------------------

def param_layers(text: str) -> list:
    """[(line index, type, name, inputs, outputs, params)] of an ncnn .param file."""
    out = []
    for i, line in enumerate(text.splitlines()[2:], start=2):
        t = line.split()
        if len(t) < 4:
            continue
        nin, nout = int(t[2]), int(t[3])
        out.append((i, t[0], t[1], t[4:4 + nin], t[4 + nin:4 + nin + nout],
                    t[4 + nin + nout:]))
    return out


def _softmax_dim(model) -> int:
    """The one ONNX dimension the model's single Softmax normalises over (batch 1), or -1."""
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model)
    softmax = [n for n in inferred.graph.node if n.op_type == "Softmax"]
    if len(softmax) != 1:
        return -1
    node = softmax[0]
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in list(inferred.graph.value_info) + list(inferred.graph.input)
              + list(inferred.graph.output)}
    shape = shapes.get(node.input[0])
    if not shape or shape[0] != 1:
        return -1
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1 if opset < 13 else -1)
    axis %= len(shape)
    if opset >= 13:
        return axis
    # Opsets < 13 flatten dims[axis:] into one; that is one ncnn axis only if one is not 1.
    big = [k for k in range(axis, len(shape)) if shape[k] != 1]
    return big[0] if len(big) == 1 else (axis if not big else -1)


def fix_softmax_axis(param: Path, model) -> str:
    """pnnx turns an opset-9 Softmax over [1, C, 1, 1] into ncnn axis 2 (w, size 1: all ones);
    set the axis the ONNX model means. Returns a note of what was changed, or ''."""
    dim = _softmax_dim(model)
    text = param.read_text()
    layers = [l for l in param_layers(text) if l[1] == "Softmax"]
    if dim < 1 or len(layers) != 1:
        return ""
    idx, _, name, _, _, params = layers[0]
    want = f"0={dim - 1}"      # ncnn drops the batch dimension
    have = next((p for p in params if p.startswith("0=")), "0=0")
    if have == want:
        return ""
    lines = text.splitlines()
    head = lines[idx].split()
    head = [t for t in head if not t.startswith("0=")] + [want]
    lines[idx] = " ".join(head)
    param.write_text("\n".join(lines) + "\n")
    return f"{name}: pnnx wrote Softmax {have}, the ONNX model means {want} (fixed)"


# -- conversion ---------------------------------------------------------------------------

def pnnx_convert(model, feeds: dict, out: Path, label: str) -> dict:
    """ONNX -> model.ncnn.param/.bin under `out` (cached by the model's hash)."""
    import onnx
    pnnx = need_pnnx()
    blob = model.SerializeToString()
    key = digest(blob, PNNX_VERSION)
    param, binf = out / "model.ncnn.param", out / "model.ncnn.bin"
    meta = out / "convert.json"
    done = current_record(meta, key)
    if done:
        return done
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    onnx.save(model, str(out / "model.onnx"))
    (shape,) = [list(v.shape) for v in feeds.values()]
    log(f"{label}: converting with pnnx")
    run([pnnx, "model.onnx", f"inputshape=[{','.join(map(str, shape))}]", "fp16=0"], cwd=out,
        what=f"pnnx {label}")
    if not param.is_file():
        raise PeerError(f"pnnx {label}: no model.ncnn.param written in {out}")
    note = fix_softmax_axis(param, model)
    layers = param_layers(param.read_text())
    done = {"key": key, "param": str(param), "bin": str(binf), "note": note,
            "input": next(l[4][0] for l in layers if l[1] == "Input"),
            "output": "out0",
            "softmax_input": next((l[3][0] for l in layers if l[1] == "Softmax"), None)}
    meta.write_text(json.dumps(done))
    return done


def write_input(feeds: dict, path: Path) -> tuple:
    """The single batch-1 input, (1, C, H, W) or (1, tokens, width), as raw float32; returns
    its shape without the batch (the runner's SHAPE)."""
    (x,) = feeds.values()
    if x.ndim not in (2, 3, 4) or x.shape[0] != 1:
        raise PeerError(f"the runner takes one (1, C, H, W) or (1, T, D) input, not {x.shape}")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.ascontiguousarray(x[0], dtype=np.float32).tofile(path)
    return tuple(int(d) for d in x.shape[1:])


def quantize_int8(tools: dict, conv: dict, calib: list, out: Path, label: str) -> dict:
    """ncnn2table (KL, on the same seeded calibration inputs as rvvkit's onnxruntime
    quantization) then ncnn2int8: the int8 model's param/bin (cached)."""
    key = digest(conv["key"], *(tools[t].read_bytes() for t in ("ncnn2table", "ncnn2int8")),
                 *(next(iter(c.values())).tobytes() for c in calib))
    meta = out / "int8.json"
    done = current_record(meta, key)
    if done:
        return done
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, feeds in enumerate(calib):
        (x,) = feeds.values()
        p = out / f"calib{i}.npy"
        np.save(p, np.ascontiguousarray(x[0], dtype=np.float32))   # (C, H, W)
        paths.append(str(p))
    (out / "calib.txt").write_text("\n".join(paths) + "\n")
    c, h, w = next(iter(calib[0].values())).shape[1:]
    table = out / "model.table"
    log(f"{label}: calibrating with ncnn2table on {len(calib)} inputs")
    run([tools["ncnn2table"], conv["param"], conv["bin"], out / "calib.txt", table,
         f"shape=[{w},{h},{c}]", "method=kl", "type=1", "thread=1"], cwd=out,
        what=f"ncnn2table {label}")
    param, binf = out / "model.int8.param", out / "model.int8.bin"
    run([tools["ncnn2int8"], conv["param"], conv["bin"], param, binf, table], cwd=out,
        what=f"ncnn2int8 {label}")
    done = dict(conv, key=key, param=str(param), bin=str(binf),
                int8_layers=sum(1 for l in param_layers(param.read_text())
                                if any(p.startswith("8=") and p != "8=0" for p in l[5])))
    meta.write_text(json.dumps(done))
    return done
