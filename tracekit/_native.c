/* tracekit._native: the compiled parts of tracekit, each with a pure-Python twin that gives the
 * same results (used where this module is not built: no C compiler at install).
 *
 * kineto_scan: the Kineto reader's column scanner (tracekit/adapters/kineto/scanned.py); the args
 *   fields it reads into columns are those of kineto/mapping.py's ARGS (tests/adapters/test_kineto_mapping.py).
 * kineto_flows: its flow rule (kineto/flows.py, `Flows.rows`) on the scanned columns.
 * nest: events.depth / parent_id by the rule of tracekit/nesting.py's `_nest_track`.
 * take_strings, take_spans: that reader's gather of its text columns by table (scanned.py's
 *   `_take_text`; its twin is Arrow's take, compared in tests/adapters/test_kineto_scan.py).
 *
 * kineto_scan(chunk) reads a JSON array of trace events, as the Python reader cuts them, into
 * columns (Arrow buffers as bytes objects), or returns None when the chunk is not in the plain
 * shape that the Python rules convert column-wise.  It is strict on purpose: anything unusual
 * (a key outside the Chrome-trace event fields, an id or args field of another type, a ts with
 * sub-ns digits or an exponent, a phase it does not route, a B/E pair, a missing or negative
 * dur on an 'X' event, invalid UTF-8, an id beyond int64, any JSON error) makes it return None,
 * having changed nothing, and the chunk goes the Python way.  So it never has rules of its own:
 * for every chunk it accepts, its columns equal what the Python reader derives
 * (tests/adapters/test_kineto_scan.py converts every real trace both ways and compares the tables).
 *
 * Returned tuple: (n, ph, i64_columns, i64_validity, str_columns)
 *   ph            bytes[n], the phase letter of each event
 *   i64_columns   tuple of bytes (int64[n] each), in the order of I64_NAMES below
 *   i64_validity  tuple of bytes (Arrow validity bitmaps) or None where all are valid
 *   str_columns   tuple of (offsets int32[n+1], data, validity bitmap) for name, cat
 * ts/dur are exact int64 ns (µs text with up to 3 decimals); ts is NULL on 'M' events; dur is
 * set on 'X' events only.  span_start/span_end: the event's byte range in the chunk;
 * args_start/args_end: the byte range of its args object's raw text (NULL when absent, null or
 * "{}"; not copied: `take_spans` copies each group's args from the chunk once, as it gathers).
 * A pid or tid given as text is NULL, with text_pid_tid = 1 (those rows are converted from
 * their decoded text, as the Python path does).
 * The GIL is released while scanning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

enum {
    C_TS, C_DUR, C_PID, C_TID, C_ID, C_DEVICE, C_CONTEXT, C_STREAM, C_CORR, C_EXT, C_EXTLC,
    C_REGS, C_SHARED, C_GX, C_GY, C_GZ, C_BX, C_BY, C_BZ, C_SPAN0, C_SPAN1, C_TEXT, C_ARGS0, C_ARGS1,
    N_I64
};
static const char *I64_NAMES[N_I64] = {
    "ts", "dur", "pid", "tid", "id", "device", "context", "stream", "correlation",
    "external_id", "external_id_lc", "registers", "shared", "grid_x", "grid_y", "grid_z",
    "block_x", "block_y", "block_z", "span_start", "span_end", "text_pid_tid", "args_start", "args_end"};
enum { S_NAME, S_CAT, N_STR };
static const char *STR_NAMES[N_STR] = {"name", "cat"};

#define TS_LIMIT ((int64_t)1 << 62)
#define MAX_DEPTH 256

typedef struct { unsigned char *p; size_t len, cap; } Buf;

typedef struct {
    size_t n, cap;
    int64_t *i64[N_I64];
    unsigned char *valid[N_I64];  /* one byte per row, packed at the end */
    unsigned char *ph;
    int32_t *off[N_STR];
    unsigned char *svalid[N_STR];
    Buf data[N_STR];
    size_t zeroed;  /* rows below it are cleared (zero_rows) */
    int nomem;
} Cols;

typedef struct { const unsigned char *p, *end, *base; } Cur;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) return 0;
    b->p = q; b->cap = cap;
    return 1;
}

static int cols_grow(Cols *c) {
    size_t cap = c->cap ? c->cap * 2 : 4096;
    for (int k = 0; k < N_I64; k++) {
        void *q = realloc(c->i64[k], cap * sizeof(int64_t));
        if (!q) return 0;
        c->i64[k] = q;
        q = realloc(c->valid[k], cap);
        if (!q) return 0;
        c->valid[k] = q;
    }
    void *q = realloc(c->ph, cap);
    if (!q) return 0;
    c->ph = q;
    for (int k = 0; k < N_STR; k++) {
        q = realloc(c->off[k], (cap + 1) * sizeof(int32_t));
        if (!q) return 0;
        c->off[k] = q;
        q = realloc(c->svalid[k], cap);
        if (!q) return 0;
        c->svalid[k] = q;
    }
    c->cap = cap;
    return 1;
}

/* Rows from c->zeroed on get their values and validity cleared, a block of ZERO_ROWS at a time
 * (column by column: a row's value defaults to 0 until set; clearing each row's 47 slots, one
 * in each array, took a fifth of the scanner's own time). */
#define ZERO_ROWS 1024
static void zero_rows(Cols *c) {
    size_t from = c->zeroed, to = from + ZERO_ROWS < c->cap ? from + ZERO_ROWS : c->cap;
    for (int k = 0; k < N_I64; k++) {
        memset(c->i64[k] + from, 0, (to - from) * sizeof(int64_t));
        memset(c->valid[k] + from, 0, to - from);
    }
    for (int k = 0; k < N_STR; k++) memset(c->svalid[k] + from, 0, to - from);
    c->zeroed = to;
}

static void cols_free(Cols *c) {
    for (int k = 0; k < N_I64; k++) { free(c->i64[k]); free(c->valid[k]); }
    free(c->ph);
    for (int k = 0; k < N_STR; k++) { free(c->off[k]); free(c->svalid[k]); free(c->data[k].p); }
}

static inline void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static inline int lit(Cur *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
    c->p += n;
    return 1;
}

