"""The CUDA form of kernels that have no parallel CUDA generator yet: the C kernel's portable
body, run by one GPU thread. Correct on every path (the same C statements the host runs), slow
on a large tensor; kinds registered here are listed by `SERIAL_KINDS` so that a report (and
`rvvkit inspect`) can say which steps of a model run this way.

What a C kernel must keep to, to be usable here (the kernel families that register a kind with
`serial_generator` do): support helpers it needs on the device carry a key starting "hd_" and
are declared `static RVK_HD inline ...` (RVK_HD is `__host__ __device__` in the CUDA unit,
empty in C); RVV code sits in `guarded()` blocks (dropped here); a status kernel reports with
`RVK_DATA_ERROR;` and ends with `RVK_DATA_OK;` (macros both dialects define)."""
from __future__ import annotations

import hashlib
from typing import Dict, List, Set

from ..kernel import Kernel
from ..rvv import GUARD
from .registry import CudaKernel, generator

SERIAL_KINDS: Set[str] = set()
HD_PREFIX = "hd_"


def portable(body: str) -> str:
    """`body` with every RVV branch of a guarded() block removed (its #else branch kept)."""
    out: List[str] = []
    stack: List[str] = []   # per open #if: "rvv" (skipping), "keep-else", "other"
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("#if"):
            stack.append("rvv" if text == GUARD else "other")
            if stack[-1] == "rvv":
                continue
        elif text.startswith("#else") and stack and stack[-1] in ("rvv", "keep-else"):
            stack[-1] = "keep-else"
            continue
        elif text.startswith("#endif") and stack:
            if stack.pop() in ("rvv", "keep-else"):
                continue
        if "rvv" in stack:
            continue
        out.append(line)
    return "\n".join(out)


def _device_support(kernel: Kernel) -> Dict[str, str]:
    return {k: v for k, v in kernel.support.items() if k.startswith(HD_PREFIX)}


def _device_params(kernel: Kernel, workspace: bool):
    """(declarations, names) of the __global__ function's parameters: the kernel's pointers,
    and `ws` when `workspace`."""
    params = [(f"const {p.ctype} *__restrict__ " if p.const else f"{p.ctype} *__restrict__ ")
              + p.name for p in kernel.params]
    names = [p.name for p in kernel.params]
    if workspace:
        params.append("float *__restrict__ ws")
        names.append("ws")
    return params, names


def _device_name(form: str, spec: dict, kernel: Kernel, params, body: str) -> str:
    """A name that identifies the function's text (support keys must)."""
    text_key = hashlib.sha1((spec["op"] + ",".join(params) + body).encode()).hexdigest()[:12]
    return f"rvk_cu_{form}_{kernel.hint}_{text_key}"


def serial(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread runs the C body (spec["op"] names the kind; the body is the C kernel's)."""
    params, names = _device_params(kernel, bool(kernel.workspace))
    body = portable(kernel.prologue + kernel.body)
    name = _device_name("serial", spec, kernel, params, body)
    fn = (f"/* {spec['op']}: the C kernel run by one thread (no parallel CUDA form yet) */\n"
          f"__global__ void {name}({', '.join(params) or 'void'}) {{\n{body.rstrip()}\n}}\n")
    support = dict(_device_support(kernel))
    support[name] = fn
    launch = f"    RVK_LAUNCH({name}, dim3(1), dim3(1), ({', '.join(names)}));"
    return CudaKernel(launch, support)


def serial_generator(*kinds: str) -> None:
    """Register `serial` as the CUDA form of each kernel kind in `kinds`."""
    for kind in kinds:
        generator(kind)(serial)
        SERIAL_KINDS.add(kind)


# floats of per-thread scratch a part may have in the parts form (more: the serial form)
PART_SCRATCH = 4096


def parts(spec: dict, kernel: Kernel) -> CudaKernel:
    """A split C kernel (its body over parts rvk_lo <= u < rvk_hi) with one GPU thread per
    part: the parts are independent by the split's contract, so this is the C kernel's own
    parallelism; an unsplit kernel runs serially. A shared prologue (the parts only read what
    it wrote in the workspace) runs once, by one thread, into the step's scratch, which the
    parts then read; any other prologue, or more scratch than PART_SCRATCH, runs serially."""
    shared = bool(kernel.prologue) and kernel.prologue_shared
    if kernel.split is None or (kernel.prologue and not shared) or \
            (not shared and kernel.workspace > PART_SCRATCH):
        return serial(spec, kernel)
    params, names = _device_params(kernel, shared)   # else the workspace is the thread's own
    units = kernel.split.units
    body = portable(kernel.body)
    # the C kernel's workspace is per thread: here, an array of the thread's own
    scratch = f"    float rvk_scratch[{kernel.workspace}];\n    float *ws = rvk_scratch;\n" \
        if kernel.workspace and not shared else ""
    # the name covers the parts' count and the scratch, which are not in the C body: two
    # kernels of one body over different counts of rows (a query and a key head norm) are
    # two functions, not one that the second launch would run past its rows
    name = _device_name("parts", spec, kernel, params, f"/* {units} */\n{scratch}{body}")
    fn = (f"/* {spec['op']}: the C kernel's {units} parts, one thread each */\n"
          f"__global__ void {name}({', '.join(params)}) {{\n"
          f"    const int rvk_lo = (int)(blockIdx.x * blockDim.x + threadIdx.x);\n"
          f"    const int rvk_hi = rvk_lo + 1;\n"
          f"    if (rvk_lo >= {units}) return;\n{scratch}{body.rstrip()}\n}}\n")
    support = dict(_device_support(kernel))
    support[name] = fn
    threads = 64
    args = ", ".join(names)
    launch = f"    RVK_LAUNCH({name}, dim3({-(-units // threads)}), dim3({threads}), ({args}));"
    if shared:
        pro = portable(kernel.prologue)
        pname = _device_name("prologue", spec, kernel, params, pro)
        support[pname] = (f"/* {spec['op']}: the C kernel's prologue, once for all parts */\n"
                          f"__global__ void {pname}({', '.join(params)}) {{\n"
                          f"{pro.rstrip()}\n}}\n")
        launch = f"    RVK_LAUNCH({pname}, dim3(1), dim3(1), ({args}));\n" + launch
    elif kernel.workspace:   # the plan's scratch is not used: each thread has its own
        launch = "    (void)ws;\n" + launch
    return CudaKernel(launch, support)


def parts_generator(*kinds: str) -> None:
    """Register `parts` as the CUDA form of each kernel kind in `kinds`."""
    for kind in kinds:
        generator(kind)(parts)
