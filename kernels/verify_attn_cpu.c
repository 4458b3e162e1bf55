/*
 * verify_attn_cpu.c — libverify_attn_cpu.so: the verify-attention ABI (verify_attn.h) on host
 * memory, both conventions (vattn_verify, vattn_extend) through one request loop. It is the
 * reference that CI, replay on GPU-less machines and the GPU tests compare against, so it
 * favours being obviously right and deterministic: fp32 accumulation, one fixed summation
 * order, single-threaded.
 *
 * Loop order (speed matters only enough for CI): per request, per KV row in kv_indices order,
 * the row is converted to fp32 once and then every (draft token, head) accumulator of that
 * request is updated with an online softmax (running max m, running sum l, fp32 acc[512]).
 * The accumulators live in the caller's workspace: nothing here allocates.
 *
 * Built a second time with -DVATTN_PERTURB into build/tests/libverify_attn_cpu_perturbed.so:
 * identical except ONE output element, o[token = (bs-1)*q_len + 0 (the last request's first
 * draft token)][head = num_heads-1][channel 77], which gets +0.5 added (in fp32, before rounding
 * to bf16/fp16). Replay's tests use it to prove that a wrong kernel is caught and located.
 * Built a third time with -DVATTN_SLOW_US=20000 into build/tests/libverify_attn_cpu_slow.so:
 * vattn_verify then sleeps 20 ms plus ten times its own compute (shadow mode's test of a
 * too-slow candidate: far over any slowdown limit the tests set, on a fast build and on a
 * slow one alike).
 */
#include "vattn_check.h"
#include "verify_attn.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef VATTN_SLOW_US
#include <time.h>
#include <unistd.h>
#endif

#define QK VATTN_HEAD_DIM_QK
#define DV VATTN_HEAD_DIM_V

/* Element whose value the perturbed build shifts (documented above and in kernels/README.md). */
#define VATTN_PERTURB_CHANNEL 77
#define VATTN_PERTURB_DELTA 0.5f

/* ---- dtype conversions (bit exact, round-to-nearest-even) ---- */

static inline float vattn_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t vattn_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN (quiet), sign kept */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float vattn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { /* subnormal: m * 2^-24, exact in fp32 */
        float f = (float)m * 0x1p-24f;
        memcpy(&x, &f, 4);
        x |= sign;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t vattn_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return sign | 0x7e00u;
    if (ax >= 0x477ff000u) /* >= 65520: rounds to infinity */
        return sign | 0x7c00u;
    int e = (int)(ax >> 23) - 127;
    uint32_t mant = ax & 0x7fffffu;
    if (e >= -14) {
        uint32_t h = ((uint32_t)(e + 15) << 10) | (mant >> 13), rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is the correct result */
        return sign | (uint16_t)h;
    }
    if (e < -25)
        return sign;
    uint32_t m = mant | 0x800000u; /* value = m * 2^(e-23); half subnormal unit = 2^-24 */
    int shift = -(e + 1);          /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return sign | (uint16_t)r;
}

/* ---- workspace layout: per request, reused across requests ---- */

typedef struct vattn_cpu_ws {
    float *qf;   /* [q_len*H][576] the request's queries in fp32 */
    float *acc;  /* [q_len*H][512] */
    float *m;    /* [q_len*H] running max of the scaled scores */
    float *l;    /* [q_len*H] running sum of exp(s - m) */
    float *krow; /* [576] the current KV row in fp32 */
} vattn_cpu_ws;

static size_t vattn_cpu_ws_floats(int64_t nq)
{
    return (size_t)nq * (QK + DV + 2) + QK;
}

static size_t vattn_cpu_ws_bytes(int bs, int q_len, int heads, int64_t num_slots, int64_t max_kv_len)
{
    if (bs < 1 || q_len < 1 || q_len > VATTN_MAX_Q_LEN || heads < 1 || heads > VATTN_MAX_HEADS ||
        num_slots < 1 || max_kv_len < 0)
        return (size_t)-1;
    return vattn_cpu_ws_floats((int64_t)q_len * heads) * sizeof(float);
}

size_t vattn_workspace_size(const vattn_args *a)
{
    return a ? vattn_cpu_ws_bytes(a->bs, a->q_len, a->num_heads, a->num_slots, a->max_kv_len) : (size_t)-1;
}

size_t vattn_extend_workspace_size(const vattn_extend_args *a)
{
    return a ? vattn_cpu_ws_bytes(a->bs, a->q_len, a->num_heads, a->num_slots, a->max_kv_len) : (size_t)-1;
}

