/*
 * vattn_demo_client.c — a stand-in for the inference server in `make demo` and the e2e test.
 *
 * It binds the kernel library the way SGLang's Python side does (dlopen + dlsym, like
 * ctypes.CDLL), then runs speculative-decoding verify steps the way a DFlash-style server
 * issues them: several layers per step, a few batches, ragged prefixes (0 included), draft
 * tokens already written into a page_size = 1 KV pool at scattered slots, int64 kv_indices,
 * causal and tree visibility. Works on the CPU library (host memory) and on the CUDA library
 * (device memory through the run-time loaded driver API, so it links no CUDA library).
 * It prints one line per call with an output checksum, so a run under `kcap record` can be
 * compared byte for byte with a run without it.
 */
#include "kcap_cu.h"
#include "verify_attn.h"
#include "../testkit.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *lib;
    int steps, layers, bs, q_len, heads, max_prefix;
    uint64_t seed;
} client_opts;

typedef int (*verify_fn)(const vattn_args *, void *, size_t, void *);
typedef size_t (*wsize_fn)(const vattn_args *);
typedef const char *(*backend_fn)(void);
typedef const char *(*status_fn)(int);

static tk_rng rng_state; /* the test kit's generator, seeded by --seed */

/* Memory of the library's kind: host malloc, or device memory through the driver API. */
typedef struct {
    const kcap_cu *cu; /* NULL = host */
} mem_ctx;

static void *mem_alloc(mem_ctx *m, size_t n)
{
    if (!m->cu)
        return malloc(n ? n : 1);
    CUdeviceptr p = 0;
    return m->cu->cuMemAlloc(&p, n ? n : 1) == CUDA_SUCCESS ? (void *)(uintptr_t)p : NULL;
}
static void mem_free(mem_ctx *m, void *p)
{
    if (!p)
        return;
    if (m->cu)
        m->cu->cuMemFree((CUdeviceptr)(uintptr_t)p);
    else
        free(p);
}
static int mem_put(mem_ctx *m, void *dst, const void *src, size_t n)
{
    if (!m->cu) {
        memcpy(dst, src, n);
        return 0;
    }
    return m->cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n) != CUDA_SUCCESS;
}
static int mem_get(mem_ctx *m, void *dst, const void *src, size_t n)
{
    if (!m->cu) {
        memcpy(dst, src, n);
        return 0;
    }
    return m->cu->cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n) != CUDA_SUCCESS;
}

static int usage(void)
{
    fprintf(stderr, "usage: vattn_demo_client --lib LIB.so [--steps N] [--layers N] [--bs N] "
                    "[--q-len N] [--heads N] [--max-prefix N] [--seed N]\n");
    return 2;
}

static int parse(int argc, char **argv, client_opts *o)
{
    *o = (client_opts){NULL, 2, 3, 3, 4, 8, 600, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return usage();
        const char *v = argv[++i];
        long n = strtol(v, NULL, 10);
        if (!strcmp(a, "--lib"))
            o->lib = v;
        else if (!strcmp(a, "--steps"))
            o->steps = (int)n;
        else if (!strcmp(a, "--layers"))
            o->layers = (int)n;
        else if (!strcmp(a, "--bs"))
            o->bs = (int)n;
        else if (!strcmp(a, "--q-len"))
            o->q_len = (int)n;
        else if (!strcmp(a, "--heads"))
            o->heads = (int)n;
        else if (!strcmp(a, "--max-prefix"))
            o->max_prefix = (int)n;
        else if (!strcmp(a, "--seed"))
            o->seed = (uint64_t)n;
        else
            return usage();
    }
    if (!o->lib || o->steps < 1 || o->layers < 1 || o->bs < 1 || o->q_len < 1 ||
        o->q_len > VATTN_MAX_Q_LEN || o->heads < 1 || o->heads > VATTN_MAX_HEADS ||
        o->max_prefix < 0)
        return usage();
    return 0;
}

/* A draft tree: token i's parent is some earlier token (or the root); visible = ancestors. */
static void make_visibility(uint8_t *vis, int q_len, int tree)
{
    int parent[VATTN_MAX_Q_LEN];
    for (int i = 0; i < q_len; i++) {
        parent[i] = tree ? (i == 0 ? -1 : tk_int(&rng_state, i)) : i - 1;
        for (int j = 0; j < q_len; j++)
            vis[i * q_len + j] = 0;
        for (int j = i; j >= 0; j = parent[j])
            vis[i * q_len + j] = 1;
    }
}