/* One UTF-8 sequence starting at p (p[0] >= 0x80), strict (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF).  Returns its length, 0 if invalid. */
static int utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned char a = p[0];
    if (a >= 0xC2 && a <= 0xDF) {
        return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (a >= 0xE0 && a <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (a == 0xE0 && p[1] < 0xA0) return 0;
        if (a == 0xED && p[1] >= 0xA0) return 0;
        return 3;
    }
    if (a >= 0xF0 && a <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if (a == 0xF0 && p[1] < 0x90) return 0;
        if (a == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return 0;
    }
    *out = v;
    return 1;
}

static void put_utf8(Buf *b, unsigned cp) {
    unsigned char *o = b->p + b->len;
    if (cp < 0x80) { o[0] = (unsigned char)cp; b->len += 1; }
    else if (cp < 0x800) { o[0] = 0xC0 | (cp >> 6); o[1] = 0x80 | (cp & 0x3F); b->len += 2; }
    else if (cp < 0x10000) {
        o[0] = 0xE0 | (cp >> 12); o[1] = 0x80 | ((cp >> 6) & 0x3F); o[2] = 0x80 | (cp & 0x3F);
        b->len += 3;
    } else {
        o[0] = 0xF0 | (cp >> 18); o[1] = 0x80 | ((cp >> 12) & 0x3F);
        o[2] = 0x80 | ((cp >> 6) & 0x3F); o[3] = 0x80 | (cp & 0x3F);
        b->len += 4;
    }
}

/* A JSON string at c->p (the opening quote).  Its decoded text goes to out when out is given.
 * *escaped tells whether it had a backslash.  Returns 0 on invalid JSON / UTF-8 / no memory. */
/* bytes that a JSON string holds as they are: printable ASCII but '"' and '\\' */
static unsigned char PLAIN[256];

static void init_plain(void) {
    for (int i = 0x20; i < 0x80; i++) PLAIN[i] = i != '"' && i != '\\';
}

/* The end of the run of PLAIN bytes from p: 16 bytes at a time where SSE2 is there (every
 * x86-64), a byte at a time after (and elsewhere).  Kernel names run to hundreds of bytes. */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed: below 0x20 is a control byte or (negative) a byte >= 0x80 */
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                    _mm_cmplt_epi8(v, space));
        int m = _mm_movemask_epi8(stop);
        if (m) return p + __builtin_ctz((unsigned)m);
        p += 16;
    }
#endif
    while (p < end && PLAIN[*p]) p++;
    return p;
}

static int string(Cur *c, Buf *out, int *escaped) {
    if (c->p >= c->end || *c->p != '"') return 0;
    const unsigned char *p = ++c->p, *end = c->end;
    if (escaped) *escaped = 0;
    for (;;) {
        const unsigned char *run = p;
        p = plain_run(p, end);
        if (out && p > run) {
            if (!buf_reserve(out, (size_t)(p - run))) return 0;
            memcpy(out->p + out->len, run, (size_t)(p - run));
            out->len += (size_t)(p - run);
        }
        if (p >= end) return 0;
        unsigned char ch = *p;
        if (ch == '"') { c->p = p + 1; return 1; }
        if (ch < 0x20) return 0;
        if (ch >= 0x80) {
            int k = utf8_seq(p, end);
            if (!k) return 0;
            if (out) {
                if (!buf_reserve(out, (size_t)k)) return 0;
                memcpy(out->p + out->len, p, (size_t)k);
                out->len += (size_t)k;
            }
            p += k;
            continue;
        }
        /* backslash */
        if (escaped) *escaped = 1;
        if (end - p < 2) return 0;
        unsigned char e = p[1];
        unsigned cp;
        p += 2;
        switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (end - p < 4 || !hex4(p, &cp)) return 0;
                p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return 0;  /* lone low surrogate */
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo)
                        || lo < 0xDC00 || lo > 0xDFFF) return 0;
                    p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                break;
            default: return 0;
        }
        if (out) {
            if (!buf_reserve(out, 4)) return 0;
            put_utf8(out, cp);
        }
    }
}

/* A JSON number: sets its span and whether it has a fraction / an exponent. */
static int number(Cur *c, const unsigned char **s, const unsigned char **e, int *frac, int *exp_) {
    const unsigned char *p = c->p, *end = c->end;
    *s = p; *frac = 0; *exp_ = 0;
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return 0;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *frac = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *exp_ = 1;
    }
    *e = p;
    c->p = p;
    return 1;
}

/* Any JSON value (validated, skipped). */
static int skip_value(Cur *c, int depth) {
    if (depth > MAX_DEPTH || c->p >= c->end) return 0;
    unsigned char ch = *c->p;
    if (ch == '"') return string(c, NULL, NULL);
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == close) { c->p++; return 1; }
        for (;;) {
            if (ch == '{') {
                if (!string(c, NULL, NULL)) return 0;
                ws(c);
                if (c->p >= c->end || *c->p != ':') return 0;
                c->p++;
                ws(c);
            }
            if (!skip_value(c, depth + 1)) return 0;
            ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') { c->p++; ws(c); continue; }
            if (*c->p == close) { c->p++; return 1; }
            return 0;
        }
    }
    if (ch == 't') return lit(c, "true", 4);
    if (ch == 'f') return lit(c, "false", 5);
    if (ch == 'n') return lit(c, "null", 4);
    const unsigned char *s, *e;
    int fr, ex;
    return number(c, &s, &e, &fr, &ex);
}

