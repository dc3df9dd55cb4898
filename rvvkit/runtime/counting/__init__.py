"""Exact instruction counts under QEMU: the TCG plugins' builds and their readers. icount.py
(per-thread totals, LMUL-weighted; QEMU 7.2), iclass.py (by class x LMUL x SEW), iprofile.py
(by function of the kernel library), vcount.py (VL-weighted, under the counting QEMU 10 that
scripts/qemu_plugins.sh builds). QemuSession (runtime/qemu.py) is what runs them."""
