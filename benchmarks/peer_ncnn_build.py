"""Fetch and build ncnn for benchmarks/peer_ncnn.py (a benchmark tool: rvvkit never imports it).

Everything is built under a work directory outside the repository (default
~/.cache/rvvkit-peer) and cached by a stamp file per step, so a second run only measures:

  src/      ncnn's sdist from PyPI (`pip download`, pinned by URL and sha256) and, for int8,
            ncnn's tools/quantize from a Tencent/ncnn git checkout at the matching tag (the
            sdist has no tools/ directory)
  zig/      compiler wrappers: zig's clang (PyPI `ziglang`) for riscv64, with -march=rv64gcv
            mapped to -mcpu=baseline_rv64+v (zig rejects -march); zig-k1/ the same for the K1
            (-mcpu=baseline_rv64+v+zfh+zvfh, and a -march's extensions the K1 has added to it)
  rv64/     variant "fp32": libncnn.a for riscv64 + RVV (no Zfh/Zvfh/XTheadVector, no OpenMP,
            no runtime CPU dispatch) and bin/ncnn_runner (benchmarks/ncnn_runner.cpp linked
            against it, fp16/bf16 options off)
  rv64-k1/  variant "k1": the same with NCNN_ZFH/NCNN_ZVFH on (ncnn's defaults for a compiler
            that has them) and a runner that keeps ncnn's default options: fp16 storage and
            arithmetic, as ncnn runs on a K1 (it finds Zfh/Zvfh by probing an instruction)
  host/     libncnn.a for the host and bin/ncnn2table, bin/ncnn2int8 (int8 only)
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

NCNN_VERSION = "1.0.20260526"   # the PyPI sdist
NCNN_TAG = "20260526"           # the git tag of the same source (for tools/quantize)
# pnnx of the same release: later ones write Reshape shapes as expressions ("//(1000,0n)")
# that this ncnn fails to load ("expr divide by zero")
PNNX_VERSION = "20260526"
NCNN_SDIST = ("https://files.pythonhosted.org/packages/5b/77/d6acfd9b652463a2037a1113954f2cf0aa"
              "7d4c414de31b01aeb1fd9bf9e7/ncnn-1.0.20260526.tar.gz")
NCNN_SHA256 = "282f0f4a1beec1f5212aa0d22c00737418645055f33c2d2082922931cdbdc537"
HERE = Path(__file__).resolve().parent
RUNNER_SOURCE = HERE / "ncnn_runner.cpp"
TOOL_FILES = ("tools/quantize", "tools/modelwriter.h", "tests/prng.h")

# OpenMP off (ncnn's default is on): the counts are of one thread, and OpenMP's start-up and
# idle spinning would land in them (docs/benchmarks.md says so beside the tables)
COMMON = ["-DCMAKE_BUILD_TYPE=Release", "-DNCNN_VULKAN=OFF", "-DNCNN_OPENMP=OFF",
          "-DNCNN_SHARED_LIB=OFF", "-DNCNN_BUILD_EXAMPLES=OFF", "-DNCNN_BUILD_BENCHMARK=OFF",
          "-DNCNN_BUILD_TESTS=OFF", "-DNCNN_PYTHON=OFF", "-DNCNN_BUILD_TOOLS=OFF",
          "-DNCNN_INSTALL_SDK=OFF"]
# Zfh/Zvfh OFF: float32 kernels, compared with rvvkit's float32. This is NOT ncnn's K1 default
# (on a Zvfh core it runs float16); the reason given once, that QEMU 7.2 lacks Zvfh, was wrong
# (it runs Zvfh code unchecked). docs/benchmarks.md says so beside the tables (issue 42).
RISCV = ["-DNCNN_RVV=ON", "-DNCNN_ZFH=OFF", "-DNCNN_ZVFH=OFF", "-DNCNN_XTHEADVECTOR=OFF",
         "-DNCNN_RUNTIME_CPU=OFF"]
# ncnn as a K1 user builds it: Zfh/Zvfh on (its own default once the compiler has them); its
# CMake then compiles the library with -march=rv64gcv_zfh_zvfh (src/CMakeLists.txt).
RISCV_K1 = ["-DNCNN_RVV=ON", "-DNCNN_ZFH=ON", "-DNCNN_ZVFH=ON", "-DNCNN_XTHEADVECTOR=OFF",
            "-DNCNN_RUNTIME_CPU=OFF"]
# The K1's extensions a -march may name (toolchain/isa/k1.toml) plus Zihintpause, which
# RVA22U64 mandates (llama.cpp's default -march names it; `pause` is a hint, a no-op elsewhere).
K1_EXTENSIONS = ("zfh", "zfhmin", "zvfh", "zvfhmin", "zba", "zbb", "zbs", "zicbom", "zicbop",
                 "zicboz", "zihintpause")
# Per peer variant: the compiler wrappers' base -mcpu features and the extensions a -march may
# add, ncnn's RISC-V CMake options, the build directory and the runner's extra defines.
VARIANTS = {
    "fp32": {"zig": "zig", "features": ("v",), "march_ok": (), "cmake": RISCV,
             "build": "rv64", "runner_defs": ()},
    "k1": {"zig": "zig-k1", "features": ("v", "zfh", "zvfh"), "march_ok": K1_EXTENSIONS,
           "cmake": RISCV_K1, "build": "rv64-k1",
           # ncnn's headers use __fp16, which clang has not for riscv64: ncnn's CMake maps it
           # to _Float16 for its own sources, and the runner includes those headers
           "runner_defs": ("-DNCNN_RUNNER_DEFAULT_OPTIONS", "-D__fp16=_Float16")},
}
PEER_VARIANTS = ("k1", "fp32")   # the order tables show them in


def variants(choice: str) -> tuple:
    """--peer-variant k1|fp32|both as the tuple of variants to build and count."""
    if choice == "both":
        return PEER_VARIANTS
    if choice not in VARIANTS:
        raise PeerError(f"--peer-variant {choice!r}: expected k1, fp32 or both")
    return (choice,)
# tarfile's "data" filter (path traversal checks) exists from Python 3.11.4 / 3.10.12 on.
_SAFE = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
HOST = ["-DNCNN_SIMPLEOCV=ON", "-DNCNN_RUNTIME_CPU=OFF", "-DNCNN_AVX512=OFF"]


class PeerError(Exception):
    """A step failed; the message is one line plus, for a command, its tail."""


def log(msg: str) -> None:
    print(f"[peer_ncnn] {msg}", file=sys.stderr, flush=True)


def run(cmd, *, cwd=None, env=None, what: str, timeout: float = 3600) -> str:
    """Run cmd; on failure raise PeerError naming the command and the tail of its output."""
    cmd = [str(c) for c in cmd]
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except FileNotFoundError:
        raise PeerError(f"{what}: {cmd[0]!r} not found") from None
    except subprocess.TimeoutExpired:
        raise PeerError(f"{what}: timed out after {timeout:g} s: {' '.join(cmd)}") from None
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-25:])
        raise PeerError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return out


def _stamp_ok(stamp: Path, key: dict) -> bool:
    try:
        return json.loads(stamp.read_text()) == key
    except (OSError, ValueError):
        return False


def _file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def need_pnnx() -> str:
    """The pnnx executable of PNNX_VERSION."""
    from importlib import metadata
    hint = f"pip install pnnx=={PNNX_VERSION}"
    exe = need("pnnx", hint)
    try:
        have = metadata.version("pnnx")
    except metadata.PackageNotFoundError:
        have = "unknown"
    if have != PNNX_VERSION:
        raise PeerError(f"pnnx {have} found; ncnn {NCNN_VERSION} loads what pnnx {PNNX_VERSION} "
                        f"writes: {hint}")
    return exe


def need(tool: str, hint: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise PeerError(f"{tool} not found on PATH ({hint})")
    return found


def fetch_source(work: Path) -> Path:
    """ncnn's sdist, downloaded by pip and unpacked: the source tree's path."""
    src = work / "src" / f"ncnn-{NCNN_VERSION}"
    if (src / "CMakeLists.txt").is_file() and (src / ".peer-ok").is_file():
        return src
    dl = work / "src"
    dl.mkdir(parents=True, exist_ok=True)
    tar = dl / f"ncnn-{NCNN_VERSION}.tar.gz"
    if not (tar.is_file() and _file_hash(tar) == NCNN_SHA256):
        log(f"downloading ncnn {NCNN_VERSION} sdist with pip")
        # A direct URL: the sdist's setup.py stamps today's date as its version, which pip
        # would reject as inconsistent with `ncnn==1.0.20260526`; the sha256 pins the file.
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "ncnn",
             "-d", dl, f"ncnn @ {NCNN_SDIST}#sha256={NCNN_SHA256}"], what="pip download ncnn",
            timeout=900)
    shutil.rmtree(src, ignore_errors=True)
    with tarfile.open(tar) as t:
        t.extractall(dl, **_SAFE)
    (src / ".peer-ok").write_text(NCNN_VERSION)
    return src


def zig_wrappers(work: Path, variant: str = "fp32") -> dict:
    """Executables cc, c++, ar, ranlib that run zig for riscv64-linux-gnu with RVV and the
    variant's features (VARIANTS)."""
    try:
        import ziglang
    except ImportError:
        raise PeerError("zig not found: pip install ziglang (PyPI) -- it provides the clang "
                        "that builds ncnn's RVV code") from None
    v = VARIANTS[variant]
    zig = Path(ziglang.__file__).parent / "zig"
    out = work / v["zig"]
    out.mkdir(parents=True, exist_ok=True)
    mcpu = "baseline_rv64" + "".join(f"+{f}" for f in v["features"])
    allowed = " ".join(v["march_ok"])
    paths = {}
    for name in ("cc", "c++"):
        p = out / f"rv64-{name}"
        p.write_text(f"""#!/bin/bash
# zig's clang for riscv64 + RVV ({variant}); zig rejects -march, so -march=rv64gc[v][_ext...]
# becomes -mcpu={mcpu} plus each _ext, if it is one of: {allowed or "(none)"}.
# Any other -march (XTheadVector probes, an extension the board lacks) fails like an
# unsupported feature, so a CMake probe for it turns the option off.
args=()
cpu="{mcpu}"
for a in "$@"; do
  case "$a" in
    -march=rv64gcv|-march=rv64gc) ;;
    -march=rv64gc_*|-march=rv64gcv_*)
      rest="${{a#-march=rv64gc}}"; rest="${{rest#v}}"; rest="${{rest#_}}"
      IFS=_ read -ra exts <<< "$rest"
      for e in "${{exts[@]}}"; do
        case " {allowed} " in
          *" $e "*) case "+${{cpu#*+}}+" in *"+$e+"*) ;; *) cpu="$cpu+$e" ;; esac ;;
          *) echo "rv64-{name}: unsupported $a" >&2; exit 1 ;;
        esac
      done ;;
    -march=*) echo "rv64-{name}: unsupported $a" >&2; exit 1 ;;
    *) args+=("$a") ;;
  esac
done
exec "{zig}" {name} --target=riscv64-linux-gnu -mcpu="$cpu" "${{args[@]}}"
""")
        p.chmod(0o755)
        paths[name] = p
    for tool in ("ar", "ranlib"):
        p = out / f"rv64-{tool}"
        p.write_text(f'#!/bin/sh\nexec "{zig}" {tool} "$@"\n')
        p.chmod(0o755)
        paths[tool] = p
    paths["zig"] = zig
    paths["mcpu"] = mcpu
    paths["version"] = run([zig, "version"], what="zig version").strip()
    return paths