/* An integer literal that fits int64 (no fraction, no exponent). */
static int int64_text(const unsigned char *s, const unsigned char *e, int64_t *out) {
    int neg = 0;
    if (s < e && *s == '-') { neg = 1; s++; }
    uint64_t v = 0;
    if (s >= e) return 0;
    for (; s < e; s++) {
        if (*s < '0' || *s > '9') return 0;
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* An int or null: 1 with *valid set, 0 for anything else (a string, a float, a bool...). */
static int int_or_null(Cur *c, int64_t *out, unsigned char *valid) {
    if (c->p < c->end && *c->p == 'n') { *valid = 0; *out = 0; return lit(c, "null", 4); }
    const unsigned char *s, *e;
    int fr, ex;
    if (!number(c, &s, &e, &fr, &ex) || fr || ex) return 0;
    if (!int64_text(s, e, out)) return 0;
    *valid = 1;
    return 1;
}

/* µs as JSON number text → exact ns, |ns| < 2^62; at most 3 decimals, no exponent. */
static int us_to_ns(const unsigned char *s, const unsigned char *e, int64_t *out) {
    int neg = 0;
    if (s < e && *s == '-') { neg = 1; s++; }
    uint64_t v = 0;
    int digits = 0;
    while (s < e && *s >= '0' && *s <= '9') {
        /* checked before multiplying: v * 10 of a 19-digit v wraps uint64 (2^64 + 5 would read 5) */
        if (v >= ((uint64_t)1 << 59)) return 0;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v >= ((uint64_t)1 << 62)) return 0;
        s++; digits++;
    }
    if (!digits) return 0;
    uint64_t f = 0;
    int fd = 0;
    if (s < e && *s == '.') {
        s++;
        while (s < e && *s >= '0' && *s <= '9') {
            if (++fd > 3) return 0;
            f = f * 10 + (uint64_t)(*s - '0');
            s++;
        }
    }
    if (s != e) return 0;
    while (fd < 3) { f *= 10; fd++; }
    if (v > (((uint64_t)1 << 62) - f) / 1000) return 0;
    v = v * 1000 + f;
    if (v >= ((uint64_t)1 << 62)) return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

/* key k (n bytes) is the string literal s */
#define key_is(k, n, s) ((n) == sizeof(s) - 1 && memcmp((k), (s), sizeof(s) - 1) == 0)

/* A key without escapes: its raw span (the caller compares bytes). */
static int raw_key(Cur *c, const unsigned char **k, size_t *n) {
    const unsigned char *start = c->p + 1;
    int esc;
    if (!string(c, NULL, &esc) || esc) return 0;
    *k = start;
    *n = (size_t)(c->p - 1 - start);
    ws(c);
    if (c->p >= c->end || *c->p != ':') return 0;
    c->p++;
    ws(c);
    return 1;
}

/* grid / block: null, or a list of ints; three values only when the list has three. */
static int int_list3(Cur *c, int64_t *v, unsigned char *valid) {
    valid[0] = valid[1] = valid[2] = 0;
    v[0] = v[1] = v[2] = 0;
    if (*c->p == 'n') return lit(c, "null", 4);
    if (*c->p != '[') return 0;
    c->p++;
    ws(c);
    int64_t tmp[3];
    int k = 0;
    if (c->p < c->end && *c->p == ']') { c->p++; return 1; }
    for (;;) {
        const unsigned char *s, *e;
        int fr, ex;
        int64_t x;
        if (!number(c, &s, &e, &fr, &ex) || fr || ex || !int64_text(s, e, &x)) return 0;
        if (k < 3) tmp[k] = x;
        k++;
        ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == ',') { c->p++; ws(c); continue; }
        if (*c->p == ']') { c->p++; break; }
        return 0;
    }
    if (k == 3) {
        for (int i = 0; i < 3; i++) { v[i] = tmp[i]; valid[i] = 1; }
    }
    return 1;
}

/* The args object: the mapped fields, with the types the Python reader accepts column-wise. */
static int args_object(Cur *c, Cols *o, size_t row) {
    if (*c->p != '{') return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return 1; }
    unsigned seen = 0;
    for (;;) {
        const unsigned char *k;
        size_t n;
        if (c->p >= c->end || !raw_key(c, &k, &n)) return 0;
        int col = -1, bit = 0;
        if (key_is(k, n, "device")) { col = C_DEVICE; bit = 1; }
        else if (key_is(k, n, "context")) { col = C_CONTEXT; bit = 2; }
        else if (key_is(k, n, "stream")) { col = C_STREAM; bit = 3; }
        else if (key_is(k, n, "correlation")) { col = C_CORR; bit = 4; }
        else if (key_is(k, n, "External id")) { col = C_EXT; bit = 5; }
        else if (key_is(k, n, "external id")) { col = C_EXTLC; bit = 6; }
        else if (key_is(k, n, "registers per thread")) { col = C_REGS; bit = 7; }
        else if (key_is(k, n, "shared memory")) { col = C_SHARED; bit = 8; }
        if (col >= 0) {
            if (seen & (1u << bit)) return 0;
            seen |= 1u << bit;
            if (!int_or_null(c, &o->i64[col][row], &o->valid[col][row])) return 0;
        } else if (key_is(k, n, "grid") || key_is(k, n, "block")) {
            int g = k[0] == 'g';
            bit = g ? 9 : 10;
            if (seen & (1u << bit)) return 0;
            seen |= 1u << bit;
            int first = g ? C_GX : C_BX;
            int64_t v[3];
            unsigned char va[3];
            if (c->p >= c->end || !int_list3(c, v, va)) return 0;
            for (int i = 0; i < 3; i++) { o->i64[first + i][row] = v[i]; o->valid[first + i][row] = va[i]; }
        } else if (key_is(k, n, "wait_on_cuda_event_id")) {
            if (seen & (1u << 11)) return 0;
            seen |= 1u << 11;
            int64_t x;
            unsigned char va;
            if (!int_or_null(c, &x, &va)) return 0;
        } else if (key_is(k, n, "bytes")) {  /* int, text or null */
            if (seen & (1u << 12)) return 0;
            seen |= 1u << 12;
            if (c->p < c->end && *c->p == '"') { if (!string(c, NULL, NULL)) return 0; }
            else {
                int64_t x;
                unsigned char va;
                if (!int_or_null(c, &x, &va)) return 0;
            }
        } else if (key_is(k, n, "kind") || key_is(k, n, "cuda_sync_kind")) {  /* text or null */
            bit = k[0] == 'k' ? 13 : 14;
            if (seen & (1u << bit)) return 0;
            seen |= 1u << bit;
            if (c->p < c->end && *c->p == 'n') { if (!lit(c, "null", 4)) return 0; }
            else if (!string(c, NULL, NULL)) return 0;
        } else if (!skip_value(c, 2)) {
            return 0;
        }
        ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == ',') { c->p++; ws(c); continue; }
        if (*c->p == '}') { c->p++; return 1; }
        return 0;
    }
}

/* A string column value: a string (decoded) or null. */
static int str_value(Cur *c, Cols *o, int col, size_t row) {
    if (c->p < c->end && *c->p == 'n') {
        o->svalid[col][row] = 0;
        return lit(c, "null", 4);
    }
    o->svalid[col][row] = 1;
    return string(c, &o->data[col], NULL);
}

static const char PHASES[] = "XisftMCIn";

