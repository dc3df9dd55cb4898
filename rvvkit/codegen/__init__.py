"""The code generator: a planned graph to one C translation unit (and its CUDA twin).

- `plan.py`: the steps, their kernels and arguments, the weights blob; `memory.py` places every
  buffer in one arena; `parallel.py` splits kernels into parts for the thread pool;
- `lower/`: each node to the kernel that computes it; `kernels/`: the C and RVV emitters, one
  folder per family; `kernel.py`: what a kernel is (parameters, body, spec);
- `c.py`: the translation unit (kernels, the plan tables and entry points of the ABI);
  `cuda/`: the same plan in the CUDA dialect;
- `rvv.py`, `loops.py`, `cfmt.py`, `half.py`: RVV intrinsic spellings, loop nests, C literals
  and indentation, float16 conversions.

It renders source only: compiling and running it is rvvkit.jit's and rvvkit.runtime's."""