/* 8 independent partial sums: a fixed order (deterministic) the compiler can vectorise. */
static inline float vattn_dot576(const float *a, const float *b)
{
    float s[8] = {0};
    for (int i = 0; i < QK; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static inline float vattn_load(const uint16_t *p, int fp16)
{
    return fp16 ? vattn_f16_to_f32(*p) : vattn_bf16_to_f32(*p);
}

/* One call of either convention, as the request loop sees it: where each key's row lives
 * (the key source) and which draft keys a query sees (the mask source). vattn_verify: every
 * key through kv_indices, visibility [bs][q_len][q_len]; vattn_extend (kext != NULL): the
 * prefix through kv_indices, draft key d of request b = row b * q_len + d of kext, and
 * SGLang's flattened mask rows (only their draft columns are read). Same loop, same
 * arithmetic: the same keys in the same order give the same bits in both conventions. */
typedef struct vattn_cpu_call {
    int fp16, idx64, bs, q_len, H;
    float sm_scale;
    const uint16_t *q, *kv, *kext;
    int64_t q_st, q_sh, kv_stride, kext_stride;
    const int32_t *indptr;
    const void *indices;
    const uint8_t *vis;      /* vattn_verify: [bs][q_len][q_len] or NULL (causal) */
    const uint8_t *cmask;    /* vattn_extend: flattened mask rows or NULL (causal) */
    const int64_t *mask_indptr;
    uint16_t *o;
    int64_t o_st, o_sh;
    float *lse;
} vattn_cpu_call;

static void vattn_cpu_request(const vattn_cpu_call *a, int b, const vattn_cpu_ws *w)
{
    const int fp16 = a->fp16;
    const int ql = a->q_len, H = a->H, nq = ql * H;
    const int64_t start = a->indptr[b], range = (int64_t)a->indptr[b + 1] - start;
    /* vattn_verify: the range holds every key, the last q_len are the drafts; vattn_extend: the
     * range is the prefix, the drafts follow from kext */
    const int64_t kv_len = a->kext ? range + ql : range, prefix = kv_len - ql;
    const uint8_t *mrow = NULL; /* draft column 0 of query 0's mask row; NULL = causal */
    int64_t mstride = 0;
    if (a->kext && a->cmask) {
        mrow = a->cmask + a->mask_indptr[b] + prefix;
        mstride = kv_len;
    } else if (!a->kext && a->vis) {
        mrow = a->vis + (size_t)b * ql * ql;
        mstride = ql;
    }

    for (int i = 0; i < ql; i++)
        for (int h = 0; h < H; h++) {
            const uint16_t *src = a->q + ((int64_t)b * ql + i) * a->q_st + h * a->q_sh;
            float *dst = w->qf + (size_t)(i * H + h) * QK;
            for (int c = 0; c < QK; c++)
                dst[c] = vattn_load(src + c, fp16);
        }
    for (int r = 0; r < nq; r++) {
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    memset(w->acc, 0, (size_t)nq * DV * sizeof(float));

    for (int64_t j = 0; j < kv_len; j++) {
        const uint16_t *row;
        if (a->kext && j >= prefix) {
            row = a->kext + ((int64_t)b * ql + (j - prefix)) * a->kext_stride;
        } else {
            int64_t slot = a->idx64 ? ((const int64_t *)a->indices)[start + j]
                                    : ((const int32_t *)a->indices)[start + j];
            row = a->kv + slot * a->kv_stride;
        }
        for (int c = 0; c < QK; c++)
            w->krow[c] = vattn_load(row + c, fp16);
        for (int i = 0; i < ql; i++) {
            if (j >= prefix) {
                int64_t jj = j - prefix; /* draft key index */
                int visible = mrow ? mrow[i * mstride + jj] != 0 : jj <= i;
                if (!visible)
                    continue;
            }
            for (int h = 0; h < H; h++) {
                const int r = i * H + h;
                float s = a->sm_scale * vattn_dot576(w->qf + (size_t)r * QK, w->krow);
                float *acc = w->acc + (size_t)r * DV;
                if (s > w->m[r]) {
                    float alpha = expf(w->m[r] - s); /* exp(-inf) = 0 on the first key */
                    w->l[r] *= alpha;
                    for (int c = 0; c < DV; c++)
                        acc[c] *= alpha;
                    w->m[r] = s;
                }
                float p = expf(s - w->m[r]); /* NaN scores propagate through p */
                w->l[r] += p;
                for (int c = 0; c < DV; c++)
                    acc[c] += p * w->krow[c];
            }
        }
    }

    for (int i = 0; i < ql; i++)
        for (int h = 0; h < H; h++) {
            const int r = i * H + h;
            const int64_t t = (int64_t)b * ql + i;
            uint16_t *dst = a->o + t * a->o_st + h * a->o_sh;
            const float *acc = w->acc + (size_t)r * DV;
            const int empty = w->l[r] == 0.0f; /* no visible key */
            const float inv = empty ? 0.0f : 1.0f / w->l[r];
            for (int c = 0; c < DV; c++) {
                float v = empty ? 0.0f : acc[c] * inv;
#ifdef VATTN_PERTURB
                if (b == a->bs - 1 && i == 0 && h == H - 1 && c == VATTN_PERTURB_CHANNEL)
                    v += VATTN_PERTURB_DELTA;
#endif
                dst[c] = fp16 ? vattn_f32_to_f16(v) : vattn_f32_to_bf16(v);
            }
            if (a->lse)
                a->lse[t * H + h] = empty ? -INFINITY : w->m[r] + logf(w->l[r]);
        }
}

/* Every request of a checked call, with the workspace carved up per vattn_cpu_ws. */
static void vattn_cpu_run(const vattn_cpu_call *c, void *workspace)
{
    const int64_t nq = (int64_t)c->q_len * c->H;
    float *base = (float *)workspace;
    vattn_cpu_ws w = {
        .qf = base,
        .acc = base + nq * QK,
        .m = base + nq * (QK + DV),
        .l = base + nq * (QK + DV + 1),
        .krow = base + nq * (QK + DV + 2),
    };
    for (int b = 0; b < c->bs; b++)
        vattn_cpu_request(c, b, &w);
}

/* The fields both conventions share (the convention-specific ones stay zero). */
#define VATTN_CPU_CALL_COMMON(a)                                                                \
    .fp16 = (a)->dtype == VATTN_DTYPE_FP16, .idx64 = (a)->index_type == VATTN_INDEX_INT64,      \
    .bs = (a)->bs, .q_len = (a)->q_len, .H = (a)->num_heads, .sm_scale = (a)->sm_scale,         \
    .q = (const uint16_t *)(a)->q, .kv = (const uint16_t *)(a)->kv_cache,                       \
    .q_st = (a)->q_stride_t, .q_sh = (a)->q_stride_h, .kv_stride = (a)->kv_stride,              \
    .indptr = (a)->kv_indptr, .indices = (a)->kv_indices, .o = (uint16_t *)(a)->o,              \
    .o_st = (a)->o_stride_t, .o_sh = (a)->o_stride_h, .lse = (a)->lse

int vattn_verify(const vattn_args *a, void *workspace, size_t workspace_bytes, void *stream)
{
    (void)stream;
#ifdef VATTN_SLOW_US
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
#endif
    int rc = vattn_check_args_ws(a, workspace, workspace_bytes, 0, vattn_workspace_size(a));
    if (rc)
        return rc;
    rc = vattn_check_host_data(a);
    if (rc)
        return rc;
    const vattn_cpu_call c = {VATTN_CPU_CALL_COMMON(a), .vis = a->visibility};
    vattn_cpu_run(&c, workspace);
#ifdef VATTN_SLOW_US
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
    usleep(VATTN_SLOW_US + (useconds_t)(10 * us));
#endif
    return VATTN_OK;
}

int vattn_verify_reference(const vattn_args *a, void *workspace, size_t workspace_bytes,
                           void *stream)
{
    return vattn_verify(a, workspace, workspace_bytes, stream);
}

int vattn_extend(const vattn_extend_args *a, void *workspace, size_t workspace_bytes, void *stream)
{
    (void)stream;
    int rc = vattn_check_extend_args_ws(a, workspace, workspace_bytes, 0, vattn_extend_workspace_size(a));
    if (rc)
        return rc;
    rc = vattn_check_extend_host_data(a);
    if (rc)
        return rc;
    const vattn_cpu_call c = {VATTN_CPU_CALL_COMMON(a), .kext = (const uint16_t *)a->k_extend,
                              .kext_stride = a->k_extend_stride, .cmask = a->custom_mask,
                              .mask_indptr = a->mask_indptr};
    vattn_cpu_run(&c, workspace);
    return VATTN_OK;
}

int vattn_extend_reference(const vattn_extend_args *a, void *workspace, size_t workspace_bytes,
                           void *stream)
{
    return vattn_extend(a, workspace, workspace_bytes, stream);
}

int vattn_abi_version(void) { return VATTN_ABI_VERSION; }

const char *vattn_backend(void) { return "cpu"; }

const char *vattn_status_string(int status) { return vattn_status_message(status); }

const char *vattn_last_cuda_error(void) { return ""; }
