# CMake toolchain file: build rvvkit's generated C and the runner yourself, for riscv64 Linux
# with RVV 1.0, with clang (RVV intrinsics and auto-vectorisation) and lld, against the
# Debian riscv64 sysroot (libc6-dev-riscv64-cross) and GCC's riscv64 runtime files.
#
#   rvvkit inspect model.rvv --source > model.c
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=/path/to/rvvkit/toolchain/cmake/riscv64-clang.cmake \
#         [-DRVVKIT_CLANG=clang-18]
#
# The facts are those of toolchain/targets/riscv64-linux-gnu.toml ([flags.clang], [qemu]);
# keep them in step.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(RVVKIT_TRIPLE "riscv64-linux-gnu" CACHE STRING "target triple")
set(RVVKIT_CLANG "clang-16" CACHE STRING "the clang driver (clang-16, clang-18, clang, ...)")
set(RVVKIT_SYSROOT "/usr/${RVVKIT_TRIPLE}" CACHE PATH "riscv64 libraries and headers")

set(CMAKE_C_COMPILER "${RVVKIT_CLANG}")
set(CMAKE_CXX_COMPILER "${RVVKIT_CLANG}")
set(CMAKE_C_COMPILER_TARGET "${RVVKIT_TRIPLE}")
set(CMAKE_CXX_COMPILER_TARGET "${RVVKIT_TRIPLE}")
set(CMAKE_C_FLAGS_INIT "-march=rv64gcv -mabi=lp64d")
set(CMAKE_CXX_FLAGS_INIT "-march=rv64gcv -mabi=lp64d")
# The host's GNU ld cannot link riscv64 objects.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-fuse-ld=lld")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-fuse-ld=lld")

set(CMAKE_FIND_ROOT_PATH "${RVVKIT_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

# `ctest` and try_run() run riscv64 programs under QEMU with an RVV 1.0 CPU (VLEN 256).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -L "${RVVKIT_SYSROOT}"
    -cpu "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0")
