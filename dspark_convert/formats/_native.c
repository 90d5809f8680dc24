/* Compiled kernels: the tensor stream's Q8_0 quantization, BF16 -> F16 and NVFP4 repack, and the tokenizer
 * reader's piece scanners, span hashes, vocabulary lookups and merge packing.
 *
 * Each kernel is one pass over a chunk with the GIL released, so the conversion threads run them on every core.
 * The bytes are those of gguf-py (gguf.quants Q8_0, numpy's float32 -> float16 cast): same float32 operations in
 * the same order, built with -ffp-contract=off so that no multiply-add is fused. The numpy forms in
 * formats/transforms.py, formats/quant.py and tokenizer/tokscan.py compute the same results and run where this
 * module is not built.
 *
 * Q8_0, per block of 32 values (gguf-py and ggml-quants.c): d = max|x| / 127, id = d ? 1 / d : 0,
 * q = round(x * id) with halves away from zero, d stored as F16 (round to nearest even). Round-half-away is
 * trunc(y + copysign(0.49999997, y)), equal to C's roundf for every |y| below 2^22 (here |y| <= 127.0001).
 * A block holding Inf / NaN, or so tiny that 1 / d overflows, is not written: the kernel returns how many there
 * were and the caller quantizes the chunk with gguf-py, whose bytes for such blocks are platform-defined.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define QK 32
/* x86-64: an AVX2 build of each kernel beside the baseline one, chosen at load time (GCC / clang ifunc). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define KERNEL
#endif
#define Q8_BYTES (2 + QK)

/* Releases ``n`` Py_buffer pointers given after it. */
static void release(int n, ...) {
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++)
        PyBuffer_Release(va_arg(ap, Py_buffer *));
    va_end(ap);
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* F16 bits of a float32, rounded to nearest even: numpy's float32 -> float16 cast for every input. */
static uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) /* NaN: quiet, top mantissa bits kept */
        return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
    if (ax >= 0x477FF000u) /* >= 65520 (and Inf) rounds to Inf */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) /* below 2^-14: an F16 subnormal (or zero), in units of 2^-24; exact scaling */
        return (uint16_t)(sign | (uint16_t)rintf(bits_f32(ax) * 16777216.0f));
    return (uint16_t)(sign | (((ax + 0x0FFFu + ((ax >> 13) & 1u)) >> 13) - (112u << 10)));
}

/* One block's scale: writes d's F16 bits, returns 1 / d (0 for d == 0), or -1 for a block left to gguf-py. */
static inline float q8_scale(uint32_t amax_bits, uint8_t *o) {
    if (amax_bits >= 0x7F800000u)
        return -1.0f;
    float d = bits_f32(amax_bits) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (isinf(id))
        return -1.0f;
    uint16_t h = f32_to_f16(d);
    o[0] = (uint8_t)(h & 0xFF);
    o[1] = (uint8_t)(h >> 8);
    return id;
}

static inline int8_t q8_round(float x, float id) {
    float y = x * id;
    return (int8_t)(int32_t)(y + copysignf(0.49999997f, y));
}

KERNEL static Py_ssize_t q8_0_from_bf16(const uint16_t *src, uint8_t *dst, Py_ssize_t nblocks) {
    Py_ssize_t bad = 0;
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        const uint16_t *s = src + b * QK;
        int16_t m = 0; /* |x| bits fit int16: a signed maximum, which SSE2 has */
        for (int j = 0; j < QK; j++) {
            int16_t a = (int16_t)(s[j] & 0x7FFFu);
            m = a > m ? a : m;
        }
        uint8_t *o = dst + b * Q8_BYTES;
        float id = q8_scale((uint32_t)m << 16, o);
        if (id < 0.0f) {
            bad++;
            continue;
        }
        int8_t *q = (int8_t *)(o + 2);
        for (int j = 0; j < QK; j++)
            q[j] = q8_round(bits_f32((uint32_t)s[j] << 16), id);
    }
    return bad;
}

