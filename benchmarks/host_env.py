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
    import rvvkit.codegen.kernels.conv.conv2d  # noqa: F401
    import rvvkit.codegen.kernels.gemm.packed  # noqa: F401
    kernel_files = {}
    for rel in ("rvvkit/codegen/kernels/conv/conv2d.py", "rvvkit/codegen/kernels/conv/im2col.py",
                "rvvkit/codegen/kernels/gemm/packed.py", "rvvkit/codegen/kernels/gemm/rvv.py",
                "rvvkit/codegen/kernels/gemm/rvv_lmul.py"):
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


def _thread_run_ns(skip: int) -> Optional[int]:
    """CPU time (ns) this process's threads other than `skip` have run so far, from the
    scheduler's per-thread run time (/proc/self/task/*/schedstat); None where it is missing."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        if int(tid) == skip:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue    # a thread that ended meanwhile
    return total


def threads_quiet(max_wait: float = 0.2, window: float = 0.012, busy: float = 0.1) -> float:
    """Waits until this process's other threads (an engine's pool workers still spinning after
    its last call) use under `busy` of a CPU over `window` s, for at most `max_wait` s; returns
    the seconds waited. Why: onnxruntime's idle workers keep polling for 30-40 ms after a run,
    and on a machine with as many cores as threads the other engine's next calls then share a
    core with them (measured: resnet18 at 2 threads, 0.08 ms calls taking 4 ms, one scheduler
    tick, while onnxruntime's worker ran beside them). The window spans three 4 ms ticks: a
    running thread's time is only brought up to date at a tick or a switch."""
    import threading
    me = threading.get_native_id()
    start = time.perf_counter()
    before = _thread_run_ns(me)
    while before is not None and time.perf_counter() - start < max_wait:
        time.sleep(window)
        now = _thread_run_ns(me)
        if now is None or now - before < busy * window * 1e9:
            break
        before = now
    return time.perf_counter() - start
