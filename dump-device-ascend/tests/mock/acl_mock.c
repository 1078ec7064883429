/*
 * A mock of the ACL runtime / aclnn symbols used by dump-device-ascend's `acl` backend, over
 * host memory ("device" pointers are host pointers). Built by tests/acl_mock.rs with
 * `cc -shared -fPIC`. It
 *   - validates the marshalling the real operators require (non-null handles, dim = every
 *     axis exactly once, keepDim false, contiguous ND input, 0-d output of the right dtype,
 *     the workspace size of the first phase passed to the second, a non-null workspace when
 *     one was asked for) and answers 161001 / 161002 like aclnn;
 *   - computes amax / amin / mean / norm, accumulating either wide (f64, rounded once to the
 *     output dtype: a device in `high` mode) or in the output dtype with rounding after every
 *     step (`low` mode), see mock_set_wide;
 *   - records every call ("name;" per call, read with mock_log), can be told to fail one
 *     function (mock_fail), and counts live allocations and handles (mock_live).
 * -DMOCK_OMIT_NORM leaves aclnnNormGetWorkspaceSize out (missing-symbol test).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { DT_F32 = 0, DT_F16 = 1, DT_I8 = 2, DT_I32 = 3, DT_U8 = 4, DT_I16 = 6, DT_I64 = 9,
       DT_F64 = 11, DT_BOOL = 12, DT_BF16 = 27 };
enum { NULLPTR = 161001, INVALID = 161002 };
enum { MAXD = 16, TMAGIC = 0x7e501, AMAGIC = 0x7e502, SMAGIC = 0x7e503, EMAGIC = 0x7e504 };
enum { OP_MAX, OP_MIN, OP_MEAN, OP_NORM };

typedef struct {
    int magic;
    int64_t dims[MAXD], strides[MAXD], sdims[MAXD];
    uint64_t ndim, nsdim;
    int32_t dtype, format;
    int64_t offset;
    void *data;
} Tensor;
typedef struct { int magic; int64_t v[MAXD]; uint64_t n; } IntArray;
typedef struct { int magic; double value; } Scalar;
typedef struct {
    int magic, op;
    const Tensor *self;
    Tensor *out;
    double p;
    uint64_t ws;
} Executor;

static char g_log[1 << 16];
static size_t g_log_len;
static char g_fail[64];
static int g_fail_status;
static int g_wide = 1;
static long g_live;

void mock_reset(void) { g_log_len = 0; g_fail[0] = 0; g_live = 0; }
size_t mock_log(char *buf, size_t cap) {
    size_t n = g_log_len < cap ? g_log_len : cap;
    memcpy(buf, g_log, n);
    return g_log_len;
}
void mock_fail(const char *name, int status) {
    strncpy(g_fail, name, sizeof g_fail - 1);
    g_fail[sizeof g_fail - 1] = 0;
    g_fail_status = status;
}
void mock_set_wide(int wide) { g_wide = wide; }
long mock_live(void) { return g_live; }

/* Logs the call; returns non-zero when it must fail. */
static int enter(const char *name) {
    size_t n = strlen(name);
    if (g_log_len + n + 1 < sizeof g_log) {
        memcpy(g_log + g_log_len, name, n);
        g_log_len += n;
        g_log[g_log_len++] = ';';
    }
    return g_fail[0] && strcmp(g_fail, name) == 0;
}