static int event(Cur *c, Cols *o) {
    if (o->n == o->cap && !cols_grow(o)) { o->nomem = 1; return 0; }
    size_t row = o->n;
    if (row >= o->zeroed) zero_rows(o);  /* its values and validity are 0 until set */
    const unsigned char *ev_start = c->p;
    if (*c->p != '{') return 0;
    c->p++;
    ws(c);
    unsigned seen = 0;
    unsigned char ph = 0;
    const unsigned char *ts_s = NULL, *ts_e = NULL, *dur_s = NULL, *dur_e = NULL;
    if (c->p < c->end && *c->p == '}') return 0;  /* no ph */
    for (;;) {
        const unsigned char *k;
        size_t n;
        int bit;
        if (c->p >= c->end || !raw_key(c, &k, &n)) return 0;
        if (c->p >= c->end) return 0;
        if (key_is(k, n, "ph")) {
            bit = 0;
            int esc;
            const unsigned char *s = c->p + 1;
            if (!string(c, NULL, &esc) || esc || c->p - s != 2 || !strchr(PHASES, s[0]) || !s[0]) return 0;
            ph = s[0];
        } else if (key_is(k, n, "name")) {
            bit = 1;
            if (!str_value(c, o, S_NAME, row)) return 0;
        } else if (key_is(k, n, "cat")) {
            bit = 2;
            if (!str_value(c, o, S_CAT, row)) return 0;
        } else if (key_is(k, n, "pid") || key_is(k, n, "tid")) {
            int col = k[0] == 'p' ? C_PID : C_TID;
            bit = col == C_PID ? 3 : 4;
            if (*c->p == '"') {  /* a text pid / tid ("Spans"): its row is converted as text */
                if (!string(c, NULL, NULL)) return 0;
                o->i64[C_TEXT][row] = 1;
            } else if (!int_or_null(c, &o->i64[col][row], &o->valid[col][row])) return 0;
        } else if (key_is(k, n, "id")) {
            bit = 5;
            if (!int_or_null(c, &o->i64[C_ID][row], &o->valid[C_ID][row])) return 0;
        } else if (key_is(k, n, "ts")) {
            bit = 6;
            ts_s = c->p;
            if (!skip_value(c, 1)) return 0;
            ts_e = c->p;
        } else if (key_is(k, n, "dur")) {
            bit = 7;
            dur_s = c->p;
            if (!skip_value(c, 1)) return 0;
            dur_e = c->p;
        } else if (key_is(k, n, "args")) {
            bit = 8;
            const unsigned char *a = c->p;
            if (*a == 'n') {
                if (!lit(c, "null", 4)) return 0;
            } else {
                if (!args_object(c, o, row)) return 0;
                size_t len = (size_t)(c->p - a);
                if (!(len == 2 && a[1] == '}')) {
                    o->i64[C_ARGS0][row] = a - c->base;
                    o->i64[C_ARGS1][row] = c->p - c->base;
                    o->valid[C_ARGS0][row] = o->valid[C_ARGS1][row] = 1;
                }
            }
        } else if (key_is(k, n, "s")) {
            bit = 9;
            if (*c->p == 'n') { if (!lit(c, "null", 4)) return 0; }
            else if (!string(c, NULL, NULL)) return 0;
        } else if (key_is(k, n, "bp")) {
            bit = 10;
            if (*c->p == 'n') { if (!lit(c, "null", 4)) return 0; }
            else if (!string(c, NULL, NULL)) return 0;
        } else {
            return 0;  /* a field outside the Chrome-trace set */
        }
        if (seen & (1u << bit)) return 0;  /* a repeated key */
        seen |= 1u << bit;
        ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == ',') { c->p++; ws(c); continue; }
        if (*c->p == '}') { c->p++; break; }
        return 0;
    }
    if (!ph) return 0;
    if (ph != 'M') {
        if (!ts_s || !us_to_ns(ts_s, ts_e, &o->i64[C_TS][row])) return 0;
        o->valid[C_TS][row] = 1;
    }
    if (ph == 'X') {
        if (!dur_s || !us_to_ns(dur_s, dur_e, &o->i64[C_DUR][row])) return 0;
        if (o->i64[C_DUR][row] < 0) return 0;
        o->valid[C_DUR][row] = 1;
    }
    o->ph[row] = ph;
    o->i64[C_SPAN0][row] = ev_start - c->base;
    o->i64[C_SPAN1][row] = c->p - c->base;
    o->valid[C_SPAN0][row] = o->valid[C_SPAN1][row] = o->valid[C_TEXT][row] = 1;
    for (int k = 0; k < N_STR; k++) {
        if ((size_t)o->data[k].len > (size_t)INT32_MAX) return 0;
        o->off[k][row + 1] = (int32_t)o->data[k].len;
    }
    o->n++;
    return 1;
}

static int scan_all(Cur *c, Cols *o) {
    for (int k = 0; k < N_STR; k++) o->off[k][0] = 0;
    ws(c);
    if (c->p >= c->end || *c->p != '[') return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == ']') { c->p++; }
    else {
        for (;;) {
            if (c->p >= c->end || !event(c, o)) return 0;
            ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') { c->p++; ws(c); continue; }
            if (*c->p == ']') { c->p++; break; }
            return 0;
        }
    }
    ws(c);
    return c->p == c->end;
}

static PyObject *bitmap(const unsigned char *v, size_t n) {
    size_t all = 1;
    for (size_t i = 0; i < n; i++) if (!v[i]) { all = 0; break; }
    if (all) Py_RETURN_NONE;
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 7) / 8));
    if (!b) return NULL;
    unsigned char *q = (unsigned char *)PyBytes_AS_STRING(b);
    memset(q, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++) if (v[i]) q[i >> 3] |= (unsigned char)(1u << (i & 7));
    return b;
}

/* A buffer that owns memory from malloc (the scanner's columns, handed over without a copy: a
 * copy into bytes objects touched ~180 MB of fresh pages for the 179 MB trace); Arrow wraps it
 * with pa.py_buffer, and free() runs when the last view of it is gone. */
typedef struct { PyObject_HEAD void *p; Py_ssize_t len; } Owned;

static int owned_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Owned *o = (Owned *)self;
    return PyBuffer_FillInfo(view, self, o->p ? o->p : (void *)"", o->len, 1, flags);
}

