/* Compiled kernels of the tensor stream: Q8_0 quantization, BF16 -> F16 and the NVFP4 repack.
 *
 * Each kernel is one pass over a chunk with the GIL released, so the conversion threads run them on every core.
 * The bytes are those of gguf-py (gguf.quants Q8_0, numpy's float32 -> float16 cast): same float32 operations in
 * the same order, built with -ffp-contract=off so that no multiply-add is fused. The numpy forms in
 * formats/transforms.py compute the same bytes and run where this module is not built.
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
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
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
    PyBuffer_Release(&src);
    PyBuffer_Release(&table);
    PyBuffer_Release(&dst);
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
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
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
    PyBuffer_Release(&codes);
    PyBuffer_Release(&scales);
    PyBuffer_Release(&dst);
    return err ? NULL : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"q8_0", py_q8_0, METH_VARARGS,
     "q8_0(src, dst, bf16) -> int: Q8_0 blocks of src (BF16 bits if bf16, else float32) into dst; returns the "
     "number of blocks left unwritten (Inf/NaN or 1/d overflow)."},
    {"bf16_to_f16", py_bf16_to_f16, METH_VARARGS,
     "bf16_to_f16(src, table, dst): F16 bits of BF16 bits; table: the F16 bits of every BF16 value."},
    {"nvfp4_repack", py_nvfp4_repack, METH_VARARGS,
     "nvfp4_repack(codes, scales, dst): ggml NVFP4 super-blocks of ModelOpt NVFP4 codes and E4M3 scales."},
    {"f16_bits", py_f16_bits, METH_VARARGS, "f16_bits(src, dst): F16 bits of float32 values (round to nearest even)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