def toolchain_file(z: dict) -> Path:
    """A CMake toolchain file using the wrappers `z` (written beside them)."""
    tc = Path(z["cc"]).parent / "riscv64-zig.cmake"
    tc.write_text("set(CMAKE_SYSTEM_NAME Linux)\nset(CMAKE_SYSTEM_PROCESSOR riscv64)\n"
                  f"set(CMAKE_C_COMPILER {z['cc']})\nset(CMAKE_CXX_COMPILER {z['c++']})\n"
                  f"set(CMAKE_AR {z['ar']} CACHE FILEPATH \"\")\n"
                  f"set(CMAKE_RANLIB {z['ranlib']} CACHE FILEPATH \"\")\n")
    return tc


def _cmake_build(src: Path, build: Path, opts: list, jobs: int, what: str, targets) -> None:
    cmake = need("cmake", "apt-get install cmake, or pip install cmake")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    build.mkdir(parents=True, exist_ok=True)
    log(f"{what}: configuring in {build}")
    run([cmake, "-S", src, "-B", build, *gen, *opts], what=f"{what} (cmake configure)")
    log(f"{what}: building {' '.join(targets)} with {jobs} jobs (libncnn.a takes minutes)")
    run([cmake, "--build", build, "-j", str(jobs), "--target", *targets],
        what=f"{what} (cmake build)", timeout=7200)