static void owned_dealloc(PyObject *self) {
    free(((Owned *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs OWNED_BUFFER = {owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tracekit._native.Owned",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_as_buffer = &OWNED_BUFFER,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "memory from the scanner, exposed as a read-only buffer",
};

/* *pp handed to a new Owned of len bytes (*pp is NULL after, also on failure: freed then) */
static PyObject *owned(void **pp, Py_ssize_t len) {
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) { free(*pp); *pp = NULL; return NULL; }
    o->p = *pp;
    o->len = len;
    *pp = NULL;
    return (PyObject *)o;
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (view.len > INT32_MAX) { PyBuffer_Release(&view); Py_RETURN_NONE; }
    Cols o;
    memset(&o, 0, sizeof o);
    Cur c = {(const unsigned char *)view.buf, (const unsigned char *)view.buf + view.len,
             (const unsigned char *)view.buf};
    int ok;
    /* rows: a first guess (events are rarely under 64 bytes), grown as needed; the string
     * columns: decoded text is never longer than the chunk's, so one reservation each */
    o.cap = (size_t)view.len / 256;  /* doubled by the first cols_grow */
    int ok_alloc = cols_grow(&o);
    for (int k = 0; k < N_STR && ok_alloc; k++) ok_alloc = buf_reserve(&o.data[k], (size_t)view.len + 1);
    if (!ok_alloc) { cols_free(&o); PyBuffer_Release(&view); return PyErr_NoMemory(); }
    Py_BEGIN_ALLOW_THREADS
    ok = scan_all(&c, &o);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (o.nomem) { cols_free(&o); return PyErr_NoMemory(); }
    if (!ok) { cols_free(&o); Py_RETURN_NONE; }
    size_t n = o.n;
    PyObject *res = NULL, *i64 = PyTuple_New(N_I64), *val = PyTuple_New(N_I64), *strs = PyTuple_New(N_STR);
    PyObject *ph = PyBytes_FromStringAndSize((const char *)o.ph, (Py_ssize_t)n);
    if (!i64 || !val || !strs || !ph) goto done;
    for (int k = 0; k < N_I64; k++) {
        PyObject *d = owned((void **)&o.i64[k], (Py_ssize_t)(n * 8));
        if (!d) goto done;
        PyTuple_SET_ITEM(i64, k, d);
        PyObject *v = bitmap(o.valid[k], n);
        if (!v) goto done;
        PyTuple_SET_ITEM(val, k, v);
    }
    for (int k = 0; k < N_STR; k++) {
        PyObject *off = owned((void **)&o.off[k], (Py_ssize_t)((n + 1) * 4));
        if (o.data[k].p && o.data[k].len < o.data[k].cap) {  /* reserved for the whole chunk */
            void *q = realloc(o.data[k].p, o.data[k].len ? o.data[k].len : 1);
            if (q) o.data[k].p = q;
        }
        PyObject *dat = owned((void **)&o.data[k].p, (Py_ssize_t)o.data[k].len);
        PyObject *v = bitmap(o.svalid[k], n);
        if (!off || !dat || !v) { Py_XDECREF(off); Py_XDECREF(dat); Py_XDECREF(v); goto done; }
        PyObject *t = PyTuple_Pack(3, off, dat, v);
        Py_DECREF(off); Py_DECREF(dat); Py_DECREF(v);
        if (!t) goto done;
        PyTuple_SET_ITEM(strs, k, t);
    }
    res = Py_BuildValue("(nOOOO)", (Py_ssize_t)n, ph, i64, val, strs);
done:
    Py_XDECREF(ph); Py_XDECREF(i64); Py_XDECREF(val); Py_XDECREF(strs);
    cols_free(&o);
    return res;
}

static PyObject *names(PyObject *self, PyObject *unused) {
    PyObject *a = PyTuple_New(N_I64), *b = PyTuple_New(N_STR);
    if (!a || !b) { Py_XDECREF(a); Py_XDECREF(b); return NULL; }
    for (int k = 0; k < N_I64; k++) PyTuple_SET_ITEM(a, k, PyUnicode_FromString(I64_NAMES[k]));
    for (int k = 0; k < N_STR; k++) PyTuple_SET_ITEM(b, k, PyUnicode_FromString(STR_NAMES[k]));
    return Py_BuildValue("(NN)", a, b);
}

/* ---- nest ------------------------------------------------------------------------------------ */

typedef struct {
    const int64_t *key[4];        /* pid, tid, device_id, stream_id */
    const unsigned char *kv[4];   /* their validity (Arrow bitmaps), NULL where all are valid */
    const int64_t *start, *end, *id;
} NestCols;

static inline int kvalid(const NestCols *c, int k, int64_t i) {
    return !c->kv[k] || (c->kv[k][i >> 3] >> (i & 7)) & 1;
}

/* track order (NULLs first, each key), then start, end descending, event id */
static inline int nest_less(const NestCols *c, int64_t a, int64_t b) {
    for (int k = 0; k < 4; k++) {
        int va = kvalid(c, k, a), vb = kvalid(c, k, b);
        if (va != vb) return va < vb;
        if (va && c->key[k][a] != c->key[k][b]) return c->key[k][a] < c->key[k][b];
    }
    if (c->start[a] != c->start[b]) return c->start[a] < c->start[b];
    if (c->end[a] != c->end[b]) return c->end[a] > c->end[b];
    return c->id[a] < c->id[b];
}

static int same_track(const NestCols *c, int64_t a, int64_t b) {
    for (int k = 0; k < 4; k++) {
        int va = kvalid(c, k, a), vb = kvalid(c, k, b);
        if (va != vb) return 0;
        if (va && c->key[k][a] != c->key[k][b]) return 0;
    }
    return 1;
}

static void merge_sort(const NestCols *c, int64_t *idx, int64_t *tmp, Py_ssize_t n) {
    /* bottom-up: runs of insertion-sorted 16, then merges */
    const Py_ssize_t RUN = 16;
    for (Py_ssize_t lo = 0; lo < n; lo += RUN) {
        Py_ssize_t hi = lo + RUN < n ? lo + RUN : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            int64_t v = idx[i];
            Py_ssize_t j = i;
            while (j > lo && nest_less(c, v, idx[j - 1])) { idx[j] = idx[j - 1]; j--; }
            idx[j] = v;
        }
    }
    int64_t *src = idx, *dst = tmp;
    for (Py_ssize_t w = RUN; w < n; w *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * w) {
            Py_ssize_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            Py_ssize_t i = lo, j = mid, k = lo;
            if (mid >= hi || !nest_less(c, src[mid], src[mid - 1])) {  /* already in order */
                memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(int64_t));
                continue;
            }
            while (i < mid && j < hi) dst[k++] = nest_less(c, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int64_t *t = src; src = dst; dst = t;
    }
    if (src != idx) memcpy(idx, src, (size_t)n * sizeof(int64_t));
}

/* nest(n, pid, pid_valid, tid, tid_valid, device, device_valid, stream, stream_valid, start, end,
 *      event_id) -> (depth int32[n], parent int64[n], parent validity bitmap or None), rows in the
 * order given.  int64 columns as buffers of at least n values, validity as Arrow bitmaps
 * (offset 0) or None where all are valid.
 * The rule of nesting._nest_track: on each track, in order (start, end descending, event_id), the
 * parent is the innermost open event that encloses the event (end >= its end), open meaning it
 * ends after the event starts; partial overlaps are skipped.
 * With a true 13th argument (want_stack), a 4th item: the rows left on the stack at the end (the
 * last track's; int64 row numbers, outermost first).  Given again, ahead of the rows that follow
 * in that order, they give those rows the results they get in one pass over all rows (a piece at
 * a time: tracekit/nesting.py).
 * With a 14th argument carry >= 0 (the reader's streaming pass: the first `carry` rows are those
 * left on the stacks by the rows before, on any tracks), the 4th item is the rows left on every
 * track's stack (row numbers, in order), and a 5th item the carried rows that some row of their
 * track, not carried, precedes in that order (row numbers; none when every track's rows arrived
 * in its order: else those tracks' results are not those of one pass). */
static PyObject *nest(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    Py_buffer b[11];
    PyObject *o[11];
    memset(b, 0, sizeof b);
    int want_stack = 0;
    Py_ssize_t carry = -1;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOOOO|pn", &n, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &want_stack, &carry))
        return NULL;
    for (int k = 0; k < 11; k++) {
        int is_valid_col = k < 8 && k % 2 == 1;
        if (is_valid_col && o[k] == Py_None) continue;
        if (PyObject_GetBuffer(o[k], &b[k], PyBUF_SIMPLE) < 0) {
            for (int j = 0; j < k; j++) if (b[j].obj) PyBuffer_Release(&b[j]);
            return NULL;
        }
    }
    PyObject *res = NULL;
    int64_t *idx = NULL, *tmp = NULL, *stack = NULL, *parent = NULL, *kept = NULL;
    int64_t *late = NULL;  /* carried rows that a new row of their track precedes */
    Py_ssize_t nkept = 0, nlate = 0;
    int32_t *depth = NULL;
    unsigned char *pvalid = NULL;
    for (int k = 0; k < 11; k++) {
        Py_ssize_t want = (k < 8 && k % 2 == 1) ? (n + 7) / 8 : n * 8;
        if (b[k].obj && b[k].len < want) {
            PyErr_SetString(PyExc_ValueError, "nest: column shorter than n");
            goto out;
        }
    }
    NestCols c;
    for (int k = 0; k < 4; k++) {
        c.key[k] = (const int64_t *)b[2 * k].buf;
        c.kv[k] = b[2 * k + 1].obj ? (const unsigned char *)b[2 * k + 1].buf : NULL;
    }
    c.start = b[8].buf; c.end = b[9].buf; c.id = b[10].buf;
    size_t m = n ? (size_t)n : 1;
    idx = malloc(m * 8); tmp = malloc(m * 8); stack = malloc(m * 8); parent = malloc(m * 8);
    depth = malloc(m * 4); pvalid = malloc(m);
    if (carry >= 0) { kept = malloc(m * 8); late = malloc(m * 8); }
    if (!idx || !tmp || !stack || !parent || !depth || !pvalid || (carry >= 0 && (!kept || !late))) {
        PyErr_NoMemory();
        goto out;
    }
    Py_ssize_t top = 0;  /* stack of rows, innermost last */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) idx[i] = i;
    merge_sort(&c, idx, tmp, n);
    int seen_new = 0;  /* a row of this track that was not carried, seen */
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t i = idx[r];
        if (r == 0 || !same_track(&c, idx[r - 1], i)) {
            if (carry >= 0) {  /* the track before: its final stack */
                memcpy(kept + nkept, stack, (size_t)top * 8);
                nkept += top;
            }
            top = 0;
            seen_new = 0;
        }
        if (carry >= 0) {
            if (i >= carry) seen_new = 1;
            else if (seen_new) late[nlate++] = i;
        }
        int64_t s = c.start[i], e = c.end[i];
        while (top > 0 && c.end[stack[top - 1]] <= s) top--;
        Py_ssize_t j = top - 1;
        while (j >= 0 && c.end[stack[j]] < e) j--;  /* partial overlap: look further out */
        if (j >= 0) {
            parent[i] = c.id[stack[j]];
            pvalid[i] = 1;
            depth[i] = depth[stack[j]] + 1;
        } else {
            parent[i] = 0;
            pvalid[i] = 0;
            depth[i] = 0;
        }
        stack[top++] = i;
    }
    if (carry >= 0) {
        memcpy(kept + nkept, stack, (size_t)top * 8);
        nkept += top;
    }
    Py_END_ALLOW_THREADS
    PyObject *bm = bitmap(pvalid, (size_t)n);
    if (bm && carry >= 0)
        res = Py_BuildValue("(y#y#Ny#y#)", (const char *)depth, (Py_ssize_t)(n * 4), (const char *)parent,
                            (Py_ssize_t)(n * 8), bm, (const char *)kept, (Py_ssize_t)(nkept * 8),
                            (const char *)late, (Py_ssize_t)(nlate * 8));
    else if (bm && want_stack)
        res = Py_BuildValue("(y#y#Ny#)", (const char *)depth, (Py_ssize_t)(n * 4), (const char *)parent,
                            (Py_ssize_t)(n * 8), bm, (const char *)stack, (Py_ssize_t)(top * 8));
    else if (bm)
        res = Py_BuildValue("(y#y#N)", (const char *)depth, (Py_ssize_t)(n * 4), (const char *)parent,
                            (Py_ssize_t)(n * 8), bm);
out:
    for (int k = 0; k < 11; k++) if (b[k].obj) PyBuffer_Release(&b[k]);
    free(idx); free(tmp); free(stack); free(parent); free(depth); free(pvalid); free(kept); free(late);
    return res;
}

