"""The models of bench_gpu.py and the work it does on one of them, in a process of its own:

    python3 benchmarks/gpu_models.py build SPEC DIR    # ONNX + inputs + onnxruntime reference,
                                                       # the artifact, its CUDA object compiled
    python3 benchmarks/gpu_models.py run SPEC DIR [--repeat N] [--emulate]

SPEC names a model: `light:squeezenet` (an ONNX light model, random weights),
`stored:resnet18_legacy` (tests/models), `torch:resnet50` (torchvision or transformers, random
weights, exported here), or a path to an .onnx file. Each phase writes DIR/<key>.<phase>.json
(what it measured, or "error"); a crash leaves no file, which the driver reports."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, Tuple

from host_env import ROOT  # noqa: I100 - finds rvvkit first

import numpy as np

import rvvkit

TORCH_MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "bert_base",
                "vit_base", "whisper_tiny_encoder", "whisper_base_encoder")
BERT_TOKENS = 128


def key_of(spec: str) -> str:
    return spec.replace(":", "_").replace("/", "_").replace(".onnx", "")


# ---------------------------------------------------------------------------- model sources

def torch_module(name: str):
    """(module in eval mode, example inputs as numpy) with weights from seed 0."""
    import torch
    torch.manual_seed(0)
    if name == "bert_base":
        from transformers import BertConfig, BertModel

        class Bert(torch.nn.Module):   # one tensor out: what the ONNX graph's output is
            def __init__(self):
                super().__init__()
                self.bert = BertModel(BertConfig(), add_pooling_layer=False)

            def forward(self, input_ids, attention_mask):
                return self.bert(input_ids=input_ids,
                                 attention_mask=attention_mask).last_hidden_state

        rng = np.random.default_rng(1)
        feeds = {"input_ids": rng.integers(0, 30522, (1, BERT_TOKENS), dtype=np.int64),
                 "attention_mask": np.ones((1, BERT_TOKENS), np.int64)}
        return Bert().eval(), feeds
    if name in HF_ENCODERS:
        return HF_ENCODERS[name]()
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    return model, {"x": np.random.default_rng(1).standard_normal((1, 3, 224, 224))
                   .astype(np.float32)}


def _hf_vit():
    """ViT-B/16 at 224 as transformers builds it (ViTConfig's defaults), for hosts without
    torchvision; the same graph shapes as torchvision's vit_b_16."""
    import torch
    from transformers import ViTConfig, ViTModel

    class Vit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vit = ViTModel(ViTConfig(), add_pooling_layer=False)

        def forward(self, x):
            return self.vit(pixel_values=x).last_hidden_state

    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return Vit().eval(), {"x": x}


def _hf_whisper_encoder(size: str):
    """Whisper's audio encoder (tiny or base widths), 30 s of log-mel frames in."""
    import torch
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    width = {"tiny": (384, 4, 6), "base": (512, 6, 8)}[size]
    cfg = WhisperConfig(d_model=width[0], encoder_layers=width[1], encoder_attention_heads=width[2],
                        encoder_ffn_dim=4 * width[0])

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = WhisperEncoder(cfg)

        def forward(self, mel):
            return self.enc(mel).last_hidden_state

    mel = np.random.default_rng(1).standard_normal((1, 80, 3000)).astype(np.float32)
    return Enc().eval(), {"mel": mel}


HF_ENCODERS = {"vit_base": _hf_vit,
               "whisper_tiny_encoder": lambda: _hf_whisper_encoder("tiny"),
               "whisper_base_encoder": lambda: _hf_whisper_encoder("base")}


def export_torch(name: str, path: Path) -> Dict[str, np.ndarray]:
    import torch
    model, feeds = torch_module(name)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    try:   # the TorchScript exporter is faster; newer torch may have only the dynamo one
        torch.onnx.export(model, args, str(path), input_names=list(feeds), output_names=["y"],
                          opset_version=17, dynamo=False)
    except Exception:  # noqa: BLE001 - whichever way it refuses
        torch.onnx.export(model, args, str(path), input_names=list(feeds), output_names=["y"],
                          dynamo=True)
    return feeds


def materialise(spec: str, out: Path) -> Tuple[Path, Dict[str, np.ndarray]]:
    """The model of `spec` as an .onnx file under `out`, and its inputs."""
    import onnx
    from rvvkit import zoo
    kind, _, name = spec.partition(":")
    path = out / f"{key_of(spec)}.onnx"
    if kind == "light":
        model = zoo.light_model(name)
        zoo.expose_logits(model)
        onnx.save(model, str(path))
        return path, zoo.sample_inputs(model)
    if kind == "stored":
        data = np.load(ROOT / "tests" / "models" / f"{name}.npz")
        return (ROOT / "tests" / "models" / f"{name}.onnx",
                {k[3:]: data[k] for k in data.files if k.startswith("in.")})
    if kind == "torch":
        return path, export_torch(name, path)
    model = onnx.load(spec)
    return Path(spec), zoo.sample_inputs(model)


# ---------------------------------------------------------------------------------- phases

def build(spec: str, out: Path, emulate: bool) -> Dict:
    path, feeds = materialise(spec, out)
    np.savez(out / f"{key_of(spec)}.in.npz", **feeds)
    from rvvkit.measure.reference import ort_session
    ref = ort_session(str(path)).run(None, feeds)
    np.savez(out / f"{key_of(spec)}.ref.npz", *ref)
    t0 = time.perf_counter()
    art = rvvkit.build(str(path))
    art.save(out / f"{key_of(spec)}.rvv")
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    rvvkit.load(art, on="cuda-emu" if emulate else "cuda").close()   # compiles, caches
    return {"build_s": built, "compile_s": time.perf_counter() - t0,
            "steps": len(art.meta["plan"])}


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run(spec: str, out: Path, repeat: int, emulate: bool) -> Dict:
    key = key_of(spec)
    feeds = dict(np.load(out / f"{key}.in.npz"))
    ref = np.load(out / f"{key}.ref.npz")
    sess = rvvkit.load(str(out / f"{key}.rvv"), on="cuda-emu" if emulate else "cuda")
    res: Dict = {"device": sess.device_name}
    outs = list(sess.run(feeds).values())
    floats = [(o.astype(np.float64), ref[f"arr_{i}"]) for i, o in enumerate(outs)
              if o.dtype.kind == "f"]
    res["err_ort"] = max((float(np.max(np.abs(o - r))) for o, r in floats), default=0.0)
    # rvvkit compare's default tolerance: atol 1e-4 + rtol 1e-3 of the reference's range
    bad = [i for i, (o, r) in enumerate(floats)
           if np.max(np.abs(o - r)) > 1e-4 + 1e-3 * float(np.max(np.abs(r)))]
    if bad:
        res["error"] = f"output(s) {bad} do not match onnxruntime"
    if repeat <= 0:   # numerics only
        sess.close()
        return res
    prepared = sess.prepare(feeds)
    for _ in range(3):
        sess.run_prepared(prepared)
    res["ms"] = _median_ms(lambda: sess.run_prepared(prepared), repeat)
    rows = sess.profile(feeds, repeat=max(repeat // 5, 1))
    res["kernel_ms"] = 1e3 * sum(r["seconds"] for r in rows)
    res["overhead_ms"] = max(res["ms"] - res["kernel_ms"], 0.0)
    sess.close()
    if spec.startswith("torch:") and not emulate:
        res.update(run_torch(spec.split(":", 1)[1], feeds, outs[0], repeat))
    return res


def run_torch(name: str, feeds, ours: np.ndarray, repeat: int) -> Dict:
    """PyTorch eager on the same GPU: fp32, TF32 off, cudnn.benchmark on, batch 1."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    model, _ = torch_module(name)
    model = model.cuda()
    args = [torch.from_numpy(v).cuda() for v in feeds.values()]

    def once():
        with torch.no_grad():
            y = model(*args)
        torch.cuda.synchronize()
        return y

    for _ in range(10):
        y = once()
    ms = _median_ms(once, repeat)
    got = y.float().cpu().numpy()
    return {"torch_ms": ms, "err_torch": float(np.max(np.abs(got - ours)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("phase", choices=("build", "run"))
    ap.add_argument("spec")
    ap.add_argument("dir", type=Path)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--emulate", action="store_true")
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.phase == "build":
            res = build(args.spec, args.dir, args.emulate)
        else:
            res = run(args.spec, args.dir, args.repeat, args.emulate)
    except Exception as exc:  # noqa: BLE001 - the row says why; the driver goes on
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        res = {"error": f"{type(exc).__name__}: {first}"[:300]}
        traceback.print_exc()
    (args.dir / f"{key_of(args.spec)}.{args.phase}.json").write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
