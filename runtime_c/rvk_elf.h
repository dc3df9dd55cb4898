/* Minimal ELF64 section lookup for the rvvkit runner: just enough to find a named section in
 * an artifact mapped in memory. The artifact is a plain ELF64 little-endian container
 * (rvvkit/artifact/container.py): section headers + .shstrtab, no program headers, nothing executable.
 *
 * Fields are decoded byte by byte (little-endian) rather than through <elf.h> structs, so the
 * reader needs no system ELF header and never makes unaligned or host-endian loads. Every
 * offset is bounds-checked against the file size before use: a truncated or corrupt file gives
 * a message naming what is wrong, never a crash.
 *
 * Header-only (static functions), valid as C11 and C++11; included once, by runner.c. */
#ifndef RVK_ELF_H
#define RVK_ELF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RVK_EHDR_SIZE 64u
#define RVK_SHDR_SIZE 64u
#define RVK_SHT_NOBITS 8u

static uint64_t rvk_le(const unsigned char *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

/* Appends "name, name, ..." of the sections present to buf (for "missing section" errors). */
static void rvk_elf_list(const unsigned char *data, uint64_t shoff, unsigned shnum,
                         const unsigned char *strtab, uint64_t strsize, char *buf, size_t cap) {
    size_t used = strlen(buf);
    for (unsigned i = 1; i < shnum && used + 1 < cap; ++i) {
        uint64_t name = rvk_le(data + shoff + (uint64_t)i * RVK_SHDR_SIZE, 4);
        if (name >= strsize || !memchr(strtab + name, 0, (size_t)(strsize - name))) continue;
        int n = snprintf(buf + used, cap - used, "%s%s", i > 1 ? ", " : "",
                         (const char *)(strtab + name));
        if (n < 0) break;
        used += (size_t)n < cap - used ? (size_t)n : cap - used - 1;
    }
}

/* Finds section `want` in the ELF image data[0..size). On success stores its file offset and
 * size and returns 0; otherwise writes a message (mentioning `source` and `want`) to err and
 * returns -1. */
static int rvk_elf_find(const unsigned char *data, uint64_t size, const char *source,
                        const char *want, uint64_t *off_out, uint64_t *size_out,
                        char *err, size_t errcap) {
    if (size < 4 || memcmp(data, "\177ELF", 4) != 0) {
        snprintf(err, errcap, "not an rvvkit artifact: %s is not an ELF file", source);
        return -1;
    }
    if (size < RVK_EHDR_SIZE) {
        snprintf(err, errcap, "truncated: %s is %llu bytes, smaller than an ELF header; "
                 "cannot find section %s", source, (unsigned long long)size, want);
        return -1;
    }
    if (data[4] != 2 || data[5] != 1) {
        snprintf(err, errcap, "not an rvvkit artifact: %s is not ELF64 little-endian", source);
        return -1;
    }
    const uint64_t shoff = rvk_le(data + 40, 8);
    const unsigned shentsize = (unsigned)rvk_le(data + 58, 2);
    const unsigned shnum = (unsigned)rvk_le(data + 60, 2);
    const unsigned shstrndx = (unsigned)rvk_le(data + 62, 2);
    if (shentsize != RVK_SHDR_SIZE || shnum == 0 || shstrndx >= shnum) {
        snprintf(err, errcap, "not an rvvkit artifact: %s has no usable section table "
                 "(cannot find section %s)", source, want);
        return -1;
    }
    /* The section table is written last, so a cut-off file fails here first. */
    if (shoff > size || (uint64_t)shnum * RVK_SHDR_SIZE > size - shoff) {
        snprintf(err, errcap, "truncated: %s is %llu bytes but its section table ends at byte "
                 "%llu; cannot find section %s", source, (unsigned long long)size,
                 (unsigned long long)(shoff + (uint64_t)shnum * RVK_SHDR_SIZE), want);
        return -1;
    }
    const unsigned char *strhdr = data + shoff + (uint64_t)shstrndx * RVK_SHDR_SIZE;
    const uint64_t stroff = rvk_le(strhdr + 24, 8), strsize = rvk_le(strhdr + 32, 8);
    if (stroff > size || strsize > size - stroff) {
        snprintf(err, errcap, "section .shstrtab is corrupt: it ends past the end of %s "
                 "(%llu bytes); cannot find section %s", source, (unsigned long long)size, want);
        return -1;
    }
    const unsigned char *strtab = data + stroff;
    for (unsigned i = 1; i < shnum; ++i) {
        const unsigned char *sh = data + shoff + (uint64_t)i * RVK_SHDR_SIZE;
        const uint64_t name = rvk_le(sh, 4);
        if (name >= strsize || !memchr(strtab + name, 0, (size_t)(strsize - name)))
            continue; /* a name outside .shstrtab cannot be the one we want */
        if (strcmp((const char *)(strtab + name), want) != 0) continue;
        const uint64_t off = rvk_le(sh + 24, 8);
        const uint64_t len = rvk_le(sh + 4, 4) == RVK_SHT_NOBITS ? 0 : rvk_le(sh + 32, 8);
        if (off > size || len > size - off) {
            snprintf(err, errcap, "section %s is corrupt: it ends at byte %llu, past the end of "
                     "%s (%llu bytes)", want, (unsigned long long)(off + len), source,
                     (unsigned long long)size);
            return -1;
        }
        *off_out = off;
        *size_out = len;
        return 0;
    }
    int n = snprintf(err, errcap, "%s: missing required section %s (present: ", source, want);
    if (n > 0 && (size_t)n < errcap) {
        rvk_elf_list(data, shoff, shnum, strtab, strsize, err, errcap - 1);
        strcat(err, ")");
    }
    return -1;
}

/* Section i (1 <= i < count) of an image whose table rvk_elf_find has accepted: its name (NULL
 * when the name lies outside .shstrtab), offset and size (sizes checked against the file). */
static int rvk_elf_count(const unsigned char *data) { return (int)rvk_le(data + 60, 2); }

static int rvk_elf_section(const unsigned char *data, uint64_t size, int i, const char **name,
                           uint64_t *off, uint64_t *len) {
    const uint64_t shoff = rvk_le(data + 40, 8);
    const unsigned shstrndx = (unsigned)rvk_le(data + 62, 2);
    const unsigned char *strhdr = data + shoff + (uint64_t)shstrndx * RVK_SHDR_SIZE;
    const uint64_t stroff = rvk_le(strhdr + 24, 8), strsize = rvk_le(strhdr + 32, 8);
    const unsigned char *sh = data + shoff + (uint64_t)i * RVK_SHDR_SIZE;
    const uint64_t at = rvk_le(sh, 4);
    *name = at < strsize && memchr(data + stroff + at, 0, (size_t)(strsize - at))
                ? (const char *)(data + stroff + at) : NULL;
    *off = rvk_le(sh + 24, 8);
    *len = rvk_le(sh + 4, 4) == RVK_SHT_NOBITS ? 0 : rvk_le(sh + 32, 8);
    return *off <= size && *len <= size - *off ? 0 : -1;
}

#endif /* RVK_ELF_H */
