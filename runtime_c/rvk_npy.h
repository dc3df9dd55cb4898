/* Reading and writing .npy files (NumPy's format, versions 1.0, 2.0 and 3.0) for the rvvkit
 * runner. Only what the runner exchanges: C order, and the element types of the plan ABI
 * (ONNX codes, rvvkit_abi.h): float32 '<f4', int64 '<i8', int32 '<i4', int8 '|i1', uint8
 * '|u1', bool '|b1', float16 '<f2',
 * float64 '<f8' (little-endian; the targets are).
 *
 * Reading accepts any shape whose element count is what the kernels expect (the kernels know
 * sizes, not shapes); writing produces a 1-D array, which the caller reshapes from the
 * artifact's meta. Header-only, valid as C11 and C++11; included once, by runner.c. */
#ifndef RVK_NPY_H
#define RVK_NPY_H

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RVK_NPY_MAX_HEADER 65536u

/* An element type: its ONNX code, .npy descriptor (quoted as in a header), size, name. */
typedef struct {
    int onnx;
    const char *descr;
    size_t size;
    const char *name;
} rvk_npy_type;

static const rvk_npy_type rvk_npy_types[] = {
    {1, "'<f4'", 4, "float32"}, {7, "'<i8'", 8, "int64"}, {6, "'<i4'", 4, "int32"},
    {3, "'|i1'", 1, "int8"},    {2, "'|u1'", 1, "uint8"}, {9, "'|b1'", 1, "bool"},
    {10, "'<f2'", 2, "float16"}, {11, "'<f8'", 8, "float64"},
};

/* The type of ONNX code `onnx`, or NULL. */
static const rvk_npy_type *rvk_npy_type_of(int onnx) {
    for (size_t i = 0; i < sizeof rvk_npy_types / sizeof rvk_npy_types[0]; ++i)
        if (rvk_npy_types[i].onnx == onnx) return &rvk_npy_types[i];
    return NULL;
}

/* The text after `'key':` in a header dict, or NULL. */
static const char *rvk_npy_value(const char *hdr, const char *key) {
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(hdr, quoted);
    if (!p) return NULL;
    p += strlen(quoted);
    while (isspace((unsigned char)*p)) ++p;
    if (*p != ':') return NULL;
    ++p;
    while (isspace((unsigned char)*p)) ++p;
    return p;
}

/* Element count from a shape tuple "(d0, d1, )" ("()" is a scalar: 1); -1 if malformed. */
static long long rvk_npy_count(const char *p) {
    if (*p != '(') return -1;
    long long count = 1;
    for (++p;;) {
        while (isspace((unsigned char)*p) || *p == ',') ++p;
        if (*p == ')') return count;
        if (!isdigit((unsigned char)*p)) return -1;
        char *end = NULL;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (errno || d < 0 || (d > 0 && count > (1LL << 40) / d)) return -1;
        count *= d;
        p = end;
    }
}

/* Reads `path` into a new 64-byte aligned buffer of exactly `expect` elements of the type
 * with ONNX code `onnx` (*out, free() it). Returns 0, or -1 with a message in err. */