/* ---- kineto_flows --------------------------------------------------------------------------- */

static inline int bit(const unsigned char *bm, Py_ssize_t i) { return !bm || (bm[i >> 3] >> (i & 7)) & 1; }

static PyObject *int_or_none(const int64_t *v, const unsigned char *bm, Py_ssize_t i) {
    if (!bit(bm, i)) Py_RETURN_NONE;
    return PyLong_FromLongLong(v[i]);
}

/* d.pop(key, None) as a new reference (NULL with an error set on failure, Py_None if absent) */
static PyObject *dict_pop(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    Py_INCREF(v);
    if (PyDict_DelItem(d, key) < 0) { Py_DECREF(v); return NULL; }
    return v;
}

/* append (kind, fid, start (pid, tid, ts) or None, end or None) to the 8 output lists */
static int flow_row(PyObject **out, PyObject *kind, PyObject *fid, PyObject *st, PyObject *en) {
    if (PyList_Append(out[0], kind) < 0 || PyList_Append(out[1], fid) < 0) return 0;
    for (int k = 0; k < 3; k++) {
        if (PyList_Append(out[2 + k], st == Py_None ? Py_None : PyTuple_GET_ITEM(st, k)) < 0) return 0;
        if (PyList_Append(out[5 + k], en == Py_None ? Py_None : PyTuple_GET_ITEM(en, k)) < 0) return 0;
    }
    return 1;
}

/* kineto_flows(phs, kinds, id, id_valid, pid, pid_valid, tid, tid_valid, ts, open_flows,
 *              early_ends) -> 8 lists (kind, flow_id, start_pid, start_tid, start_ns, end_pid,
 * end_tid, end_ns): kineto/flows.py's Flows.rows in C, on the same two dicts (keys (kind, id),
 * values (pid, tid, ts) and (id, (pid, tid, ts))).  int64 columns as buffers of at least n
 * values, validity as Arrow bitmaps (offset 0) or None. */