KERNEL static Py_ssize_t q8_0_from_f32(const float *src, uint8_t *dst, Py_ssize_t nblocks) {
    Py_ssize_t bad = 0;
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        const float *s = src + b * QK;
        uint32_t m = 0;
        for (int j = 0; j < QK; j++) {
            uint32_t a = f32_bits(s[j]) & 0x7FFFFFFFu;
            m = a > m ? a : m;
        }
        uint8_t *o = dst + b * Q8_BYTES;
        float id = q8_scale(m, o);
        if (id < 0.0f) {
            bad++;
            continue;
        }
        int8_t *q = (int8_t *)(o + 2);
        for (int j = 0; j < QK; j++)
            q[j] = q8_round(s[j], id);
    }
    return bad;
}

static int check_sizes(Py_buffer *src, Py_buffer *dst, Py_ssize_t item, Py_ssize_t *nblocks) {
    if (src->len % (item * QK) != 0) {
        PyErr_Format(PyExc_ValueError, "source of %zd bytes is not whole blocks of %d values", src->len, QK);
        return -1;
    }
    *nblocks = src->len / (item * QK);
    if (dst->len != *nblocks * Q8_BYTES) {
        PyErr_Format(PyExc_ValueError, "destination of %zd bytes, expected %zd", dst->len, *nblocks * Q8_BYTES);
        return -1;
    }
    return 0;
}

static PyObject *py_q8_0(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    int bf16;
    if (!PyArg_ParseTuple(args, "y*w*p", &src, &dst, &bf16))
        return NULL;
    Py_ssize_t nblocks, bad = 0;
    int err = check_sizes(&src, &dst, bf16 ? 2 : 4, &nblocks);
    if (!err) {
        Py_BEGIN_ALLOW_THREADS
        bad = bf16 ? q8_0_from_bf16((const uint16_t *)src.buf, (uint8_t *)dst.buf, nblocks)
                   : q8_0_from_f32((const float *)src.buf, (uint8_t *)dst.buf, nblocks);
        Py_END_ALLOW_THREADS
    }
    release(2, &src, &dst);
    return err ? NULL : PyLong_FromSsize_t(bad);
}

/* F16 bits of BF16 bits: an exponent of 113..142 (an F16 normal number, exact) is rebiased on the bits; the rest
 * (zeros, subnormals, overflows, Inf, NaN) is looked up in ``table``, made by numpy's cast of every BF16 value. */
KERNEL static void bf16_to_f16(const uint16_t *s, const uint16_t *table, uint16_t *d, Py_ssize_t n) {
    const Py_ssize_t step = 64;
    Py_ssize_t i = 0;
    for (; i + step <= n; i += step) {
        uint16_t out_of_range = 0;
        for (Py_ssize_t j = i; j < i + step; j++) {
            uint16_t b = s[j];
            d[j] = (uint16_t)(((uint16_t)(b << 3) + 0x4000u) | (b & 0x8000u));
            out_of_range |= (uint16_t)((uint16_t)((uint16_t)(b << 1) - (113u << 8)) >= (30u << 8));
        }
        if (out_of_range)
            for (Py_ssize_t j = i; j < i + step; j++)
                if ((uint16_t)((uint16_t)(s[j] << 1) - (113u << 8)) >= (30u << 8))
                    d[j] = table[s[j]];
    }
    for (; i < n; i++)
        d[i] = table[s[i]];
}

static PyObject *py_bf16_to_f16(PyObject *self, PyObject *args) {
    Py_buffer src, table, dst;
    if (!PyArg_ParseTuple(args, "y*y*w*", &src, &table, &dst))
        return NULL;
    int err = 0;
    if (table.len != 2 * 65536 || src.len % 2 != 0 || dst.len != src.len) {
        PyErr_SetString(PyExc_ValueError, "bf16_to_f16: a 65536-entry uint16 table and equal uint16 buffers expected");
        err = 1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        bf16_to_f16((const uint16_t *)src.buf, (const uint16_t *)table.buf, (uint16_t *)dst.buf, src.len / 2);
        Py_END_ALLOW_THREADS
    }
    release(3, &src, &table, &dst);
    return err ? NULL : Py_NewRef(Py_None);
}

static PyObject *py_f16_bits(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    if (!PyArg_ParseTuple(args, "y*w*", &src, &dst))
        return NULL;
    int err = 0;
    if (src.len % 4 != 0 || dst.len * 2 != src.len) {
        PyErr_SetString(PyExc_ValueError, "f16_bits: float32 source and a uint16 destination of as many values expected");
        err = 1;
    } else {
        const float *s = (const float *)src.buf;
        uint16_t *d = (uint16_t *)dst.buf;
        Py_ssize_t n = src.len / 4;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            d[i] = f32_to_f16(s[i]);
        Py_END_ALLOW_THREADS
    }
    release(2, &src, &dst);
    return err ? NULL : Py_NewRef(Py_None);
}

