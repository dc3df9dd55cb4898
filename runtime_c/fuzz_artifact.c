/* Fuzz driver for the runner's artifact reader (rvk_artifact.h), meant to be built with
 * AddressSanitizer and UndefinedBehaviorSanitizer:
 *
 *   cc -std=c11 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
 *      fuzz_artifact.c -o fuzz_artifact
 *   ./fuzz_artifact SEED.rvv ITERATIONS [RNG_SEED]
 *
 * Each iteration mutates a copy of a real artifact and reads it, half the time without the
 * checksums so that damaged meta JSON reaches the parser and the fact checks (with them, most
 * damage stops at the first checksum). Mutations: bit flips, bytes set to values that matter
 * to JSON and ELF, digit runs rewritten inside the meta, ranges deleted or duplicated (sizes
 * shift), truncation. No libFuzzer needed: a deterministic xorshift PRNG, so a failing run is
 * reproducible from its seed. A sanitizer report aborts the process (nonzero exit); success
 * prints how many inputs were read, accepted and refused.
 *
 * Valid as C11 and C++11. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvk_artifact.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* A position inside the meta section when there is one (where the parser is), else anywhere. */
static size_t meta_pos(const unsigned char *d, size_t n) {
    static const char key[] = "{\n \"abi_version\"";
    for (size_t i = 0; i + sizeof key - 1 < n && i < 4096; ++i)
        if (!memcmp(d + i, key, sizeof key - 1)) {
            size_t len = n - i < 65536 ? n - i : 65536;
            return i + below(len);
        }
    return below(n);
}

static size_t mutate(unsigned char *d, size_t n, size_t cap) {
    static const unsigned char vals[] = {0, 0xff, '"', '{', '}', '[', ']', ',', ':', '-', '9',
                                         '\\', 'e', '.', 0x7f, 0x80};
    const int rounds = 1 + (int)below(4);
    for (int r = 0; r < rounds && n > 0; ++r) {
        switch (below(6)) {
        case 0: d[below(n)] ^= (unsigned char)(1u << below(8)); break;
        case 1: d[meta_pos(d, n)] = vals[below(sizeof vals)]; break;
        case 2: { /* rewrite a run of digits in the meta: sizes, shapes, offsets */
            size_t p = meta_pos(d, n);
            while (p < n && !(d[p] >= '0' && d[p] <= '9')) ++p;
            for (; p < n && d[p] >= '0' && d[p] <= '9'; ++p) d[p] = (unsigned char)('0' + below(10));
            break;
        }
        case 3: { /* delete a range */
            size_t p = below(n), len = 1 + below(64);
            if (len > n - p) len = n - p;
            memmove(d + p, d + p + len, n - p - len);
            n -= len;
            break;
        }
        case 4: { /* duplicate a range */
            size_t p = below(n), len = 1 + below(64);
            if (len > n - p) len = n - p;
            if (n + len > cap) break;
            memmove(d + p + len, d + p, n - p);
            n += len;
            break;
        }
        default: n = below(n + 1); break; /* truncate */
        }
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: fuzz_artifact SEED.rvv ITERATIONS [RNG_SEED]\n", stderr);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    const size_t cap = (size_t)size + 4096;
    unsigned char *seed = (unsigned char *)malloc(cap), *buf = (unsigned char *)malloc(cap);
    if (!seed || !buf || fread(seed, 1, (size_t)size, f) != (size_t)size) return 2;
    fclose(f);
    const long iterations = strtol(argv[2], NULL, 10);
    if (argc > 3) rng_state ^= strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ull;
    static rvk_facts facts;
    char err[8192];
    long accepted = 0;
    if (rvk_artifact_read(seed, (uint64_t)size, "seed", 1, &facts, err, sizeof err) != 0) {
        fprintf(stderr, "the seed artifact itself is refused: %s\n", err);
        free(seed);
        free(buf);
        return 1;
    }
    for (long it = 0; it < iterations; ++it) {
        memcpy(buf, seed, (size_t)size);
        const size_t n = mutate(buf, (size_t)size, cap);
        /* an exact-size heap copy: ASan sees any read past the end of the file */
        unsigned char *exact = (unsigned char *)malloc(n ? n : 1);
        if (!exact) return 2;
        memcpy(exact, buf, n);
        err[0] = 0;
        if (rvk_artifact_read(exact, n, "fuzz", (int)(it & 1), &facts, err, sizeof err) == 0)
            ++accepted;
        else if (!err[0])
            fprintf(stderr, "iteration %ld: refused without a message\n", it), exit(1);
        free(exact);
    }
    printf("fuzz_artifact: %ld inputs, %ld accepted, %ld refused\n", iterations, accepted,
           iterations - accepted);
    free(seed);
    free(buf);
    return 0;
}