static PyObject *kineto_flows(PyObject *self, PyObject *args) {
    Py_buffer ph, idb, idv, pidb, pidv, tidb, tidv, tsb;
    PyObject *kinds, *open, *early;
    memset(&idv, 0, sizeof idv); memset(&pidv, 0, sizeof pidv); memset(&tidv, 0, sizeof tidv);
    PyObject *idv_o, *pidv_o, *tidv_o;
    if (!PyArg_ParseTuple(args, "y*O!y*Oy*Oy*Oy*O!O!", &ph, &PyList_Type, &kinds, &idb, &idv_o, &pidb,
                          &pidv_o, &tidb, &tidv_o, &tsb, &PyDict_Type, &open, &PyDict_Type, &early))
        return NULL;
    PyObject *out[8] = {0}, *restarted = NULL, *res = NULL;
    Py_ssize_t n = ph.len;
    const unsigned char *bm_id = NULL, *bm_pid = NULL, *bm_tid = NULL;
    if ((idv_o != Py_None && PyObject_GetBuffer(idv_o, &idv, PyBUF_SIMPLE) < 0) ||
        (pidv_o != Py_None && PyObject_GetBuffer(pidv_o, &pidv, PyBUF_SIMPLE) < 0) ||
        (tidv_o != Py_None && PyObject_GetBuffer(tidv_o, &tidv, PyBUF_SIMPLE) < 0))
        goto done;
    bm_id = idv.obj ? idv.buf : NULL; bm_pid = pidv.obj ? pidv.buf : NULL; bm_tid = tidv.obj ? tidv.buf : NULL;
    if (PyList_GET_SIZE(kinds) != n || idb.len < n * 8 || pidb.len < n * 8 || tidb.len < n * 8
        || tsb.len < n * 8 || (idv.obj && idv.len < (n + 7) / 8) || (pidv.obj && pidv.len < (n + 7) / 8)
        || (tidv.obj && tidv.len < (n + 7) / 8)) {
        PyErr_SetString(PyExc_ValueError, "kineto_flows: columns of different lengths");
        goto done;
    }
    for (int k = 0; k < 8; k++) if (!(out[k] = PyList_New(0))) goto done;
    if (!(restarted = PyList_New(0))) goto done;
    const unsigned char *phs = ph.buf;
    const int64_t *ids = idb.buf, *pids = pidb.buf, *tids = tidb.buf, *tss = tsb.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kind = PyList_GET_ITEM(kinds, i);
        PyObject *fid = int_or_none(ids, bm_id, i), *key = NULL, *end = NULL, *start = NULL;
        int ok = 0;
        if (!fid) goto done;
        PyObject *p = int_or_none(pids, bm_pid, i), *t = int_or_none(tids, bm_tid, i);
        PyObject *ts = PyLong_FromLongLong(tss[i]);
        if (p && t && ts) end = PyTuple_Pack(3, p, t, ts);
        Py_XDECREF(p); Py_XDECREF(t); Py_XDECREF(ts);
        if (!end || !(key = PyTuple_Pack(2, kind, fid))) goto step;
        if (!(start = dict_pop(open, key))) goto step;
        if (phs[i] == 's') {
            if (start != Py_None) {  /* a second start: the first one never ended */
                PyObject *r = PyTuple_Pack(3, kind, fid, start);
                if (!r || PyList_Append(restarted, r) < 0) { Py_XDECREF(r); goto step; }
                Py_DECREF(r);
            } else {
                PyObject *e = PyDict_GetItemWithError(early, key);  /* its end came first? */
                if (!e && PyErr_Occurred()) goto step;
                if (e) {
                    PyObject *eend = PyTuple_GET_ITEM(e, 1);
                    int ge = PyObject_RichCompareBool(PyTuple_GET_ITEM(eend, 2), PyTuple_GET_ITEM(end, 2), Py_GE);
                    if (ge < 0) goto step;
                    if (ge) {
                        Py_INCREF(e);
                        int r = PyDict_DelItem(early, key) == 0
                                && flow_row(out, kind, PyTuple_GET_ITEM(e, 0), end, eend);
                        Py_DECREF(e);
                        ok = r;
                        goto step;
                    }
                }
            }
            ok = PyDict_SetItem(open, key, end) == 0;
            goto step;
        }
        if (phs[i] == 't' && start != Py_None) {  /* step: end this link, start the next from here */
            if (PyDict_SetItem(open, key, end) < 0) goto step;
        }
        if (phs[i] == 'f' && start == Py_None) {  /* an end before its start: wait for it */
            PyObject *prev = dict_pop(early, key);
            if (!prev) goto step;
            if (prev != Py_None && !flow_row(out, kind, PyTuple_GET_ITEM(prev, 0), Py_None,
                                             PyTuple_GET_ITEM(prev, 1))) { Py_DECREF(prev); goto step; }
            Py_DECREF(prev);
            PyObject *v = PyTuple_Pack(2, fid, end);
            ok = v && PyDict_SetItem(early, key, v) == 0;
            Py_XDECREF(v);
            goto step;
        }
        ok = flow_row(out, kind, fid, start, end);
    step:
        Py_XDECREF(start); Py_XDECREF(key); Py_XDECREF(end); Py_DECREF(fid);
        if (!ok) goto done;
    }
    /* the restarted starts' rows come first, as in the Python rule */
    Py_ssize_t nr = PyList_GET_SIZE(restarted);
    if (nr) {
        PyObject *front[8] = {0};
        int fine = 1;
        for (int k = 0; k < 8 && fine; k++) fine = (front[k] = PyList_New(0)) != NULL;
        for (Py_ssize_t j = 0; j < nr && fine; j++) {
            PyObject *r = PyList_GET_ITEM(restarted, j);
            fine = flow_row(front, PyTuple_GET_ITEM(r, 0), PyTuple_GET_ITEM(r, 1), PyTuple_GET_ITEM(r, 2), Py_None);
        }
        for (int k = 0; k < 8 && fine; k++) {
            fine = PyList_SetSlice(front[k], PyList_GET_SIZE(front[k]), PyList_GET_SIZE(front[k]), out[k]) == 0;
            if (fine) { Py_DECREF(out[k]); out[k] = front[k]; front[k] = NULL; }
        }
        for (int k = 0; k < 8; k++) Py_XDECREF(front[k]);
        if (!fine) goto done;
    }
    res = PyTuple_New(8);
    if (res) for (int k = 0; k < 8; k++) { PyTuple_SET_ITEM(res, k, out[k]); out[k] = NULL; }
done:
    for (int k = 0; k < 8; k++) Py_XDECREF(out[k]);
    Py_XDECREF(restarted);
    PyBuffer_Release(&ph); PyBuffer_Release(&idb); PyBuffer_Release(&pidb); PyBuffer_Release(&tidb);
    PyBuffer_Release(&tsb);
    if (idv.obj) PyBuffer_Release(&idv);
    if (pidv.obj) PyBuffer_Release(&pidv);
    if (tidv.obj) PyBuffer_Release(&tidv);
    return res;
}

/* ---- take_strings, take_spans ---------------------------------------------------------------- */

