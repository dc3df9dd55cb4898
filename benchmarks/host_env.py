"""What bench_host.py measured, where, and how busy the machine was: the environment record
(CPU, compiler, versions, git state, hashes of the kernel code) and other processes' load."""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional

ROOT = Path(__file__).resolve().parent.parent
try:
    import rvvkit
except ImportError:  # not installed: use the checkout this script lives in
    sys.path.insert(0, str(ROOT))
    import rvvkit
PKG_ROOT = Path(rvvkit.__file__).resolve().parent.parent  # the rvvkit actually measured


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> Dict:
    import onnxruntime as ort
    from rvvkit.jit import compile_flags, resolve_compiler
    comp = resolve_compiler(target="host")
    # Import the kernel modules now, so the hashes below describe the code that is measured
    # even while someone edits those files during a long run.
    import rvvkit.codegen.kernels.conv  # noqa: F401
    import rvvkit.codegen.kernels.gemm  # noqa: F401
    kernel_files = {}
    for rel in ("rvvkit/codegen/kernels/conv.py", "rvvkit/codegen/kernels/conv_input.py",
                "rvvkit/codegen/kernels/gemm.py", "rvvkit/codegen/kernels/gemm_rvv.py"):
        p = PKG_ROOT / rel
        if p.exists():
            kernel_files[rel] = {
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest()[:16],
                "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p.stat().st_mtime))}
    return {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "machine": platform.machine(), "cpu": _cpu_model(),
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "rvvkit": rvvkit.__version__, "onnxruntime": ort.__version__,
        "compiler": comp.version, "cflags": " ".join(compile_flags(comp)),
        "rvvkit_path": str(PKG_ROOT),
        "git_head": _git("rev-parse", "--short", "HEAD"),
        "git_status": _git("status", "--porcelain").splitlines(),
        "kernel_files": kernel_files,
    }



# --------------------------------------------------------------------------------------------
# Other processes' load on the machine

def _cpu_times():
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    return sum(vals), idle


def busy_fraction(interval: float = 1.0) -> Optional[float]:
    """Fraction of all CPUs busy over `interval` seconds while this process sleeps: the load
    other processes put on the machine (None where /proc/stat is unavailable)."""
    try:
        t0, i0 = _cpu_times()
        time.sleep(interval)
        t1, i1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(max_wait: float, threshold: float = 0.15) -> Optional[float]:
    """Wait (up to max_wait s) until other processes keep the CPUs < threshold busy."""
    start = time.monotonic()
    busy, told = busy_fraction(), -1e9
    while busy is not None and busy > threshold and time.monotonic() - start < max_wait:
        if time.monotonic() - told >= 15:
            say(f"machine {100 * busy:.0f}% busy with other work; waiting up to "
                f"{max_wait - (time.monotonic() - start):.0f} s more for it to calm down")
            told = time.monotonic()
        busy = busy_fraction(2.0)
    return busy