/* ---- fp16 / bf16 ---- */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) bits = sign | 0x7f800000u | (m << 13);
    else bits = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);
    if (ax >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                      /* below 2^-14: subnormal or zero */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t h = ((((ax >> 23) - 112) << 10) | ((ax & 0x7fffff) >> 13));
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}
static float bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
/* Rounds an f32 to the precision of a float dtype. */
static float rnd(int dt, float v) {
    if (dt == DT_F16) return f16_to_f32(f32_to_f16(v));
    if (dt == DT_BF16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

static int is_float(int dt) { return dt == DT_F32 || dt == DT_F16 || dt == DT_F64 || dt == DT_BF16; }
static int known(int dt) {
    return is_float(dt) || dt == DT_I8 || dt == DT_I32 || dt == DT_U8 || dt == DT_I16 ||
           dt == DT_I64 || dt == DT_BOOL;
}

static double getf(const Tensor *t, uint64_t i) {
    const unsigned char *p = t->data;
    uint16_t h;
    float f;
    double d;
    switch (t->dtype) {
    case DT_F16: memcpy(&h, p + 2 * i, 2); return f16_to_f32(h);
    case DT_BF16: memcpy(&h, p + 2 * i, 2); return bf16_to_f32(h);
    case DT_F32: memcpy(&f, p + 4 * i, 4); return f;
    default: memcpy(&d, p + 8 * i, 8); return d;
    }
}
static int64_t geti(const Tensor *t, uint64_t i) {
    const unsigned char *p = t->data;
    int16_t s;
    int32_t w;
    int64_t q;
    switch (t->dtype) {
    case DT_I8: return (int8_t)p[i];
    case DT_U8: return p[i];
    case DT_BOOL: return p[i] != 0;
    case DT_I16: memcpy(&s, p + 2 * i, 2); return s;
    case DT_I32: memcpy(&w, p + 4 * i, 4); return w;
    default: memcpy(&q, p + 8 * i, 8); return q;
    }
}
static void putf(Tensor *t, double v) {
    unsigned char *p = t->data;
    uint16_t h;
    float f = (float)v;
    switch (t->dtype) {
    case DT_F16: h = f32_to_f16(f); memcpy(p, &h, 2); break;
    case DT_BF16: h = f32_to_bf16(f); memcpy(p, &h, 2); break;
    case DT_F32: memcpy(p, &f, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}
static void puti(Tensor *t, int64_t v) {
    unsigned char *p = t->data;
    int16_t s = (int16_t)v;
    int32_t w = (int32_t)v;
    switch (t->dtype) {
    case DT_I8: case DT_U8: p[0] = (unsigned char)v; break;
    case DT_BOOL: p[0] = v != 0; break;
    case DT_I16: memcpy(p, &s, 2); break;
    case DT_I32: memcpy(p, &w, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

/* ---- object model (libnnopbase) ---- */
void *aclCreateTensor(const int64_t *dims, uint64_t ndim, int32_t dtype, const int64_t *strides,
                      int64_t offset, int32_t format, const int64_t *sdims, uint64_t nsdim,
                      void *data) {
    if (enter("aclCreateTensor")) return NULL;
    if (ndim > MAXD || nsdim > MAXD || (ndim && (!dims || !strides)) || (nsdim && !sdims))
        return NULL;
    Tensor *t = calloc(1, sizeof *t);
    t->magic = TMAGIC;
    t->ndim = ndim;
    t->nsdim = nsdim;
    memcpy(t->dims, dims, ndim * 8);
    memcpy(t->strides, strides, ndim * 8);
    memcpy(t->sdims, sdims, nsdim * 8);
    t->dtype = dtype;
    t->format = format;
    t->offset = offset;
    t->data = data;
    g_live++;
    return t;
}
int aclDestroyTensor(const void *p) {
    Tensor *t = (Tensor *)p;
    if (enter("aclDestroyTensor")) return g_fail_status;
    if (!t) return NULLPTR;
    if (t->magic != TMAGIC) return INVALID;
    t->magic = 0;
    free(t);
    g_live--;
    return 0;
}
void *aclCreateIntArray(const int64_t *v, uint64_t n) {
    if (enter("aclCreateIntArray")) return NULL;
    if (n > MAXD || (n && !v)) return NULL;
    IntArray *a = calloc(1, sizeof *a);
    a->magic = AMAGIC;
    a->n = n;
    memcpy(a->v, v, n * 8);
    g_live++;
    return a;
}
int aclDestroyIntArray(const void *p) {
    IntArray *a = (IntArray *)p;
    if (enter("aclDestroyIntArray")) return g_fail_status;
    if (!a) return NULLPTR;
    if (a->magic != AMAGIC) return INVALID;
    a->magic = 0;
    free(a);
    g_live--;
    return 0;
}
void *aclCreateScalar(void *value, int32_t dtype) {
    if (enter("aclCreateScalar")) return NULL;
    if (!value || (dtype != DT_F32 && dtype != DT_F64)) return NULL;
    Scalar *s = calloc(1, sizeof *s);
    s->magic = SMAGIC;
    s->value = dtype == DT_F32 ? *(float *)value : *(double *)value;
    g_live++;
    return s;
}
int aclDestroyScalar(const void *p) {
    Scalar *s = (Scalar *)p;
    if (enter("aclDestroyScalar")) return g_fail_status;
    if (!s) return NULLPTR;
    if (s->magic != SMAGIC) return INVALID;
    s->magic = 0;
    free(s);
    g_live--;
    return 0;
}

/* ---- runtime (libascendcl) ---- */
int aclrtMalloc(void **p, size_t size, int policy) {
    (void)policy;
    if (enter("aclrtMalloc")) return g_fail_status;
    if (!p || size == 0) return 107000;
    *p = aligned_alloc(32, (size + 31) / 32 * 32);
    g_live++;
    return 0;
}
int aclrtFree(void *p) {
    if (enter("aclrtFree")) return g_fail_status;
    free(p);
    g_live--;
    return 0;
}
int aclrtMemcpy(void *dst, size_t dmax, const void *src, size_t count, int kind) {
    if (enter("aclrtMemcpy")) return g_fail_status;
    if (!dst || !src || count > dmax || kind < 0 || kind > 3) return 107000;
    memcpy(dst, src, count);
    return 0;
}
int aclrtSynchronizeStream(void *stream) {
    (void)stream;
    return enter("aclrtSynchronizeStream") ? g_fail_status : 0;
}

/* ---- operators (libopapi) ---- */
static int validate(const Tensor *self, const IntArray *dim, bool keep, const Tensor *out,
                    const uint64_t *ws, void **exec) {
    if (!self || !dim || !out || !ws || !exec) return NULLPTR;
    if (self->magic != TMAGIC || out->magic != TMAGIC || dim->magic != AMAGIC) return INVALID;
    if (!self->data || !out->data) return NULLPTR;
    if (keep || out->ndim != 0 || self->format != 2 || self->offset != 0) return INVALID;
    if (!known(self->dtype) || dim->n != self->ndim || self->nsdim != self->ndim) return INVALID;
    int seen[MAXD] = {0};
    for (uint64_t i = 0; i < dim->n; i++) {
        int64_t a = dim->v[i];
        if (a < 0 || (uint64_t)a >= self->ndim || seen[a]) return INVALID;
        seen[a] = 1;
    }
    int64_t stride = 1;
    for (uint64_t i = self->ndim; i-- > 0;) {
        if (self->strides[i] != stride || self->sdims[i] != self->dims[i]) return INVALID;
        stride *= self->dims[i];
    }
    return 0;
}
static int first_phase(int op, const Tensor *self, double p, Tensor *out, uint64_t ws_size,
                       uint64_t *ws, void **exec) {
    Executor *e = calloc(1, sizeof *e);
    e->magic = EMAGIC;
    e->op = op;
    e->self = self;
    e->out = out;
    e->p = p;
    e->ws = ws_size;
    *ws = ws_size;
    *exec = e;
    g_live++;
    return 0;
}
int aclnnAmaxGetWorkspaceSize(const void *self, const void *dim, bool keep, void *out,
                              uint64_t *ws, void **exec) {
    if (enter("aclnnAmaxGetWorkspaceSize")) return g_fail_status;
    int r = validate(self, dim, keep, out, ws, exec);
    if (r) return r;
    if (((const Tensor *)out)->dtype != ((const Tensor *)self)->dtype) return INVALID;
    return first_phase(OP_MAX, self, 0, out, 0, ws, exec);
}
int aclnnAminGetWorkspaceSize(const void *self, const void *dim, bool keep, void *out,
                              uint64_t *ws, void **exec) {
    if (enter("aclnnAminGetWorkspaceSize")) return g_fail_status;
    int r = validate(self, dim, keep, out, ws, exec);
    if (r) return r;
    if (((const Tensor *)out)->dtype != ((const Tensor *)self)->dtype) return INVALID;
    return first_phase(OP_MIN, self, 0, out, 0, ws, exec);
}
int aclnnMeanGetWorkspaceSize(const void *self, const void *dim, bool keep, int32_t dtype,
                              void *out, uint64_t *ws, void **exec) {
    if (enter("aclnnMeanGetWorkspaceSize")) return g_fail_status;
    int r = validate(self, dim, keep, out, ws, exec);
    if (r) return r;
    if (((const Tensor *)out)->dtype != dtype || ((const Tensor *)self)->dtype == DT_BOOL)
        return INVALID;
    return first_phase(OP_MEAN, self, 0, out, 256, ws, exec);
}
#ifndef MOCK_OMIT_NORM
int aclnnNormGetWorkspaceSize(const void *self, const void *pscalar, const void *dim, bool keep,
                              void *out, uint64_t *ws, void **exec) {
    if (enter("aclnnNormGetWorkspaceSize")) return g_fail_status;
    if (!pscalar) return NULLPTR;
    const Scalar *p = pscalar;
    int r = validate(self, dim, keep, out, ws, exec);
    if (r) return r;
    int sd = ((const Tensor *)self)->dtype, od = ((const Tensor *)out)->dtype;
    if (p->magic != SMAGIC || (sd != DT_F32 && sd != DT_F16 && sd != DT_BF16) ||
        (od != DT_F32 && od != DT_F16 && od != DT_BF16))
        return INVALID;
    return first_phase(OP_NORM, self, p->value, out, 512, ws, exec);
}
#endif

static void compute(const Executor *e) {
    const Tensor *t = e->self;
    Tensor *out = e->out;
    uint64_t n = 1;
    for (uint64_t i = 0; i < t->ndim; i++) n *= (uint64_t)t->dims[i];
    if (!is_float(t->dtype)) {
        int64_t mx = INT64_MIN, mn = INT64_MAX, sum = 0;
        for (uint64_t i = 0; i < n; i++) {
            int64_t v = geti(t, i);
            mx = v > mx ? v : mx;
            mn = v < mn ? v : mn;
            sum += v;
        }
        if (e->op == OP_MAX) puti(out, mx);
        else if (e->op == OP_MIN) puti(out, mn);
        else if (is_float(out->dtype)) putf(out, (float)((double)sum / (double)n));
        else puti(out, sum / (int64_t)n);
        return;
    }
    double mx = -INFINITY, mn = INFINITY, sum = 0, sq = 0, nan = 0;
    int has_nan = 0;
    int dt = out->dtype;
    float acc = 0, acc_sq = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = getf(t, i);
        if (isnan(v)) {
            if (!has_nan) nan = v;
            has_nan = 1;
            continue;
        }
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
        sum += v;
        sq += v * v;
        float x = (float)v;
        acc = rnd(dt, acc + x);
        acc_sq = rnd(dt, acc_sq + rnd(dt, x * x));
    }
    double r;
    if (has_nan) r = nan;
    else if (e->op == OP_MAX) r = mx;
    else if (e->op == OP_MIN) r = mn;
    else if (e->op == OP_MEAN)
        r = (g_wide || dt == DT_F64) ? sum / (double)n : rnd(dt, (float)((double)acc / (double)n));
    else
        r = g_wide ? (double)(float)sqrt(sq) : rnd(dt, sqrtf(acc_sq));
    if (e->op == OP_NORM && e->p != 2.0) r = NAN; /* only p = 2 is modelled */
    putf(out, r);
}
static int second_phase(const char *name, int op, void *ws, uint64_t size, void *exec) {
    if (enter(name)) return g_fail_status;
    Executor *e = exec;
    if (!e) return NULLPTR;
    if (e->magic != EMAGIC || e->op != op || size != e->ws) return INVALID;
    if (size && !ws) return NULLPTR;
    if (size) memset(ws, 0xAB, size); /* touches every byte the first phase asked for */
    compute(e);
    e->magic = 0;
    free(e);
    g_live--;
    return 0;
}
int aclnnAmax(void *ws, uint64_t size, void *exec, void *stream) {
    (void)stream;
    return second_phase("aclnnAmax", OP_MAX, ws, size, exec);
}
int aclnnAmin(void *ws, uint64_t size, void *exec, void *stream) {
    (void)stream;
    return second_phase("aclnnAmin", OP_MIN, ws, size, exec);
}
int aclnnMean(void *ws, uint64_t size, void *exec, void *stream) {
    (void)stream;
    return second_phase("aclnnMean", OP_MEAN, ws, size, exec);
}
int aclnnNorm(void *ws, uint64_t size, void *exec, void *stream) {
    (void)stream;
    return second_phase("aclnnNorm", OP_NORM, ws, size, exec);
}