/* ModelOpt NVFP4 codes and E4M3 scales -> ggml NVFP4 super-blocks (formats/quant.py nvfp4_repack states the
 * layout): per 64 values, the 4 scale bytes without their sign bits, then each 16-value sub-block's 64-bit word
 * of codes after three delta swaps. Words are read and written in the machine's byte order, as numpy's views. */
KERNEL static void nvfp4_repack(const uint8_t *codes, const uint8_t *scales, uint8_t *out, Py_ssize_t nblocks) {
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        uint32_t sc;
        memcpy(&sc, scales + 4 * b, 4);
        sc &= 0x7F7F7F7Fu;
        uint8_t *o = out + 36 * b;
        memcpy(o, &sc, 4);
        for (int j = 0; j < 4; j++) {
            uint64_t x, t;
            memcpy(&x, codes + 32 * b + 8 * j, 8);
            t = ((x >> 16) ^ x) & 0x00000000FFFF0000ull;
            x ^= t ^ (t << 16);
            t = ((x >> 8) ^ x) & 0x0000FF000000FF00ull;
            x ^= t ^ (t << 8);
            t = ((x >> 4) ^ x) & 0x00F000F000F000F0ull;
            x ^= t ^ (t << 4);
            memcpy(o + 4 + 8 * j, &x, 8);
        }
    }
}

static PyObject *py_nvfp4_repack(PyObject *self, PyObject *args) {
    Py_buffer codes, scales, dst;
    if (!PyArg_ParseTuple(args, "y*y*w*", &codes, &scales, &dst))
        return NULL;
    int err = 0;
    Py_ssize_t nblocks = scales.len / 4;
    if (scales.len % 4 != 0 || codes.len != 32 * nblocks || dst.len != 36 * nblocks) {
        PyErr_Format(PyExc_ValueError, "nvfp4_repack: %zd code bytes, %zd scale bytes and %zd destination bytes do "
                     "not make whole super-blocks (32, 4 and 36 bytes each)", codes.len, scales.len, dst.len);
        err = 1;
    } else {
        Py_BEGIN_ALLOW_THREADS
        nvfp4_repack((const uint8_t *)codes.buf, (const uint8_t *)scales.buf, (uint8_t *)dst.buf, nblocks);
        Py_END_ALLOW_THREADS
    }
    release(3, &codes, &scales, &dst);
    return err ? NULL : Py_NewRef(Py_None);
}

/* ---- the vocabulary index of tokenizer/tokscan.py: span hashes and lookups ----
 * A span is data[start : start + len] of a buffer padded with 8 bytes. Its hash (tokscan.span_hash): with
 * MUL = 0x9E3779B97F4A7C15, x = ((len * MUL + SEED) ^ first word masked to min(len, 8) bytes) * MUL,
 * h = x ^ (x >> 31), then per further 8 bytes x = (h ^ word masked) * MUL, h = x ^ (x >> 31); words little-endian. */
#define H_MUL 0x9E3779B97F4A7C15ull
#define H_SEED 0xC2B2AE3D27D4EB4Full

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static inline uint64_t low_bytes(int64_t n) { return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1; }

static inline uint64_t span_hash(const uint8_t *p, int64_t len) {
    uint64_t x = (((uint64_t)len * H_MUL + H_SEED) ^ (load_le64(p) & low_bytes(len))) * H_MUL;
    uint64_t h = x ^ (x >> 31);
    for (int64_t k = 8; k < len; k += 8) {
        x = (h ^ (load_le64(p + k) & low_bytes(len - k))) * H_MUL;
        h = x ^ (x >> 31);
    }
    return h;
}

