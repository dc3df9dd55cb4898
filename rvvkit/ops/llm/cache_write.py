"""rvvkit.CacheWrite: a key/value cache that grows by Concat (transformers' and optimum's
decoders: present = Concat(past, new) on the sequence axis) kept as session state instead.
passes/kv_cache.py puts it in place of the Concat: the cache is one buffer of the bound's
positions, the new keys or values go to positions pos .. pos + S - 1 and nothing else moves.

pos comes from the attention mask the model already takes: its count of ones (the live
length, int64 [batch], counted once per run for every cache and attention) less the S new
tokens; the same mask gives the positions past the live length no weight. Those positions must still hold numbers, not whatever the session's memory held
before (a NaN there poisons every score), so a write at position 0, which starts a sequence,
clears the whole cache row first."""
from __future__ import annotations

import numpy as np

from ..registry import F32, bad, in_shape, register

CACHE_WRITE = "rvvkit.CacheWrite"
I64 = np.dtype(np.int64)


def _eval(node, xs):
    cache = np.array(xs[0], np.float32)
    new, live = np.asarray(xs[1], np.float32), np.asarray(xs[2])
    seq, bound = new.shape[2], cache.shape[2]
    for b in range(cache.shape[0]):
        pos = int(live[b]) - seq
        if pos < 0 or pos + seq > bound:
            raise ValueError(f"{node.name}: positions {pos}..{pos + seq - 1} outside the cache "
                             f"of {bound}")
        if pos == 0:
            cache[b] = 0.0
        cache[b, :, pos:pos + seq] = new[b]
    return [cache]


@register(CACHE_WRITE, _eval, dtypes=("float32", "int64"), in_place=True,
          data_error="the new tokens' positions (from the attention mask's ones) fall "
                     "outside the cache bound (--max-seq)")
def _cache_write(node, g):
    cache, new, live = (in_shape(node, g, i) for i in range(3))
    if len(cache) != 4 or len(new) != 4 or new[:2] != cache[:2] or new[3] != cache[3] or \
            new[2] > cache[2]:
        raise bad(node, f"new {list(new)} does not fit the cache {list(cache)} "
                        "([batch, heads, positions, head] both)")
    if tuple(live) != (cache[0],) or g.t(node.inputs[2]).dtype != I64:
        raise bad(node, f"live length {list(live)}: int64 [{cache[0]}] expected")
    node.attrs.update(seq=int(new[2]), max_seq=int(cache[2]))
    return [(tuple(cache), F32)]