def build_riscv(work: Path, src: Path, jobs: int, variant: str = "fp32") -> dict:
    """libncnn.a for riscv64 RVV and the runner of `variant` (VARIANTS); returns paths, the
    compiler's version and the build's seconds (0 when cached)."""
    import time
    t0 = time.time()
    v = VARIANTS[variant]
    z = zig_wrappers(work, variant)
    build = work / v["build"]
    lib = build / "src" / "libncnn.a"
    opts = COMMON + list(v["cmake"])
    key = {"ncnn": NCNN_VERSION, "zig": z["version"], "opts": opts}
    if variant != "fp32":    # the fp32 key is what earlier builds stamped: keep them valid
        key["mcpu"] = z["mcpu"]
    stamp = build / ".peer-stamp"
    if not (lib.is_file() and _stamp_ok(stamp, key)):
        _cmake_build(src, build, [f"-DCMAKE_TOOLCHAIN_FILE={toolchain_file(z)}", *opts], jobs,
                     f"libncnn.a riscv64 ({variant})", ["ncnn"])
        _check_cache(build, opts)
        stamp.write_text(json.dumps(key))
    runner = build / "bin" / "ncnn_runner"
    defs = list(v["runner_defs"])
    rkey = dict(key, runner=_file_hash(RUNNER_SOURCE), lib=_file_hash(lib))
    if defs:
        rkey["defs"] = defs
    rstamp = build / "bin" / ".peer-stamp"
    if not (runner.is_file() and _stamp_ok(rstamp, rkey)):
        runner.parent.mkdir(parents=True, exist_ok=True)
        log(f"linking the riscv64 ncnn runner ({variant})")
        run([z["c++"], "-O2", "-std=c++11", *defs, f"-I{src / 'src'}", f"-I{build / 'src'}",
             RUNNER_SOURCE, lib, "-lpthread", "-o", runner], what="building ncnn_runner")
        rstamp.write_text(json.dumps(rkey))
    return {"runner": runner, "zig": z["version"], "variant": variant, "mcpu": z["mcpu"],
            "cmake": list(v["cmake"]), "seconds": round(time.time() - t0, 1)}


