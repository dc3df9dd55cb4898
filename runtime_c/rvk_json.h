/* A strict, small JSON reader for the runner: parses the artifact's .rvvkit.check and
 * .rvvkit.meta sections (RFC 8259 grammar, nothing more) into a flat token array, then answers
 * "member K of this object", "elements of this array", "this integer".
 *
 * Why not a library: the runner must build on a board with nothing but a C compiler. Why
 * strict: the text comes from a file that may be damaged or hostile, and the Python reader must
 * accept exactly the same documents. Hence: nesting deeper than RVK_JSON_DEPTH, duplicate keys
 * (Python keeps the last, a naive lookup the first) and objects of more than RVK_JSON_MEMBERS
 * members are refused; every index is checked; the parser never reads past `len`.
 *
 * Tokens are stored in document order; a token's `next` is the index just past its subtree,
 * so skipping a value is O(1). Header-only, valid as C11 and C++11. */
#ifndef RVK_JSON_H
#define RVK_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RVK_JSON_DEPTH 64
#define RVK_JSON_MEMBERS 4096
#define RVK_JSON_MAX_TOKENS (1u << 24)

enum { RVK_J_OBJ = 1, RVK_J_ARR, RVK_J_STR, RVK_J_NUM, RVK_J_LIT };

typedef struct {
    int type;
    uint32_t start, end; /* text span; for strings, inside the quotes */
    uint32_t size;       /* members of an object, elements of an array */
    uint32_t next;       /* index of the token after this value's subtree */
} rvk_jtok;

typedef struct {
    const char *text;
    uint32_t len, pos, ntok, cap;
    rvk_jtok *tok;
    char *err;
    size_t errcap;
} rvk_json;

static int rvk_json_fail(rvk_json *j, const char *what) {
    snprintf(j->err, j->errcap, "invalid JSON at byte %u: %s", (unsigned)j->pos, what);
    return -1;
}

static void rvk_json_ws(rvk_json *j) {
    while (j->pos < j->len && (j->text[j->pos] == ' ' || j->text[j->pos] == '\n' ||
                               j->text[j->pos] == '\r' || j->text[j->pos] == '\t'))
        ++j->pos;
}

static long rvk_json_push(rvk_json *j, int type) {
    if (j->ntok == j->cap) {
        if (j->cap >= RVK_JSON_MAX_TOKENS) return rvk_json_fail(j, "too many values");
        uint32_t cap = j->cap ? 2 * j->cap : 256;
        rvk_jtok *t = (rvk_jtok *)realloc(j->tok, (size_t)cap * sizeof *t);
        if (!t) return rvk_json_fail(j, "out of memory");
        j->tok = t, j->cap = cap;
    }
    rvk_jtok *t = &j->tok[j->ntok];
    t->type = type, t->start = j->pos, t->end = j->pos, t->size = 0, t->next = 0;
    return (long)j->ntok++;
}

static int rvk_json_hex4(const char *s) {
    for (int i = 0; i < 4; ++i)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    return 1;
}

static int rvk_json_string(rvk_json *j) {
    ++j->pos; /* the opening quote */
    long t = rvk_json_push(j, RVK_J_STR);
    if (t < 0) return -1;
    j->tok[t].start = j->pos;
    while (j->pos < j->len) {
        const unsigned char c = (unsigned char)j->text[j->pos];
        if (c == '"') {
            j->tok[t].end = j->pos++;
            j->tok[t].next = j->ntok;
            return 0;
        }
        if (c < 0x20) return rvk_json_fail(j, "control character in a string");
        if (c == '\\') {
            if (j->pos + 1 >= j->len) break;
            const char e = j->text[j->pos + 1];
            if (e == 'u') {
                if (j->len - j->pos < 6 || !rvk_json_hex4(j->text + j->pos + 2))
                    return rvk_json_fail(j, "bad \\u escape");
                j->pos += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) return rvk_json_fail(j, "bad escape");
            j->pos += 2;
            continue;
        }
        ++j->pos;
    }
    return rvk_json_fail(j, "unterminated string");
}

static int rvk_json_digits(rvk_json *j) {
    const uint32_t from = j->pos;
    while (j->pos < j->len && j->text[j->pos] >= '0' && j->text[j->pos] <= '9') ++j->pos;
    return j->pos > from ? 0 : rvk_json_fail(j, "digit expected");
}

static int rvk_json_number(rvk_json *j) {
    long t = rvk_json_push(j, RVK_J_NUM);
    if (t < 0) return -1;
    if (j->text[j->pos] == '-') ++j->pos;
    if (j->pos < j->len && j->text[j->pos] == '0') ++j->pos;
    else if (rvk_json_digits(j)) return -1;
    if (j->pos < j->len && j->text[j->pos] == '.') {
        ++j->pos;
        if (rvk_json_digits(j)) return -1;
    }
    if (j->pos < j->len && (j->text[j->pos] == 'e' || j->text[j->pos] == 'E')) {
        ++j->pos;
        if (j->pos < j->len && (j->text[j->pos] == '+' || j->text[j->pos] == '-')) ++j->pos;
        if (rvk_json_digits(j)) return -1;
    }
    j->tok[t].end = j->pos;
    j->tok[t].next = j->ntok;
    return 0;
}

static int rvk_json_key_equal(const rvk_json *j, uint32_t a, uint32_t b) {
    const rvk_jtok *x = &j->tok[a], *y = &j->tok[b];
    return x->end - x->start == y->end - y->start &&
           memcmp(j->text + x->start, j->text + y->start, x->end - x->start) == 0;
}

static int rvk_json_value(rvk_json *j, int depth);