/* Spans within their padded buffer: start >= 0, len >= 0, start + len + 8 <= size. */
static int spans_ok(Py_buffer *data, Py_buffer *starts, Py_buffer *lens, Py_ssize_t *n) {
    if (starts->len != lens->len || starts->len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "spans: int64 starts and lengths of one count expected");
        return -1;
    }
    *n = starts->len / 8;
    const int64_t *st = (const int64_t *)starts->buf, *ln = (const int64_t *)lens->buf;
    for (Py_ssize_t i = 0; i < *n; i++)
        if (st[i] < 0 || ln[i] < 0 || st[i] > (int64_t)data->len - 8 - ln[i]) {
            PyErr_Format(PyExc_ValueError, "span %zd (%lld, %lld) is outside its padded buffer of %zd bytes", i,
                         (long long)st[i], (long long)ln[i], data->len);
            return -1;
        }
    return 0;
}

static PyObject *py_span_hash(PyObject *self, PyObject *args) {
    Py_buffer data, starts, lens, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &data, &starts, &lens, &out))
        return NULL;
    Py_ssize_t n = 0;
    int err = spans_ok(&data, &starts, &lens, &n);
    if (!err && out.len != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "span_hash: one uint64 per span expected");
        err = -1;
    }
    if (!err) {
        const uint8_t *d = (const uint8_t *)data.buf;
        const int64_t *st = (const int64_t *)starts.buf, *ln = (const int64_t *)lens.buf;
        uint64_t *h = (uint64_t *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            h[i] = span_hash(d + st[i], ln[i]);
        Py_END_ALLOW_THREADS
    }
    release(4, &data, &starts, &lens, &out);
    return err ? NULL : Py_NewRef(Py_None);
}

/* find_spans(table, hashes, shift, vdata, vstarts, vlens, data, starts, lens, ids) -> number found.
 * ``table``: int32 slots of an open-addressing table (linear probing; slot = hash >> shift; -1 empty) holding
 * token ids; ``hashes``: each token's hash. A span is token t when the probe meets t with the span's hash and
 * the token's bytes equal the span's; ids[i] = t, or -1. The caller's table holds distinct hashes. */
static PyObject *py_find_spans(PyObject *self, PyObject *args) {
    Py_buffer table, hashes, vdata, vstarts, vlens, data, starts, lens, ids;
    int shift;
    if (!PyArg_ParseTuple(args, "y*y*iy*y*y*y*y*y*w*", &table, &hashes, &shift, &vdata, &vstarts, &vlens, &data,
                          &starts, &lens, &ids))
        return NULL;
    Py_ssize_t n = 0, nv = 0, found = 0;
    int err = spans_ok(&data, &starts, &lens, &n);
    if (!err)
        err = spans_ok(&vdata, &vstarts, &vlens, &nv);
    Py_ssize_t slots = table.len / 4;
    if (!err && (ids.len != 8 * n || hashes.len < 8 * nv || slots == 0 || (slots & (slots - 1)) != 0 ||
                 shift < 1 || shift > 63 || ((uint64_t)1 << (64 - shift)) != (uint64_t)slots)) {
        PyErr_SetString(PyExc_ValueError, "find_spans: a power-of-two int32 table, 64 - shift bits, one hash per "
                        "token and one int64 id per span expected");
        err = -1;
    }
    if (!err) {
        const int32_t *tb = (const int32_t *)table.buf;
        const uint64_t *vh = (const uint64_t *)hashes.buf;
        const uint8_t *vd = (const uint8_t *)vdata.buf, *d = (const uint8_t *)data.buf;
        const int64_t *vst = (const int64_t *)vstarts.buf, *vln = (const int64_t *)vlens.buf;
        const int64_t *st = (const int64_t *)starts.buf, *ln = (const int64_t *)lens.buf;
        int64_t *out = (int64_t *)ids.buf;
        uint64_t mask = (uint64_t)slots - 1;
        Py_BEGIN_ALLOW_THREADS
        /* The lookups are bound by random reads (table slot, then the token's hash, length and start, then its
         * bytes): spans go in batches whose reads are prefetched a step ahead, so they overlap. */
        enum { BATCH = 32 };
        uint64_t hb[BATCH], sb[BATCH];
        for (Py_ssize_t i0 = 0; i0 < n; i0 += BATCH) {
            int m = n - i0 < BATCH ? (int)(n - i0) : BATCH;
            for (int j = 0; j < m; j++) {
                hb[j] = span_hash(d + st[i0 + j], ln[i0 + j]);
                sb[j] = hb[j] >> shift;
                __builtin_prefetch(tb + sb[j]);
            }
            for (int j = 0; j < m; j++) {
                int32_t c = tb[sb[j]];
                if (c >= 0 && c < nv) {
                    __builtin_prefetch(vh + c);
                    __builtin_prefetch(vln + c);
                    __builtin_prefetch(vst + c);
                }
            }
            for (int j = 0; j < m; j++) { /* a token longer than 8 bytes is compared: its bytes too */
                int32_t c = tb[sb[j]];
                if (c >= 0 && c < nv && ln[i0 + j] > 8)
                    __builtin_prefetch(vd + vst[c]);
            }
            for (int j = 0; j < m; j++) {
                Py_ssize_t i = i0 + j;
                uint64_t h = hb[j], slot = sb[j];
                int64_t id = -1;
                for (;;) {
                    int32_t c = tb[slot];
                    if (c < 0 || c >= nv) /* empty (a slot naming no token counts as empty) */
                        break;
                    if (vh[c] == h) {
                        if (vln[c] == ln[i] && memcmp(vd + vst[c], d + st[i], (size_t)ln[i]) == 0)
                            id = c;
                        break;
                    }
                    slot = (slot + 1) & mask;
                }
                out[i] = id;
                found += id >= 0;
            }
        }
        Py_END_ALLOW_THREADS
    }
    release(9, &table, &hashes, &vdata, &vstarts, &vlens, &data, &starts, &lens, &ids);
    return err ? NULL : PyLong_FromSsize_t(found);
}

