"""Regenerates the stored model suite: tests/models/<name>_<exporter>.onnx + .npz + manifest.json.

Developer tool; torch is never needed to run rvvkit or its tests. One-time set-up of a venv
outside the repository (CPU torch; the torchvision wheel's CUDA extension is not used):

    python3 -m venv /work/torchenv
    /work/torchenv/bin/pip install torch==2.13.0 torchvision==0.28.0 timm==1.0.29 \
        transformers==4.57.6 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2

then, from the repository root (all models, or the ones named):

    /work/torchenv/bin/python tests/models/generate.py [name ...] [--exporters legacy,dynamo]

Each architecture of archs.ARCHS is built from config with seeded random weights (norm
statistics and scales perturbed so no branch is an identity or a zero), exported with
  legacy: torch.onnx.export(dynamo=False, opset_version=17)  (TorchScript-based)
  dynamo: torch.onnx.export(dynamo=True, opset_version=20)   (torch.export + onnxscript)
and run on onnxruntime (one thread) on seeded inputs; the .npz holds "in.<name>" (the inputs)
and "out.<name>" (onnxruntime's outputs). An exporter that fails is recorded with its reason
in manifest.json, which also lists each model's parameters, size and ONNX operator types."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import warnings
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from archs import ARCHS  # noqa: E402

EXPORTERS = {"legacy": dict(dynamo=False, opset_version=17),
             "dynamo": dict(dynamo=True, opset_version=20, external_data=False)}
MAX_BYTES = 1_600_000


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def perturb(model: torch.nn.Module) -> None:
    """Randomise what default init leaves constant: norm affine parameters and running
    statistics, zero-initialised last BN / layer scales (1e-5) - otherwise whole branches
    vanish and a wrong kernel there would go unnoticed."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.track_running_stats:
                mod.running_mean.copy_(0.1 * torch.randn_like(mod.running_mean))
                mod.running_var.copy_(torch.rand_like(mod.running_var) + 0.5)
        for p in model.parameters():
            if not p.is_floating_point() or p.numel() == 0:
                continue
            flat = p.detach().flatten()
            amax = float(flat.abs().max())
            if amax > 1e-4 and (p.numel() == 1 or float(flat.std()) > 0):
                continue    # already random (or a deliberate scalar)
            if amax < 1e-4 and float(flat.mean()) > 0:
                base = 0.5      # layer scales (1e-5): visible but not dominant
            else:
                base = 1.0 if float(flat.mean()) > 0.5 else 0.0   # norm weights / biases
            p.copy_(base + 0.1 * torch.randn_like(p))


def ort_run(path: Path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


@contextlib.contextmanager
def traceable_masks(exporter: str):
    """transformers (>= 4.5x, torch >= 2.6) builds attention masks with torch.vmap, which the
    TorchScript tracer of the legacy exporter cannot follow (RuntimeError unordered_map::at);
    its variant for older torch builds the same mask by broadcasting."""
    try:
        from transformers import masking_utils as mu
    except ImportError:
        mu = None
    if exporter != "legacy" or mu is None or not hasattr(mu, "sdpa_mask_older_torch"):
        yield
        return
    saved = mu.sdpa_mask
    mu.sdpa_mask = mu.sdpa_mask_older_torch
    try:
        yield
    finally:
        mu.sdpa_mask = saved


def export(model, args, in_names, out_names, path: Path, exporter: str) -> None:
    with warnings.catch_warnings(), traceable_masks(exporter):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=in_names, output_names=out_names,
                          **EXPORTERS[exporter])
    strip_metadata(path)
    onnx.checker.check_model(str(path))


def strip_metadata(path: Path) -> None:
    """Drops the per-node provenance the dynamo exporter records (FX node, module path:
    a third of the file), which no runtime reads."""
    m = onnx.load(str(path))
    for node in m.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        del vi.metadata_props[:]
    for init in m.graph.initializer:
        del init.metadata_props[:]
    onnx.save(m, str(path))


def output_names(model, n: int):
    fields = getattr(model, "fields", None)
    return list(fields) if fields else ["output"] if n == 1 else [f"output{i}" for i in range(n)]


def generate(name: str, exporters) -> dict:
    torch.manual_seed(seed_of(name))
    model, (args, in_names) = ARCHS[name]()
    model.eval()
    perturb(model)
    with torch.no_grad():
        got = model(*args)
    n_out = len(got) if isinstance(got, (tuple, list)) else 1
    out_names = output_names(model, n_out)
    feeds = {k: v.numpy() for k, v in zip(in_names, args)}
    entry = {"params": int(sum(p.numel() for p in model.parameters())),
             "inputs": {k: [list(v.shape), str(v.dtype)] for k, v in feeds.items()},
             "exporters": {}}
    for exp in exporters:
        path = HERE / f"{name}_{exp}.onnx"
        rec = entry["exporters"][exp] = {}
        try:
            # Not under no_grad: that would take nn.MultiheadAttention's fused fast path,
            # which the legacy exporter cannot translate.
            with tempfile.TemporaryDirectory() as tmp:
                tmp_path = Path(tmp) / path.name
                export(model, args, in_names, out_names, tmp_path, exp)
                m = onnx.load(str(tmp_path))
                outs = ort_run(tmp_path, feeds)
                tmp_path.replace(path)
        except Exception as exc:  # noqa: BLE001 - recorded, the other exporter goes on
            rec["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
            path.unlink(missing_ok=True)
            (HERE / f"{name}_{exp}.npz").unlink(missing_ok=True)
            print(f"  {name} {exp}: FAILED {rec['error']}", flush=True)
            continue
        size = path.stat().st_size
        if size > MAX_BYTES:
            print(f"  warning: {path.name} is {size} bytes", flush=True)
        np.savez_compressed(HERE / f"{name}_{exp}.npz",
                            **{f"in.{k}": v for k, v in feeds.items()},
                            **{f"out.{k}": v for k, v in outs.items()})
        rec.update(bytes=size, opset=int(m.opset_import[0].version),
                   ops=sorted({n.op_type for n in m.graph.node}))
        print(f"  {name} {exp}: {size / 1e6:.2f} MB, {len(m.graph.node)} nodes, "
              f"ops {' '.join(rec['ops'])}", flush=True)
    return entry


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models (default all): {', '.join(ARCHS)}")
    ap.add_argument("--exporters", default="legacy,dynamo")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    names = a.names or list(ARCHS)
    unknown = sorted(set(names) - set(ARCHS))
    if unknown:
        ap.error(f"unknown model(s) {unknown}")
    man_path = HERE / "manifest.json"
    manifest = json.loads(man_path.read_text()) if man_path.exists() else {}
    for name in names:
        print(f"{name}:", flush=True)
        try:
            manifest[name] = generate(name, a.exporters.split(","))
        except Exception as exc:  # noqa: BLE001 - a model that cannot be built: say, go on
            print(f"  {name}: cannot build the torch model: {type(exc).__name__}: {exc}")
            continue
        man_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