int main(int argc, char **argv)
{
    client_opts o;
    if (parse(argc, argv, &o))
        return 2;
    rng_state = o.seed;

    void *h = dlopen(o.lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "vattn_demo_client: cannot load %s: %s\n", o.lib, dlerror());
        return 1;
    }
    verify_fn verify = (verify_fn)dlsym(h, "vattn_verify");
    wsize_fn wsize = (wsize_fn)dlsym(h, "vattn_workspace_size");
    backend_fn backend = (backend_fn)dlsym(h, "vattn_backend");
    status_fn status_str = (status_fn)dlsym(h, "vattn_status_string");
    if (!verify || !wsize || !backend || !status_str) {
        fprintf(stderr, "vattn_demo_client: %s does not export the vattn ABI\n", o.lib);
        return 1;
    }
    mem_ctx m = {NULL};
    if (!strcmp(backend(), "cuda")) {
        const char *why = "";
        m.cu = kcap_cu_load(&why);
        CUdevice dev;
        CUcontext ctx;
        if (!m.cu || m.cu->cuDeviceGet(&dev, 0) || m.cu->cuDevicePrimaryCtxRetain(&ctx, dev) ||
            m.cu->cuCtxSetCurrent(ctx)) {
            fprintf(stderr, "vattn_demo_client: CUDA library but no GPU: %s\n", why);
            return 1;
        }
    }

    const int D = VATTN_HEAD_DIM_QK, DV = VATTN_HEAD_DIM_V;
    const int64_t num_slots = (int64_t)o.bs * (o.max_prefix + o.q_len) * 2 + 64;
    /* The pool: every slot holds random bf16 KV; the requests use a random subset. */
    size_t pool_elems = (size_t)num_slots * D;
    uint16_t *pool_h = malloc(pool_elems * 2);
    int64_t *perm = malloc(sizeof(int64_t) * num_slots);
    if (!pool_h || !perm)
        return 1;
    for (size_t i = 0; i < pool_elems; i++)
        pool_h[i] = tk_bf16((float)(tk_unit(&rng_state) * 2 - 1));
    void *pool_d = mem_alloc(&m, pool_elems * 2);
    if (!pool_d || mem_put(&m, pool_d, pool_h, pool_elems * 2))
        return 1;

    uint64_t call = 0;
    int rc = 0;
    for (int step = 0; step < o.steps && !rc; step++) {
        /* Per step: one batch shape (prefixes grow between steps like a real decode). */
        int bs = o.bs, T = bs * o.q_len, H = o.heads;
        int32_t *indptr = malloc(sizeof(int32_t) * (bs + 1));
        indptr[0] = 0;
        int64_t max_kv = 0;
        for (int b = 0; b < bs; b++) {
            int prefix = (b == 0 && step == 0) ? 0 : tk_int(&rng_state, o.max_prefix + 1);
            indptr[b + 1] = indptr[b] + prefix + o.q_len;
            if (prefix + o.q_len > max_kv)
                max_kv = prefix + o.q_len;
        }
        int nnz = indptr[bs];
        tk_shuffle(&rng_state, perm, num_slots); /* page_size = 1: scattered slots */
        uint8_t *vis = malloc((size_t)bs * o.q_len * o.q_len);
        for (int b = 0; b < bs; b++)
            make_visibility(vis + (size_t)b * o.q_len * o.q_len, o.q_len, step % 2);
        size_t q_elems = (size_t)T * H * D, o_elems = (size_t)T * H * DV;
        uint16_t *q_h = malloc(q_elems * 2), *o_h = malloc(o_elems * 2);
        float *lse_h = malloc(sizeof(float) * T * H);

        void *indptr_d = mem_alloc(&m, sizeof(int32_t) * (bs + 1));
        void *indices_d = mem_alloc(&m, sizeof(int64_t) * nnz);
        void *vis_d = mem_alloc(&m, (size_t)bs * o.q_len * o.q_len);
        void *q_d = mem_alloc(&m, q_elems * 2), *o_d = mem_alloc(&m, o_elems * 2);
        void *lse_d = mem_alloc(&m, sizeof(float) * T * H);
        if (!indptr || !vis || !q_h || !o_h || !lse_h || !indptr_d || !indices_d || !vis_d ||
            !q_d || !o_d || !lse_d || mem_put(&m, indptr_d, indptr, sizeof(int32_t) * (bs + 1)) ||
            mem_put(&m, indices_d, perm, sizeof(int64_t) * nnz) ||
            mem_put(&m, vis_d, vis, (size_t)bs * o.q_len * o.q_len)) {
            fprintf(stderr, "vattn_demo_client: step %d: out of memory or copy failed\n", step);
            return 1;
        }

        for (int layer = 0; layer < o.layers && !rc; layer++, call++) {
            for (size_t i = 0; i < q_elems; i++)
                q_h[i] = tk_bf16((float)(tk_unit(&rng_state) * 2 - 1));
            if (mem_put(&m, q_d, q_h, q_elems * 2)) {
                fprintf(stderr, "vattn_demo_client: call %" PRIu64 ": copying q failed\n", call);
                return 1;
            }
            vattn_args a = {0};
            a.struct_size = sizeof a;
            a.dtype = VATTN_DTYPE_BF16;
            a.index_type = VATTN_INDEX_INT64;
            a.bs = bs;
            a.q_len = o.q_len;
            a.num_heads = H;
            a.num_slots = num_slots;
            a.max_kv_len = max_kv;
            a.sm_scale = 0.0625f; /* GLM-5's (192)^-0.5 * mscale^2, not 1/sqrt(576) */
            a.q = q_d;
            a.q_stride_t = (int64_t)H * D;
            a.q_stride_h = D;
            a.kv_cache = pool_d;
            a.kv_stride = D;
            a.kv_indptr = indptr_d;
            a.kv_indices = indices_d;
            a.visibility = vis_d;
            a.o = o_d;
            a.o_stride_t = (int64_t)H * DV;
            a.o_stride_h = DV;
            a.lse = lse_d;
            size_t ws_bytes = wsize(&a);
            void *ws = ws_bytes ? mem_alloc(&m, ws_bytes) : NULL;
            if (ws_bytes == (size_t)-1 || (ws_bytes && !ws)) {
                fprintf(stderr, "vattn_demo_client: no workspace (%zu bytes)\n", ws_bytes);
                return 1;
            }
            int st = verify(&a, ws, ws_bytes, NULL);
            if (m.cu)
                m.cu->cuCtxSynchronize();
            if (st != VATTN_OK) {
                fprintf(stderr, "call %" PRIu64 ": vattn_verify failed: %s\n", call,
                        status_str(st));
                rc = 1;
            } else if (mem_get(&m, o_h, o_d, o_elems * 2) ||
                       mem_get(&m, lse_h, lse_d, sizeof(float) * T * H)) {
                fprintf(stderr, "call %" PRIu64 ": cannot read outputs back\n", call);
                rc = 1;
            } else {
                uint64_t sum = 1469598103934665603ull; /* FNV-1a over o and lse bytes */
                const unsigned char *p = (const unsigned char *)o_h;
                for (size_t i = 0; i < o_elems * 2; i++)
                    sum = (sum ^ p[i]) * 1099511628211ull;
                p = (const unsigned char *)lse_h;
                for (size_t i = 0; i < sizeof(float) * T * H; i++)
                    sum = (sum ^ p[i]) * 1099511628211ull;
                printf("call %" PRIu64 " step %d layer %d bs %d q_len %d heads %d kv_rows %d "
                       "%s out=%016" PRIx64 "\n",
                       call, step, layer, bs, o.q_len, H, nnz, step % 2 ? "tree" : "causal", sum);
            }
            mem_free(&m, ws);
        }
        mem_free(&m, indptr_d);
        mem_free(&m, indices_d);
        mem_free(&m, vis_d);
        mem_free(&m, q_d);
        mem_free(&m, o_d);
        mem_free(&m, lse_d);
        free(indptr);
        free(vis);
        free(q_h);
        free(o_h);
        free(lse_h);
    }
    mem_free(&m, pool_d);
    free(pool_h);
    free(perm);
    return rc;
}