static int rvk_npy_read(const char *path, long long expect, int onnx, void **out, char *err,
                        size_t cap) {
    unsigned char pre[12];
    char *hdr = NULL;
    void *buf = NULL;
    const rvk_npy_type *type = rvk_npy_type_of(onnx);
    if (!type) {
        snprintf(err, cap, "input %s: the model declares an unknown element type %d", path, onnx);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot open input %s: %s", path, strerror(errno));
        return -1;
    }
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\223NUMPY", 6) != 0) {
        snprintf(err, cap, "input %s is not a .npy file (bad magic)", path);
        goto fail;
    }
    {
        unsigned long hlen = pre[8] | ((unsigned long)pre[9] << 8);
        if (pre[6] == 2 || pre[6] == 3) { /* 2.0/3.0: 4-byte header length */
            if (fread(pre + 10, 1, 2, f) != 2) {
                snprintf(err, cap, "input %s: truncated .npy header", path);
                goto fail;
            }
            hlen |= ((unsigned long)pre[10] << 16) | ((unsigned long)pre[11] << 24);
        } else if (pre[6] != 1) {
            snprintf(err, cap, "input %s: unsupported .npy version %u.%u", path, pre[6], pre[7]);
            goto fail;
        }
        if (hlen == 0 || hlen > RVK_NPY_MAX_HEADER) {
            snprintf(err, cap, "input %s: implausible .npy header length %lu", path, hlen);
            goto fail;
        }
        hdr = (char *)malloc(hlen + 1);
        if (!hdr || fread(hdr, 1, hlen, f) != hlen) {
            snprintf(err, cap, "input %s: truncated .npy header", path);
            goto fail;
        }
        hdr[hlen] = 0;
    }
    {
        const char *descr = rvk_npy_value(hdr, "descr");
        const char *order = rvk_npy_value(hdr, "fortran_order");
        const char *shape = rvk_npy_value(hdr, "shape");
        if (!descr || !order || !shape) {
            snprintf(err, cap, "input %s: .npy header lacks descr/fortran_order/shape", path);
            goto fail;
        }
        if (strncmp(descr, type->descr, 5) != 0) {
            snprintf(err, cap, "input %s: dtype %.8s is not %s %s (save it with "
                     "numpy.save(path, array.astype(numpy.%s)))", path, descr, type->name,
                     type->descr, type->name);
            goto fail;
        }
        if (strncmp(order, "False", 5) != 0) {
            snprintf(err, cap, "input %s is in Fortran order; save a C-contiguous array", path);
            goto fail;
        }
        long long count = rvk_npy_count(shape);
        if (count < 0) {
            snprintf(err, cap, "input %s: malformed shape in .npy header", path);
            goto fail;
        }
        if (count != expect) {
            snprintf(err, cap, "input %s holds %lld %s values but the model expects %lld",
                     path, count, type->name, expect);
            goto fail;
        }
    }
    {
        void *mem = NULL;
        size_t bytes = (size_t)expect * type->size;
        if (posix_memalign(&mem, 64, bytes ? bytes : 64) != 0) {
            snprintf(err, cap, "input %s: out of memory (%zu bytes)", path, bytes);
            goto fail;
        }
        buf = mem;
        if (fread(buf, 1, bytes, f) != bytes) {
            snprintf(err, cap, "input %s: truncated data (expected %zu bytes after the header)",
                     path, bytes);
            goto fail;
        }
    }
    free(hdr);
    fclose(f);
    *out = buf;
    return 0;
fail:
    free(buf);
    free(hdr);
    fclose(f);
    return -1;
}

/* Writes n elements of ONNX type `onnx` as a 1-D .npy (version 1.0) to `path`: to a temporary
 * name first, then renamed, so a reader never sees a partial file. Returns 0, or -1 with err. */
static int rvk_npy_write(const char *path, const void *data, long long n, int onnx, char *err,
                         size_t cap) {
    char hdr[128], tmp[4096];
    const rvk_npy_type *type = rvk_npy_type_of(onnx);
    if (!type) {
        snprintf(err, cap, "output %s: the model declares an unknown element type %d", path,
                 onnx);
        return -1;
    }
    int len = snprintf(hdr, sizeof hdr,
                       "{'descr': %s, 'fortran_order': False, 'shape': (%lld,), }", type->descr,
                       n);
    /* NumPy pads the header with spaces so that the data starts 64-byte aligned. */
    int total = (10 + len + 1 + 63) / 64 * 64;
    memset(hdr + len, ' ', (size_t)(total - 10 - len - 1));
    hdr[total - 10 - 1] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    pre[8] = (unsigned char)((total - 10) & 0xff);
    pre[9] = (unsigned char)((total - 10) >> 8);
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, cap, "output path too long: %s", path);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, cap, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t bytes = (size_t)n * type->size;
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)(total - 10), f) ==
             (size_t)(total - 10) && fwrite(data, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

#endif /* RVK_NPY_H */