def _check_cache(build: Path, opts: list) -> None:
    """Fail when CMake turned an -DNCNN_...=ON option off (its compiler probe failed): a
    variant that silently lost Zvfh would be counted as if it had it."""
    cache = (build / "CMakeCache.txt").read_text(errors="replace")
    for opt in opts:
        name, _, want = opt[2:].partition("=")
        if name.startswith("NCNN_") and want == "ON" and f"{name}:BOOL=ON" not in cache:
            raise PeerError(f"ncnn's CMake turned {name} off in {build} (its compiler probe "
                            "failed): see CMakeFiles/CMakeConfigureLog.yaml")


def riscv_int8_note(src: Path) -> str:
    """What this ncnn's RISC-V layers do with int8 (read from its source)."""
    todo = [f for f in ("convolution", "convolutiondepthwise", "innerproduct")
            if "TODO implement int8" in (src / "src" / "layer" / "riscv" /
                                         f"{f}_riscv.cpp").read_text(errors="replace")]
    if not todo:
        return ""
    return (f"ncnn {NCNN_VERSION} has no RVV int8 kernels for {', '.join(todo)} "
            "(src/layer/riscv: 'TODO implement int8'); those layers run the generic C++ "
            "forward_int8 (compiled with RVV enabled, so only what clang auto-vectorises)")


