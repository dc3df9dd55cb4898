# CMake toolchain file: build rvvkit's generated C and the runner yourself, for riscv64 Linux
# with RVV 1.0, with the GNU cross compilers (Debian: gcc-riscv64-linux-gnu).
#
#   rvvkit inspect model.rvv --source > model.c
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE=/path/to/rvvkit/toolchain/cmake/riscv64-gcc.cmake
#
# The facts are those of toolchain/targets/riscv64-linux-gnu.toml ([flags.gcc], [qemu]); keep
# them in step. Debian's GCC 12 accepts -march=rv64gcv but emits scalar code only: for vector
# code name a GCC 14 or newer (-DRVVKIT_GCC=riscv64-linux-gnu-gcc-14 -DRVVKIT_GXX=...), or use
# riscv64-clang.cmake.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(RVVKIT_TRIPLE "riscv64-linux-gnu" CACHE STRING "GNU triple of the cross compilers")
set(RVVKIT_SYSROOT "/usr/${RVVKIT_TRIPLE}" CACHE PATH "riscv64 libraries and headers")

set(RVVKIT_GCC "${RVVKIT_TRIPLE}-gcc" CACHE STRING "the C cross compiler")
set(RVVKIT_GXX "${RVVKIT_TRIPLE}-g++" CACHE STRING "the C++ cross compiler")

set(CMAKE_C_COMPILER "${RVVKIT_GCC}")
set(CMAKE_CXX_COMPILER "${RVVKIT_GXX}")
set(CMAKE_C_FLAGS_INIT "-march=rv64gcv -mabi=lp64d")
set(CMAKE_CXX_FLAGS_INIT "-march=rv64gcv -mabi=lp64d")

# Debian's cross gcc knows its own sysroot; CMake only needs to look for libraries there.
set(CMAKE_FIND_ROOT_PATH "${RVVKIT_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)

# `ctest` and try_run() run riscv64 programs under QEMU with an RVV 1.0 CPU (VLEN 256).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64 -L "${RVVKIT_SYSROOT}"
    -cpu "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0")
