"""Fetch and build llama.cpp for benchmarks/peer_llama.py (a benchmark tool: rvvkit never imports it).

Everything lives under a work directory outside the repository (default
~/.cache/rvvkit-peer-llama), each step cached by a stamp file:

  src/llama.cpp-<commit>/  llama.cpp at LLAMA_COMMIT, exported with `git archive` from a bare
                           mirror (PEER_LLAMA_GIT, or the first /work/.mirror/*/repo holding the
                           commit; docs/ and models/ are left out: the mirrors lack their big files)
  zig/, zig-k1/             zig's clang (PyPI `ziglang`) wrapped for riscv64 + RVV by
                           peer_ncnn_build.zig_wrappers (plain RVV; for the K1, a -march's
                           Zfh/Zvfh/Zicbop/Zihintpause become -mcpu features)
  rv64/                    variant "fp32": libllama.a + libggml*.a for riscv64-linux-gnu
                           (GGML_RVV=ON, no Zfh/Zvfh/Zicbop/Zihintpause, no OpenMP): plain RVV,
                           where Q4_0/Q8_0 run the per-block dot products of arch/riscv/quants.c
  rv64-k1/                 variant "k1": llama.cpp's own RISC-V defaults (GGML_RV_ZFH, _ZVFH,
                           _ZICBOP, _ZIHINTPAUSE on; its CMake then compiles ggml-cpu with
                           -march=rv64gcv_zfh_zvfh_zicbop_zihintpause), as on a K1: Q4_0/Q8_0
                           weights are repacked at load and its 16x1 GEMV/GEMM kernels run
                           (ggml-cpu/repack.cpp, under __riscv_zvfh, at VLEN 256 only)
  each with bin/llama-peer-driver, the small driver below linked against them
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peer_ncnn_build import (PeerError, _file_hash, _stamp_ok, need, run,  # noqa: E402
                             zig_wrappers)

# An upstream ggml-org/llama.cpp master commit (2026-08-07, "ui: read model modalities from the
# router model list (#26709)"). The ggml-org mirror is too big for `fetch`; forks that merged
# upstream (e.g. unslothai/llama.cpp) hold this exact commit.
LLAMA_COMMIT = "82bb48500a9a6b3374da2cf5811695369278e4d3"
MIRROR_ROOT = Path("/work/.mirror")
DEFAULT_WORK = Path.home() / ".cache" / "rvvkit-peer-llama"

# GGML_NATIVE off: the target is not the build machine (the variants add their -march); OpenMP
# off (its default is on): the counts are of one thread, which then runs on ggml's own thread
# code with nothing to wait for (docs/benchmarks.md says so beside the tables)
COMMON_OPTS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF", "-DGGML_CCACHE=OFF", "-DGGML_BACKEND_DL=OFF",
    "-DLLAMA_BUILD_COMMON=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
]
# Plain RVV: every RISC-V option but the vector extension off (llama.cpp's defaults are on).
PLAIN_RVV = ["-DGGML_RVV=ON", "-DGGML_RV_ZFH=OFF", "-DGGML_RV_ZVFH=OFF", "-DGGML_RV_ZICBOP=OFF",
             "-DGGML_RV_ZIHINTPAUSE=OFF", "-DGGML_RV_ZVFBFWMA=OFF", "-DGGML_XTHEADVECTOR=OFF"]
# Per variant: the wrappers (peer_ncnn_build.VARIANTS), CMake's RISC-V options, the build
# directory and the extensions ggml-cpu's -march must (k1) or must not (fp32) name. "k1" passes
# no RISC-V option: at LLAMA_COMMIT ggml/CMakeLists.txt defaults GGML_RVV, GGML_RV_ZFH,
# GGML_RV_ZVFH, GGML_RV_ZICBOP, GGML_RV_ZIHINTPAUSE to ON and GGML_RV_ZVFBFWMA,
# GGML_XTHEADVECTOR to OFF; GGML_RV_ZBA is no option there (unset: off).
VARIANTS = {
    "fp32": {"opts": PLAIN_RVV, "build": "rv64", "march_has": (), "march_lacks": ("zvfh", "zfh")},
    "k1": {"opts": [], "build": "rv64-k1", "march_has": ("zfh", "zvfh", "zicbop"),
           "march_lacks": ()},
}
CMAKE_OPTS = COMMON_OPTS + PLAIN_RVV    # the fp32 variant's, as before
LIBS = ("src/libllama.a", "ggml/src/libggml.a", "ggml/src/libggml-cpu.a",
        "ggml/src/libggml-base.a")

# The driver: load a GGUF, decode `n_prompt` fixed token ids in one batch, sample greedily,
# then decode `n_gen` more single tokens (each sampled greedily; end-of-generation ignored),
# all on one thread in a context of n_ctx cells. It prints one JSON line: the first logits
# after the prompt, their argmax and the generated ids, for cross-VLEN checks.
DRIVER = r"""
#include "llama.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void log_cb(enum ggml_log_level level, const char * text, void * verbose) {
    if (verbose || level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s model.gguf n_prompt n_gen n_ctx [-v]\n", argv[0]);
        return 2;
    }
    const int n_prompt = atoi(argv[2]), n_gen = atoi(argv[3]), n_ctx = atoi(argv[4]);
    static int verbose_flag = 1;
    llama_log_set(log_cb, argc > 5 && !strcmp(argv[5], "-v") ? &verbose_flag : nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = cp.n_ubatch = n_prompt > 0 ? n_prompt : 1;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    std::vector<llama_token> prompt(n_prompt);
    for (int i = 0; i < n_prompt; ++i) prompt[i] = (llama_token) ((1 + 37 * i) % n_vocab);
    if (llama_decode(ctx, llama_batch_get_one(prompt.data(), n_prompt))) {
        fprintf(stderr, "prompt decode failed\n"); return 1;
    }
    const float * lg = llama_get_logits_ith(ctx, -1);
    printf("{\"n_vocab\": %d, \"prompt_logits\": [", n_vocab);
    for (int i = 0; i < 16 && i < n_vocab; ++i) printf(i ? ", %.6g" : "%.6g", lg[i]);
    int best = 0;
    for (int i = 1; i < n_vocab; ++i) if (lg[i] > lg[best]) best = i;
    llama_token tok = llama_sampler_sample(smpl, ctx, -1);
    printf("], \"prompt_argmax\": %d, \"tokens\": [%d", best, tok);
    for (int i = 0; i < n_gen; ++i) {
        if (llama_decode(ctx, llama_batch_get_one(&tok, 1))) {
            fprintf(stderr, "decode %d failed\n", i); return 1;
        }
        tok = llama_sampler_sample(smpl, ctx, -1);
        printf(", %d", tok);
    }
    printf("]}\n");
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
"""


def log(msg: str) -> None:
    print(f"[peer_llama] {msg}", file=sys.stderr, flush=True)


def _has_commit(git_dir: Path, commit: str) -> bool:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e",
                           f"{commit}^{{commit}}"], capture_output=True)
    return proc.returncode == 0


def find_git_dir(commit: str = LLAMA_COMMIT) -> Path:
    """A bare llama.cpp repository holding `commit`: $PEER_LLAMA_GIT, else a fetched mirror."""
    env = os.environ.get("PEER_LLAMA_GIT")
    cands = [Path(env)] if env else sorted(MIRROR_ROOT.glob("*llama.cpp*/repo"))
    for cand in cands:
        if cand.is_dir() and _has_commit(cand, commit):
            return cand
    raise PeerError(f"no git directory with llama.cpp {commit[:12]}: fetch a mirror holding it "
                    f"(github:ggml-org/llama.cpp, or a fork such as github:unslothai/llama.cpp) "
                    f"under {MIRROR_ROOT}, or set PEER_LLAMA_GIT to a bare clone")


def fetch_source(work: Path, commit: str = LLAMA_COMMIT) -> Path:
    src = work / "src" / f"llama.cpp-{commit[:9]}"
    if (src / ".peer-ok").is_file():
        return src
    git_dir = find_git_dir(commit)
    log(f"exporting llama.cpp {commit[:12]} from {git_dir}")
    src.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["rm", "-rf", str(src)], check=True)
    archive = subprocess.Popen(["git", "--git-dir", str(git_dir), "archive",
                                f"--prefix={src.name}/", commit, "--", ".",
                                ":(exclude)docs", ":(exclude)models"], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "x", "-C", str(src.parent)], stdin=archive.stdout)
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise PeerError(f"git archive of {commit[:12]} from {git_dir} failed")
    (src / ".peer-ok").write_text(commit)
    return src


def cmake_build(src: Path, build: Path, opts, target: str, jobs: int, label: str) -> None:
    """Configure llama.cpp's `src` in `build` with `opts` and build `target`. A configured
    tree keeps its generator (CMake refuses another); a new one takes Ninja where there is."""
    cmake = need("cmake", "apt-get install cmake, or pip install cmake")
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "CMakeCache.txt").exists() \
        else []
    build.mkdir(parents=True, exist_ok=True)
    log(f"configuring llama.cpp ({label}) in {build}")
    run([cmake, "-S", src, "-B", build, *gen, *opts], what="llama.cpp cmake configure")
    log(f"building {target} ({label}) with {jobs} jobs (takes ~10-20 minutes on 2 cores)")
    run([cmake, "--build", build, "-j", str(jobs), "--target", target],
        what="llama.cpp build", timeout=7200)


def build_llama(work: Path = DEFAULT_WORK, jobs: int = 2, commit: str = LLAMA_COMMIT,
                variant: str = "fp32") -> dict:
    """llama.cpp's libraries for riscv64 + RVV as `variant` (VARIANTS) and the driver (cached);
    returns {"driver", "build", "src", "commit", "zig", "mcpu", "cmake_opts", "march",
    "variant", "seconds"}."""
    import time
    from peer_ncnn_build import toolchain_file
    t0 = time.time()
    work = Path(work)
    v = VARIANTS[variant]
    src = fetch_source(work, commit)
    z = zig_wrappers(work, variant)
    build = work / v["build"]
    opts = COMMON_OPTS + list(v["opts"])
    key = {"commit": commit, "zig": z["version"], "opts": opts, "mcpu": z["mcpu"]}
    stamp = build / ".peer-stamp"
    if not (all((build / lib).is_file() for lib in LIBS) and _stamp_ok(stamp, key)):
        cmake_build(src, build, [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file(z)}", *opts], "llama",
                    jobs, variant)
        stamp.write_text(json.dumps(key))
    march = ggml_cpu_march(build)
    exts = set(march.split("_")[1:])
    missing = [e for e in v["march_has"] if e not in exts]
    extra = [e for e in v["march_lacks"] if e in exts]
    if missing or extra:
        raise PeerError(f"llama.cpp ({variant}) compiled ggml-cpu with {march}: "
                        + (f"{', '.join(missing)} missing" if missing else
                           f"{', '.join(extra)} should be off"))
    driver = build / "bin" / "llama-peer-driver"
    dsrc = build / "llama_peer_driver.cpp"
    if not dsrc.is_file() or dsrc.read_text() != DRIVER:
        dsrc.write_text(DRIVER)
    dkey = dict(key, driver=_file_hash(dsrc), libs=[_file_hash(build / lib) for lib in LIBS])
    dstamp = build / "bin" / ".peer-driver-stamp"
    if not (driver.is_file() and _stamp_ok(dstamp, dkey)):
        driver.parent.mkdir(parents=True, exist_ok=True)
        log(f"linking the riscv64 llama.cpp driver ({variant})")
        run([z["c++"], "-O2", "-std=c++17", f"-I{src / 'include'}", f"-I{src / 'ggml/include'}",
             dsrc, *[build / lib for lib in LIBS], "-lpthread", "-lm", "-o", driver],
            what="linking llama-peer-driver")
        dstamp.write_text(json.dumps(dkey))
    return {"driver": driver, "build": build, "src": src, "commit": commit, "zig": z["version"],
            "mcpu": z["mcpu"], "cmake_opts": opts, "march": march, "variant": variant,
            "seconds": round(time.time() - t0, 1)}


def ggml_cpu_march(build: Path) -> str:
    """The -march CMake gave ggml-cpu's repack.cpp (compile_commands.json): what llama.cpp's
    CMake chose for this variant, before the wrapper turns it into -mcpu features."""
    try:
        cmds = json.loads((build / "compile_commands.json").read_text())
    except (OSError, ValueError):
        raise PeerError(f"no compile_commands.json in {build}: rebuild it") from None
    for c in cmds:
        if c["file"].endswith("ggml-cpu/repack.cpp"):
            for arg in c.get("command", " ".join(c.get("arguments", []))).split():
                if arg.startswith("-march="):
                    return arg[len("-march="):]
    raise PeerError(f"{build}: ggml-cpu/repack.cpp has no -march in compile_commands.json")


def qemu_prefix(vlen: int, isa: str = "", counting10: bool = False) -> list:
    """qemu-riscv64 with rvvkit's sysroot and -cpu string for VLEN `vlen` (RVV 1.0) plus the
    QEMU 7.2 properties of ISA profile `isa` (toolchain/isa/; "" or None: plain RVV); with
    `counting10`, rvvkit's counting QEMU 10 and the profile as QEMU 10 spells it."""
    sys.path.insert(0, str(HERE.parent))
    try:
        from rvvkit.errors import RvvkitError
        from rvvkit.jit import isa as isa_profiles, targets
    except ImportError:    # rvvkit not importable: the plain-RVV defaults by hand
        if isa:
            raise PeerError(f"--isa {isa} needs rvvkit importable (its toolchain/isa/ data)")
        return ["qemu-riscv64", "-L", "/usr/riscv64-linux-gnu", "-cpu",
                f"rv64,v=true,vlen={vlen},elen=64,vext_spec=v1.0"]
    rv = targets.riscv()
    try:
        props = isa_profiles.profile(isa or None).qemu_props("qemu10" if counting10 else "qemu7")
        if counting10:
            from rvvkit.runtime.counting.vcount import require_counting_qemu
            binary = require_counting_qemu()
        else:
            binary = rv.qemu_binary
    except RvvkitError as exc:
        raise PeerError(str(exc)) from None
    return [binary, "-L", rv.sysroot, "-cpu", rv.cpu_string(vlen) + props]