/* The text of rows idx[0..m) (8-byte non-negative row numbers < n) as the buffers of an Arrow
 * string array: row i's text is data[start(i), end(i)), start / end read from int32 (width 4) or
 * int64 (width 8) arrays; bm: the rows' validity (Arrow bitmap) or NULL.  The lengths are summed
 * first and the text copied once, without the GIL.  Returns (offsets, data, validity or None). */
static PyObject *take_core(const int64_t *idx, Py_ssize_t m, Py_ssize_t n, const unsigned char *data,
                           Py_ssize_t data_len, const void *starts, const void *ends, int width,
                           const unsigned char *bm) {
#define AT(a, i) (width == 4 ? (int64_t)((const int32_t *)(a))[i] : ((const int64_t *)(a))[i])
    PyObject *res = NULL, *off_o = NULL, *dat_o = NULL, *val_o = NULL;
    int32_t *out_off = NULL;
    unsigned char *out_data = NULL;
    uint64_t total = 0;
    int bad = 0, nulls = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t i = idx[j];
        if (i < 0 || i >= n) { bad = 1; break; }
        if (bm && !((bm[i >> 3] >> (i & 7)) & 1)) { nulls = 1; continue; }
        int64_t a = AT(starts, i), b = AT(ends, i);
        if (a < 0 || b < a || b > data_len) { bad = 1; break; }
        total += (uint64_t)(b - a);
    }
    if (bad || total > (uint64_t)INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "take: a row number or a text range out of bounds");
        return NULL;
    }
    out_off = malloc((size_t)(m + 1) * 4);
    out_data = malloc(total ? (size_t)total : 1);
    if (!out_off || !out_data) { PyErr_NoMemory(); goto done; }
    if (nulls) {
        if (!(val_o = PyBytes_FromStringAndSize(NULL, (m + 7) / 8))) goto done;
        memset(PyBytes_AS_STRING(val_o), 0, (size_t)(m + 7) / 8);
    }
    unsigned char *vq = val_o ? (unsigned char *)PyBytes_AS_STRING(val_o) : NULL;
    Py_BEGIN_ALLOW_THREADS
    int32_t pos = 0;
    out_off[0] = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        int64_t i = idx[j];
        if (!bm || ((bm[i >> 3] >> (i & 7)) & 1)) {
            int64_t a = AT(starts, i);
            int32_t len = (int32_t)(AT(ends, i) - a);
            memcpy(out_data + pos, data + a, (size_t)len);
            pos += len;
            if (vq) vq[j >> 3] |= (unsigned char)(1u << (j & 7));
        }
        out_off[j + 1] = pos;
    }
    Py_END_ALLOW_THREADS
    if (!(off_o = owned((void **)&out_off, (Py_ssize_t)(m + 1) * 4))) goto done;
    if (!(dat_o = owned((void **)&out_data, (Py_ssize_t)total))) goto done;
    res = PyTuple_Pack(3, off_o, dat_o, val_o ? val_o : Py_None);
done:
    free(out_off); free(out_data);
    Py_XDECREF(off_o); Py_XDECREF(dat_o); Py_XDECREF(val_o);
    return res;
#undef AT
}

/* take_strings(idx, idx_offset, m, n, offsets, data, validity) -> (offsets, data, validity or
 * None): Arrow's take of a string array (n rows: int32 offsets[n + 1], data, an Arrow validity
 * bitmap or None, array offset 0) at m row numbers (idx: a buffer of 8-byte non-negative ints,
 * from idx_offset on, no nulls).  Arrow's own take grows its data buffer as it goes and shrinks
 * it at the end, copying the text up to three times; here it is copied once (the Kineto reader's
 * `_gather`: the names of each table's rows).
 * take_spans(idx, idx_offset, m, n, text, starts, ends, validity): the same, row i's text being
 * text[starts[i], ends[i]) (int64 arrays of n rows): the scanner's args, gathered from the chunk
 * without an intermediate copy. */
static PyObject *take_text(PyObject *args, int spans) {
    Py_buffer ib, ab, db, eb, vb;
    Py_ssize_t ioff, m, n;
    PyObject *vo, *res = NULL;
    memset(&eb, 0, sizeof eb);
    memset(&vb, 0, sizeof vb);
    int ok = spans ? PyArg_ParseTuple(args, "y*nnny*y*y*O", &ib, &ioff, &m, &n, &db, &ab, &eb, &vo)
                   : PyArg_ParseTuple(args, "y*nnny*y*O", &ib, &ioff, &m, &n, &ab, &db, &vo);
    if (!ok) return NULL;
    if (vo != Py_None && PyObject_GetBuffer(vo, &vb, PyBUF_SIMPLE) < 0) goto done;
    if (ioff < 0 || m < 0 || n < 0 || ib.len < (ioff + m) * 8 || (vb.obj && vb.len < (n + 7) / 8)
        || (spans ? (ab.len < n * 8 || eb.len < n * 8) : ab.len < (n + 1) * 4)) {
        PyErr_SetString(PyExc_ValueError, "take: buffers shorter than their lengths");
        goto done;
    }
    res = take_core((const int64_t *)ib.buf + ioff, m, n, db.buf, db.len, ab.buf,
                    spans ? eb.buf : (const void *)((const int32_t *)ab.buf + 1), spans ? 8 : 4,
                    vb.obj ? vb.buf : NULL);
done:
    PyBuffer_Release(&ib); PyBuffer_Release(&ab); PyBuffer_Release(&db);
    if (eb.obj) PyBuffer_Release(&eb);
    if (vb.obj) PyBuffer_Release(&vb);
    return res;
}

static PyObject *take_strings(PyObject *self, PyObject *args) { return take_text(args, 0); }
static PyObject *take_spans(PyObject *self, PyObject *args) { return take_text(args, 1); }

static PyMethodDef METHODS[] = {
    {"kineto_flows", kineto_flows, METH_VARARGS, "kineto_flows(...) -> 8 lists: the flow rows of a chunk"},
    {"kineto_scan", scan, METH_O, "kineto_scan(chunk) -> columns of a JSON array of trace events, or None"},
    {"take_strings", take_strings, METH_VARARGS, "take_strings(idx, idx_offset, m, n, offsets, data, validity) -> "
                                                 "(offsets, data, validity or None): a string array's take"},
    {"take_spans", take_spans, METH_VARARGS, "take_spans(idx, idx_offset, m, n, text, starts, ends, validity) -> "
                                             "(offsets, data, validity or None): text ranges gathered"},
    {"kineto_names", names, METH_NOARGS, "kineto_names() -> (int64 column names, string column names)"},
    {"nest", nest, METH_VARARGS, "nest(n, 4 x (track column, validity), start, end, event_id[, want_stack[, carry]]) -> "
                                 "(depth, parent, parent validity bitmap or None[, stack rows[, late carried rows]])"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    init_plain();
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    return PyModule_Create(&MODULE);
}
