/* rvk64: the runner's section checksum; rvvkit/artifact/checksum.py defines it and is its twin.
 *
 * About one instruction per byte (sha256 costs ~15): the runner can check every section of a
 * large model at start-up, even under QEMU. It detects corruption, not tampering (signatures
 * do that, on the host). The sum over words has no loop-carried dependency but the addition,
 * so compilers vectorise it.
 *
 * Header-only, valid as C11 and C++11; included by rvk_artifact.h. */
#ifndef RVK_HASH_H
#define RVK_HASH_H

#include <stdint.h>
#include <string.h>

#define RVK_K0 0x9E3779B97F4A7C15ull
#define RVK_K1 0xBF58476D1CE4E5B9ull
#define RVK_K2 0x94D049BB133111EBull
#define RVK_K3 0xD6E8FEB86659FD93ull

static uint64_t rvk_hash_term(uint64_t w, uint64_t i) {
    uint64_t t = (w ^ (i * RVK_K1 + RVK_K0)) * RVK_K2;
    return t ^ (t >> 31);
}

static uint64_t rvk64(const unsigned char *data, uint64_t n) {
    const uint64_t words = n / 8;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < words; ++i) {
        uint64_t w;
        memcpy(&w, data + 8 * i, 8); /* unaligned-safe; little-endian targets only */
        sum += rvk_hash_term(w, i);
    }
    if (n % 8) {
        uint64_t w = 0;
        memcpy(&w, data + 8 * words, (size_t)(n % 8));
        sum += rvk_hash_term(w, words);
    }
    uint64_t h = (sum ^ n) * RVK_K3;
    return h ^ (h >> 29);
}

#endif /* RVK_HASH_H */