/* pack_pairs(data, lens, out): the GGUF items ``left + " " + right`` (u64 little-endian length, bytes) of strings
 * taken two by two; ``data`` holds the strings joined in order (tokscan.pack_pairs states the layout). */
static PyObject *py_pack_pairs(PyObject *self, PyObject *args) {
    Py_buffer data, lens, out;
    if (!PyArg_ParseTuple(args, "y*y*w*", &data, &lens, &out))
        return NULL;
    int err = 0;
    Py_ssize_t n = lens.len / 8;
    const int64_t *ln = (const int64_t *)lens.buf;
    int64_t total = 0;
    if (lens.len % 16 != 0)
        err = 1;
    for (Py_ssize_t i = 0; !err && i < n; i++) {
        if (ln[i] < 0 || ln[i] > (int64_t)data.len)
            err = 1;
        else
            total += ln[i];
    }
    if (err || total > (int64_t)data.len || out.len != total + 9 * (n / 2)) {
        PyErr_SetString(PyExc_ValueError, "pack_pairs: an even count of string lengths within the data, and an "
                        "output of their total plus 9 bytes per pair expected");
        err = 1;
    }
    if (!err) {
        const uint8_t *src = (const uint8_t *)data.buf;
        uint8_t *o = (uint8_t *)out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i += 2) {
            uint64_t len = (uint64_t)(ln[i] + ln[i + 1] + 1);
            for (int b = 0; b < 8; b++)
                o[b] = (uint8_t)(len >> (8 * b));
            o += 8;
            memcpy(o, src, (size_t)ln[i]);
            o += ln[i];
            src += ln[i];
            *o++ = ' ';
            memcpy(o, src, (size_t)ln[i + 1]);
            o += ln[i + 1];
            src += ln[i + 1];
        }
        Py_END_ALLOW_THREADS
    }
    release(3, &data, &lens, &out);
    return err ? NULL : Py_NewRef(Py_None);
}