/* An object or array: `close` is its closing bracket; objects also read "key":. */
static int rvk_json_container(rvk_json *j, int type, char close, int depth) {
    long t = rvk_json_push(j, type);
    if (t < 0) return -1;
    ++j->pos;
    rvk_json_ws(j);
    if (j->pos < j->len && j->text[j->pos] == close) {
        ++j->pos;
        j->tok[t].next = j->ntok;
        return 0;
    }
    for (;;) {
        rvk_json_ws(j);
        if (type == RVK_J_OBJ) {
            if (j->pos >= j->len || j->text[j->pos] != '"') return rvk_json_fail(j, "key expected");
            const uint32_t key = j->ntok;
            if (rvk_json_string(j)) return -1;
            if (j->tok[t].size >= RVK_JSON_MEMBERS) return rvk_json_fail(j, "too many members");
            for (uint32_t k = (uint32_t)t + 1; k < key; k = j->tok[k + 1].next)
                if (rvk_json_key_equal(j, k, key)) return rvk_json_fail(j, "duplicate key");
            rvk_json_ws(j);
            if (j->pos >= j->len || j->text[j->pos] != ':') return rvk_json_fail(j, "':' expected");
            ++j->pos;
        }
        if (rvk_json_value(j, depth + 1)) return -1;
        ++j->tok[t].size;
        rvk_json_ws(j);
        if (j->pos < j->len && j->text[j->pos] == ',') {
            ++j->pos;
            continue;
        }
        if (j->pos < j->len && j->text[j->pos] == close) {
            ++j->pos;
            j->tok[t].next = j->ntok;
            return 0;
        }
        return rvk_json_fail(j, "',' or a closing bracket expected");
    }
}

static int rvk_json_value(rvk_json *j, int depth) {
    if (depth > RVK_JSON_DEPTH) return rvk_json_fail(j, "nested too deeply");
    rvk_json_ws(j);
    if (j->pos >= j->len) return rvk_json_fail(j, "value expected");
    const char c = j->text[j->pos];
    if (c == '{') return rvk_json_container(j, RVK_J_OBJ, '}', depth);
    if (c == '[') return rvk_json_container(j, RVK_J_ARR, ']', depth);
    if (c == '"') return rvk_json_string(j);
    if (c == '-' || (c >= '0' && c <= '9')) return rvk_json_number(j);
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; ++i) {
        const size_t n = strlen(lits[i]);
        if (j->len - j->pos >= n && memcmp(j->text + j->pos, lits[i], n) == 0) {
            long t = rvk_json_push(j, RVK_J_LIT);
            if (t < 0) return -1;
            j->pos += (uint32_t)n;
            j->tok[t].end = j->pos;
            j->tok[t].next = j->ntok;
            return 0;
        }
    }
    return rvk_json_fail(j, "unexpected character");
}

/* Parses text[0..len) whole; 0 on success (free with rvk_json_free), else -1 and a message. */
static int rvk_json_parse(rvk_json *j, const char *text, uint64_t len, char *err, size_t cap) {
    memset(j, 0, sizeof *j);
    j->text = text, j->err = err, j->errcap = cap;
    if (len >= 0x7fffffffu) return rvk_json_fail(j, "document too large");
    j->len = (uint32_t)len;
    if (rvk_json_value(j, 0)) return -1;
    rvk_json_ws(j);
    if (j->pos != j->len) return rvk_json_fail(j, "trailing data after the value");
    return 0;
}

static void rvk_json_free(rvk_json *j) {
    free(j->tok);
    j->tok = NULL;
}

/* The value of member `key` of object token `obj`, or -1 (absent, or `obj` not an object). */
static long rvk_json_get(const rvk_json *j, long obj, const char *key) {
    if (obj < 0 || j->tok[obj].type != RVK_J_OBJ) return -1;
    const size_t n = strlen(key);
    uint32_t k = (uint32_t)obj + 1;
    for (uint32_t i = 0; i < j->tok[obj].size; ++i) {
        const rvk_jtok *t = &j->tok[k];
        if (t->end - t->start == n && memcmp(j->text + t->start, key, n) == 0) return (long)k + 1;
        k = j->tok[k + 1].next;
    }
    return -1;
}

/* Array elements: first with rvk_json_first, then rvk_json_next until i == size. */
static long rvk_json_first(const rvk_json *j, long arr) { (void)j; return arr + 1; }
static long rvk_json_next(const rvk_json *j, long elem) { return (long)j->tok[elem].next; }

static int rvk_json_is(const rvk_json *j, long t, int type) {
    return t >= 0 && j->tok[t].type == type;
}

/* An integer value (no fraction, no exponent) within [lo, hi]: 0, else -1. */
static int rvk_json_int(const rvk_json *j, long t, long long lo, long long hi, long long *out) {
    if (!rvk_json_is(j, t, RVK_J_NUM)) return -1;
    const char *s = j->text + j->tok[t].start, *end = j->text + j->tok[t].end;
    const int neg = *s == '-';
    s += neg;
    unsigned long long v = 0;
    for (; s < end; ++s) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (9223372036854775807ull - (unsigned)(*s - '0')) / 10) return -1;
        v = v * 10 + (unsigned)(*s - '0');
    }
    const long long x = neg ? -(long long)v : (long long)v;
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* Whether string token t is exactly `s` (escapes are not decoded: rvvkit writes none here). */
static int rvk_json_str_is(const rvk_json *j, long t, const char *s) {
    if (!rvk_json_is(j, t, RVK_J_STR)) return 0;
    const size_t n = strlen(s);
    return j->tok[t].end - j->tok[t].start == n && memcmp(j->text + j->tok[t].start, s, n) == 0;
}

#endif /* RVK_JSON_H */