def _git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def add_tools(src: Path, tools_from: str) -> str:
    """Put tools/quantize and tools/modelwriter.h (missing from the sdist) into `src`, from a
    Tencent/ncnn checkout or git directory at tag NCNN_TAG; returns a one-line provenance note
    saying whether that tag's src/ is identical to the sdist's."""
    origin = Path(tools_from).expanduser()
    if (origin / "tools" / "quantize" / "ncnn2table.cpp").is_file():   # a work tree
        for rel in TOOL_FILES:
            dst = src / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(dst, ignore_errors=True) if dst.is_dir() else dst.unlink(missing_ok=True)
            (shutil.copytree if (origin / rel).is_dir() else shutil.copy2)(origin / rel, dst)
        return f"tools/quantize copied from {origin} (a work tree: version not checked)"
    git = ["git", "--git-dir", str(origin)]
    try:
        listing = run([*git, "ls-tree", "-r", NCNN_TAG, "src"], what="git ls-tree")
    except PeerError as exc:
        raise PeerError(f"--ncnn-tools {origin}: neither a checkout with tools/quantize nor a "
                        f"git directory with tag {NCNN_TAG} ({str(exc).splitlines()[0]})") from None
    differ = 0
    tagged = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        tagged[path] = meta.split()[2]
    for path, sha in tagged.items():
        f = src / path
        if not f.is_file() or _git_blob_sha(f.read_bytes()) != sha:
            differ += 1
    archive = subprocess.run([*git, "archive", NCNN_TAG, *TOOL_FILES], capture_output=True)
    if archive.returncode != 0:
        raise PeerError(f"git archive {NCNN_TAG} {' '.join(TOOL_FILES)} failed: "
                        f"{archive.stderr.decode(errors='replace').strip()}")
    tar = src / ".tools.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as t:
        t.extractall(src, **_SAFE)
    tar.unlink()
    same = "identical to" if differ == 0 else f"{differ} of {len(tagged)} files differ from"
    return f"tools/quantize from git tag {NCNN_TAG} (its src/ is {same} the sdist's src/)"


def build_host_tools(work: Path, src: Path, tools_from: str, jobs: int) -> dict:
    """ncnn2table and ncnn2int8 built for the host from the same source (g++)."""
    if not tools_from:
        raise PeerError(
            f"--int8 needs ncnn's quantization tools, but the PyPI sdist of ncnn {NCNN_VERSION} "
            f"ships no tools/ directory: pass --ncnn-tools with a Tencent/ncnn git checkout "
            f"(or bare git directory) that has tag {NCNN_TAG}")
    note = add_tools(src, tools_from)
    build = work / "host"
    lib = build / "src" / "libncnn.a"
    key = {"ncnn": NCNN_VERSION, "opts": COMMON + HOST}
    stamp = build / ".peer-stamp"
    if not (lib.is_file() and _stamp_ok(stamp, key)):
        _cmake_build(src, build, [*COMMON, *HOST], jobs, "libncnn.a host", ["ncnn"])
        stamp.write_text(json.dumps(key))
    cxx = need("g++", "apt-get install g++")
    q = src / "tools" / "quantize"
    inc = [f"-I{src / 'src'}", f"-I{build / 'src'}", f"-I{q}"]
    bins = {}
    for name, files, defs in (("ncnn2table", ["ncnn2table.cpp"], ["-DUSE_NCNN_SIMPLEOCV"]),
                              ("ncnn2int8", ["ncnn2int8.cpp"], [])):
        exe = build / "bin" / name
        srcs = [q / f for f in files]
        tkey = dict(key, src=[_file_hash(s) for s in srcs], lib=_file_hash(lib))
        tstamp = build / "bin" / f".{name}-stamp"
        if not (exe.is_file() and _stamp_ok(tstamp, tkey)):
            exe.parent.mkdir(parents=True, exist_ok=True)
            log(f"building host {name}")
            run([cxx, "-O2", "-std=c++11", *defs, *inc, *srcs, lib, "-lpthread", "-o", exe],
                what=f"building {name}")
            tstamp.write_text(json.dumps(tkey))
        bins[name] = exe
    bins["note"] = note
    return bins