/* ---- the tokenizer reader: plain pieces of a vocabulary or of pair-form merges ---- */
static inline int is_ws(uint8_t ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

/* After an entry: whitespace, then the piece's end (only the last piece ends there) or a comma, then the end
 * (only a piece before the last ends right after a comma) or the next entry. 1: the piece is done, 0: an entry
 * follows, -1: not plain. */
static int entry_end(const uint8_t *c, Py_ssize_t len, Py_ssize_t *i, int last) {
    Py_ssize_t k = *i;
    while (k < len && is_ws(c[k]))
        k++;
    if (k >= len)
        return last ? 1 : -1;
    if (c[k] != ',')
        return -1;
    *i = ++k;
    if (k >= len)
        return last ? -1 : 1;
    return 0;
}

/* The strings a piece reader found: raw bodies joined, their lengths (negated minus one for those holding a
 * backslash: the caller unescapes them). */
struct strings {
    uint8_t *body;
    Py_ssize_t blen;
    int64_t *lens;
    Py_ssize_t n, max_n;
};

/* A JSON string at c[*i] (after leading whitespace) appended to ``out``, *i moved past the closing quote and the
 * whitespace after it. Bytes below ``lowest`` (and escapes of them), and a full ``out``, give -1: not plain. */
static int take_string(const uint8_t *c, Py_ssize_t len, Py_ssize_t *i, uint8_t lowest, struct strings *out) {
    Py_ssize_t k = *i;
    while (k < len && is_ws(c[k]))
        k++;
    if (k >= len || c[k] != '"')
        return -1;
    Py_ssize_t s0 = ++k;
    int esc = 0;
    for (;;) {
        if (k >= len || c[k] < lowest)
            return -1;
        if (c[k] == '"')
            break;
        if (c[k] == '\\') {
            if (k + 1 >= len || c[k + 1] < lowest)
                return -1;
            esc = 1;
            k += 2;
        } else {
            k++;
        }
    }
    Py_ssize_t sl = k - s0;
    if (out->n >= out->max_n)
        return -1;
    memcpy(out->body + out->blen, c + s0, (size_t)sl);
    out->blen += sl;
    out->lens[out->n++] = esc ? -(int64_t)sl - 1 : (int64_t)sl;
    k++;
    while (k < len && is_ws(c[k]))
        k++;
    *i = k;
    return 0;
}

/* One entry of a piece at c[*i]: 0 (read, *i past it), -1 (not plain). */
typedef int (*entry_fn)(const uint8_t *c, Py_ssize_t len, Py_ssize_t *i, struct strings *out, void *state);

/* Entries up to the piece's end: their count, or -1 when the piece is not plain. */
static Py_ssize_t scan_entries(const uint8_t *c, Py_ssize_t len, int last, entry_fn entry, void *state,
                               struct strings *out) {
    Py_ssize_t i = 0;
    int end = 0;
    while (end == 0) {
        if (entry(c, len, &i, out, state) < 0)
            return -1;
        end = entry_end(c, len, &i, last);
    }
    return end < 0 ? -1 : out->n;
}

/* Pair-form merges (tokscan.scan_pairs): ws* '[' STR ',' STR ']' with whitespace between; a string holding a
 * space is not plain (the numpy form, which deletes whitespace, decides). */
static int pair_entry(const uint8_t *c, Py_ssize_t len, Py_ssize_t *i, struct strings *out, void *state) {
    (void)state;
    Py_ssize_t k = *i;
    while (k < len && is_ws(c[k]))
        k++;
    if (k >= len || c[k] != '[')
        return -1;
    k++;
    if (take_string(c, len, &k, 33, out) < 0 || k >= len || c[k] != ',')
        return -1;
    k++;
    if (take_string(c, len, &k, 33, out) < 0 || k >= len || c[k] != ']')
        return -1;
    *i = k + 1;
    return 0;
}

/* The decimal digits of the next id of a vocabulary piece, counted up in place. */
struct next_id {
    char digits[24];
    int nd;
};

/* A vocabulary entry (tokscan.vocab_spans): STR ':' ws* ID, ID the next id in decimal (no sign, no leading zero). */
static int vocab_entry(const uint8_t *c, Py_ssize_t len, Py_ssize_t *i, struct strings *out, void *state) {
    struct next_id *id = (struct next_id *)state;
    Py_ssize_t k = *i;
    if (take_string(c, len, &k, 32, out) < 0 || k >= len || c[k] != ':')
        return -1;
    k++;
    while (k < len && is_ws(c[k]))
        k++;
    if (k + id->nd > len || memcmp(c + k, id->digits, (size_t)id->nd) != 0)
        return -1;
    k += id->nd;
    if (k < len && c[k] >= '0' && c[k] <= '9')
        return -1;
    int d = id->nd - 1; /* id + 1 */
    while (d >= 0 && id->digits[d] == '9')
        id->digits[d--] = '0';
    if (d >= 0) {
        id->digits[d]++;
    } else {
        if (id->nd + 1 >= (int)sizeof id->digits)
            return -1;
        memmove(id->digits + 1, id->digits, (size_t)id->nd);
        id->digits[0] = '1';
        id->nd++;
    }
    *i = k;
    return 0;
}

/* scan_pairs(chunk, body, lens, last) / scan_vocab(chunk, body, lens, first_id, last) -> (strings, body bytes) or
 * None: the strings of a piece of pair-form merges, or of a vocabulary object with the ids first_id, first_id + 1,
 * ... in file order, written plainly: entries separated by commas, the last entry's comma absent when ``last``
 * and present otherwise, whitespace between tokens. Each string's raw body goes to ``body``, its length to
 * ``lens``. None for any other piece: the numpy form then decides, as it does without this kernel. */
/* The Python side of scan_pairs (no first id) and scan_vocab: buffers checked, the GIL released for the scan. */
static PyObject *scan_piece(PyObject *args, int vocab) {
    Py_buffer chunk, body, lens;
    long long first = 0;
    int last;
    if (vocab ? !PyArg_ParseTuple(args, "y*w*w*Lp", &chunk, &body, &lens, &first, &last)
              : !PyArg_ParseTuple(args, "y*w*w*p", &chunk, &body, &lens, &last))
        return NULL;
    Py_ssize_t n = -1, blen = 0;
    int err = 0;
    if (body.len < chunk.len || lens.len % 8 != 0 || first < 0) {
        PyErr_SetString(PyExc_ValueError, "scan: a body buffer as long as the piece, int64 lengths and a first id "
                        ">= 0 expected");
        err = 1;
    } else {
        struct strings out = {(uint8_t *)body.buf, 0, (int64_t *)lens.buf, 0, lens.len / 8};
        struct next_id id;
        id.nd = snprintf(id.digits, sizeof id.digits, "%lld", first);
        Py_BEGIN_ALLOW_THREADS
        n = scan_entries((const uint8_t *)chunk.buf, chunk.len, last, vocab ? vocab_entry : pair_entry, &id, &out);
        Py_END_ALLOW_THREADS
        blen = out.blen;
    }
    release(3, &chunk, &body, &lens);
    if (err)
        return NULL;
    if (n < 0)
        return Py_NewRef(Py_None);
    return Py_BuildValue("(nn)", n, blen);
}

static PyObject *py_scan_pairs(PyObject *self, PyObject *args) { return scan_piece(args, 0); }

static PyObject *py_scan_vocab(PyObject *self, PyObject *args) { return scan_piece(args, 1); }

static PyMethodDef methods[] = {
    {"q8_0", py_q8_0, METH_VARARGS,
     "q8_0(src, dst, bf16) -> int: Q8_0 blocks of src (BF16 bits if bf16, else float32) into dst; returns the "
     "number of blocks left unwritten (Inf/NaN or 1/d overflow)."},
    {"bf16_to_f16", py_bf16_to_f16, METH_VARARGS,
     "bf16_to_f16(src, table, dst): F16 bits of BF16 bits; table: the F16 bits of every BF16 value."},
    {"nvfp4_repack", py_nvfp4_repack, METH_VARARGS,
     "nvfp4_repack(codes, scales, dst): ggml NVFP4 super-blocks of ModelOpt NVFP4 codes and E4M3 scales."},
    {"span_hash", py_span_hash, METH_VARARGS, "span_hash(data, starts, lens, out): tokscan.span_hash, compiled."},
    {"find_spans", py_find_spans, METH_VARARGS,
     "find_spans(table, hashes, shift, vdata, vstarts, vlens, data, starts, lens, ids) -> int: token ids of spans."},
    {"pack_pairs", py_pack_pairs, METH_VARARGS, "pack_pairs(data, lens, out): tokscan.pack_pairs, compiled."},
    {"scan_pairs", py_scan_pairs, METH_VARARGS,
     "scan_pairs(chunk, body, lens, last) -> (n, body_len) | None: the strings of a plain piece of pair merges."},
    {"scan_vocab", py_scan_vocab, METH_VARARGS,
     "scan_vocab(chunk, body, lens, first_id, last) -> (n, body_len) | None: the tokens of a plain vocabulary piece."},
    {"f16_bits", py_f16_bits, METH_VARARGS, "f16_bits(src, dst): F16 bits of float32 values (round to nearest even)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
