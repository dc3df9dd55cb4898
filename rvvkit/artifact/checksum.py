"""rvk64: the fast section checksum the C runner verifies (runtime_c/rvk_hash.h is its twin).

sha256 (which the Python reader checks) costs a board about 15 instructions per byte, seconds
for a large model under QEMU; rvk64 costs about one per byte and vectorises. It detects
corruption (bit flips, truncation, sections overlapping or moved), not deliberate tampering:
that is what signatures are for (rvvkit/artifact/signing.py).

Definition, over the bytes zero-padded to whole little-endian 64-bit words w[0..m):
    t_i = (w_i XOR (i*K1 + K0)) * K2 ;  t_i ^= t_i >> 31      (all mod 2^64)
    h   = sum of t_i ;  h ^= n_bytes ;  h *= K3 ;  h ^= h >> 29
Both steps of t_i are bijections of w_i, so a change confined to one word always changes h;
the index term makes moved or swapped words change it too. Written as 16 hex digits."""
from __future__ import annotations

import numpy as np

K0 = 0x9E3779B97F4A7C15
K1 = 0xBF58476D1CE4E5B9
K2 = 0x94D049BB133111EB
K3 = 0xD6E8FEB86659FD93
_CHUNK = 1 << 20  # words per numpy pass: bounds the temporaries to a few MiB
_M64 = (1 << 64) - 1


def rvk64(data) -> str:
    raw = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    n = raw.size
    whole = n // 8 * 8
    total = 0
    with np.errstate(over="ignore"):
        words = raw[:whole].view("<u8")
        for start in range(0, words.size, _CHUNK):
            total += _sum_terms(words[start:start + _CHUNK], start)
        if whole < n:
            tail = np.zeros(8, np.uint8)
            tail[:n - whole] = raw[whole:]
            total += _sum_terms(tail.view("<u8"), whole // 8)
    h = (total & _M64) ^ n
    h = (h * K3) & _M64
    h ^= h >> 29
    return f"{h:016x}"


def _sum_terms(words: np.ndarray, first: int) -> int:
    idx = np.arange(first, first + words.size, dtype=np.uint64)
    t = (words ^ (idx * np.uint64(K1) + np.uint64(K0))) * np.uint64(K2)
    t ^= t >> np.uint64(31)
    return int(t.sum(dtype=np.uint64))
