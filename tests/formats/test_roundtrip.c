/*
 * test_roundtrip.c — record the test kit's vattn call (strided q/o, padded KV pool with
 * duplicate slots, int32/int64 indices, optional tensors present/absent) -> write -> read
 * -> compare every byte, then rebuild in ORIGINAL / REMAP / AUTO pool modes and check the
 * rebuilt memory: values at the original strides, gaps and outputs poisoned, remapped
 * slots in their original relative order; fetch_output round trip. Rows of one slot that
 * differ are refused by the full read and by the streaming check (row hashes).
 */
#include "fmt_testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tk_vcase c; /* each is run in bf16 and in fp16 */
    size_t chunk;
} tcase;

/* the kit's calls (vis left out: causal, visibility NULL; lse present unless no_lse; views
 * dense unless TU_VCASE_PADDED); chunk 0: the writer's default. Slot ids repeat in every case
 * (TU_VCASE), and the 3-slot pool may hold fewer rows than the call has keys. */
static const tcase cases[] = {
    {{.bs = 2, .q_len = 3, .heads = 4, .num_slots = 64, .idx64 = 1, .vis = TK_VIS_RANDOM, TU_VCASE, TU_VCASE_PADDED},
     .chunk = 64 << 10},
    {{.bs = 3, .q_len = 4, .heads = 2, .num_slots = 50, .no_lse = 1, TU_VCASE, TU_VCASE_PADDED}, .chunk = 16 << 10},
    {{.bs = 1, .q_len = 1, .heads = 1, .num_slots = 3, .idx64 = 1, TU_VCASE}, .chunk = 4 << 10},
    {{.bs = 4, .q_len = 8, .heads = 16, .num_slots = 300, .vis = TK_VIS_RANDOM, .no_lse = 1, TU_VCASE}, .chunk = 0},
    {{.bs = 5, .q_len = 7, .heads = 3, .num_slots = 1000, .idx64 = 1, .vis = TK_VIS_RANDOM, TU_VCASE, TU_VCASE_PADDED},
     .chunk = 8 << 10},
};

#define QK_ROW_BYTES (QK * 2) /* one bf16 q or kv row */
#define DV_ROW_BYTES (DV * 2) /* one bf16 o row */

static int64_t idx_at(const vattn_args *a, const void *ind, int64_t i)
{
    return a->index_type == VATTN_INDEX_INT32 ? ((const int32_t *)ind)[i] : ((const int64_t *)ind)[i];
}

/* bytes from a strided [T][H][row] view's first element to past its last: what the rebuilt
 * copy holds (the kit's buffers also have the gap after the last token) */
static size_t view_bytes(int64_t T, int64_t H, int64_t stride_t, int64_t stride_h, int64_t row)
{
    return (size_t)((T - 1) * stride_t + (H - 1) * stride_h + row) * 2;
}

static void compare_snap(const kcap_snapshot *a, const kcap_snapshot *b, const char *what)
{
    TK_CHECK(a->nscalars == b->nscalars, "%s: scalars %d vs %d", what, a->nscalars, b->nscalars);
    TK_CHECK(a->ntensors == b->ntensors, "%s: tensors %d vs %d", what, a->ntensors, b->ntensors);
    for (int i = 0; i < a->nscalars && i < b->nscalars; i++) {
        const kcap_scalar *x = &a->scalars[i], *y = kcap_snapshot_scalar(b, x->name);
        TK_CHECK(y && y->type == x->type && y->i == x->i && (y->f == x->f),
                 "%s: scalar %s", what, x->name);
    }
    for (int i = 0; i < a->ntensors; i++) {
        const kcap_tensor *x = &a->tensors[i], *y = kcap_snapshot_tensor(b, x->name, x->dir);
        TK_CHECK(y != NULL, "%s: tensor %s missing", what, x->name);
        if (!y)
            continue;
        TK_CHECK(y->dtype == x->dtype && y->ndim == x->ndim && y->nbytes == x->nbytes &&
                  y->has_strides == x->has_strides,
                 "%s: tensor %s header", what, x->name);
        for (int k = 0; k < x->ndim; k++)
            TK_CHECK(x->shape[k] == y->shape[k] && (!x->has_strides || x->strides[k] == y->strides[k]),
                     "%s: %s dim %d", what, x->name, k);
        if (x->nbytes == y->nbytes && x->data && y->data) {
            size_t bad = 0;
            while (bad < x->nbytes && ((uint8_t *)x->data)[bad] == ((uint8_t *)y->data)[bad])
                bad++;
            TK_CHECK(bad == x->nbytes, "%s: %s differs first at byte %zu", what, x->name, bad);
        }
    }
    const kcap_meta *m = &a->meta, *n = &b->meta;
    TK_CHECK(!strcmp(m->call, n->call) && m->abi_version == n->abi_version &&
              !strcmp(m->time_utc, n->time_utc) && !strcmp(m->host, n->host) &&
              m->pid == n->pid && m->rank == n->rank && m->seq == n->seq &&
              !strcmp(m->lib_hash, n->lib_hash) && !strcmp(m->lib_path, n->lib_path) &&
              !strcmp(m->kcap_version, n->kcap_version) && n->format_major == 1,
             "%s: metadata differs", what);
}

static void check_recorded(const tk_vcall *v, const kcap_snapshot *s)
{
    const vattn_args *a = &v->a;
    const int64_t nnz = v->indptr[a->bs];
    const kcap_tensor *q = kcap_snapshot_tensor(s, "q", KCAP_DIR_IN);
    const kcap_tensor *kv = kcap_snapshot_tensor(s, "kv_cache", KCAP_DIR_IN);
    TK_CHECK(q && kv, "q/kv recorded");
    if (!q || !kv)
        return;
    int T = a->bs * a->q_len;
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < a->num_heads; h++)
            bad += memcmp((uint16_t *)q->data + ((size_t)t * a->num_heads + h) * 576,
                          (uint16_t *)v->q + t * a->q_stride_t + h * a->q_stride_h, QK_ROW_BYTES) != 0;
    TK_CHECK(!bad, "q gathered from its strided view (%d rows differ)", bad);
    TK_CHECK(kv->shape[0] == nnz && kv->has_strides && kv->strides[0] == a->kv_stride,
             "kv_cache [%lld] rows stride %lld", (long long)kv->shape[0], (long long)kv->strides[0]);
    bad = 0;
    for (int64_t i = 0; i < nnz; i++)
        bad += memcmp((uint16_t *)kv->data + i * 576,
                      (uint16_t *)v->kv + idx_at(a, v->indices, i) * a->kv_stride, QK_ROW_BYTES) != 0;
    TK_CHECK(!bad, "kv rows gathered in index order (%d differ)", bad);
    TK_CHECK(!kcap_snapshot_tensor(s, "visibility", KCAP_DIR_IN) == !a->visibility, "visibility presence");
    TK_CHECK(!kcap_snapshot_tensor(s, "lse", KCAP_DIR_OUT) == !a->lse, "lse presence");
}

static int all_ff(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0xFF)
            return 0;
    return 1;
}

static void check_rebuilt(const tk_vcall *v, const kcap_snapshot *s, kcap_pool_mode mode)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    const kcap_mem_ops *m = kcap_host_mem_ops();
    kcap_rebuilt r;
    kcap_error err = {0};
    int rc = kcap_call_rebuild(d, s, m, mode, 1 << 20, &r, &err);
    TK_CHECK_OK(rc, err);
    if (rc)
        return;
    const vattn_args *a = &v->a, *b = r.args;
    int T = a->bs * a->q_len, H = a->num_heads;
    const int64_t nnz = v->indptr[a->bs];
    TK_CHECK(b->struct_size == sizeof(vattn_args) && b->reserved0 == 0, "struct_size %u", b->struct_size);
    TK_CHECK(b->bs == a->bs && b->q_len == a->q_len && b->num_heads == H && b->sm_scale == a->sm_scale &&
              b->q_stride_t == a->q_stride_t && b->kv_stride == a->kv_stride &&
              b->o_stride_h == a->o_stride_h && b->dtype == a->dtype && b->index_type == a->index_type,
             "scalars restored");
    /* q: values at the original strides, gaps poisoned */
    size_t qspan = view_bytes(T, H, a->q_stride_t, a->q_stride_h, QK);
    uint8_t *mask = calloc(1, qspan);
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            size_t off = ((size_t)t * (size_t)a->q_stride_t + (size_t)h * (size_t)a->q_stride_h) * 2;
            bad += memcmp((const uint8_t *)b->q + off, (const uint8_t *)v->q + off, QK_ROW_BYTES) != 0;
            memset(mask + off, 1, QK_ROW_BYTES);
        }
    int gap_bad = 0;
    for (size_t i = 0; i < qspan; i++)
        gap_bad += !mask[i] && ((const uint8_t *)b->q)[i] != 0xFF;
    free(mask);
    TK_CHECK(!bad && !gap_bad, "q rebuilt (%d rows differ, %d gap bytes not poisoned)", bad, gap_bad);
    TK_CHECK(!memcmp(b->kv_indptr, a->kv_indptr, sizeof(int32_t) * (size_t)(a->bs + 1)), "indptr");
    TK_CHECK(!b->visibility == !a->visibility &&
              (!a->visibility || !memcmp(b->visibility, a->visibility, (size_t)a->bs * a->q_len * a->q_len)),
             "visibility");
    /* the pool */
    int remapped = mode == KCAP_POOL_REMAP ||
                   (mode == KCAP_POOL_AUTO && (size_t)a->num_slots * a->kv_stride * 2 > (1 << 20));
    TK_CHECK(r.pool_remapped == remapped, "pool_remapped %d want %d", r.pool_remapped, remapped);
    bad = 0;
    for (int64_t i = 0; i < nnz; i++) {
        int64_t old = idx_at(a, a->kv_indices, i), now = idx_at(b, b->kv_indices, i);
        bad += memcmp((const uint16_t *)b->kv_cache + now * b->kv_stride,
                      (const uint16_t *)v->kv + old * a->kv_stride, QK_ROW_BYTES) != 0;
        if (!remapped)
            bad += now != old;
        for (int64_t j = 0; remapped && j < nnz; j++) { /* relative order kept */
            int64_t oj = idx_at(a, a->kv_indices, j), nj = idx_at(b, b->kv_indices, j);
            bad += (old < oj) != (now < nj) || (old == oj) != (now == nj);
        }
    }
    TK_CHECK(!bad, "kv pool rows / indices (%d problems, mode %d)", bad, (int)mode);
    if (remapped) {
        int64_t maxid = -1;
        for (int64_t i = 0; i < nnz; i++)
            if (idx_at(b, b->kv_indices, i) > maxid)
                maxid = idx_at(b, b->kv_indices, i);
        TK_CHECK(b->num_slots == maxid + 1, "remapped num_slots %lld, max id %lld",
                 (long long)b->num_slots, (long long)maxid);
    } else {
        TK_CHECK(b->num_slots == a->num_slots, "num_slots kept");
        /* a slot nobody references is poisoned */
        for (int64_t sl = 0; sl < a->num_slots; sl++) {
            int used = 0;
            for (int64_t i = 0; i < nnz && !used; i++)
                used = idx_at(a, a->kv_indices, i) == sl;
            if (!used) {
                TK_CHECK(all_ff((const uint8_t *)b->kv_cache + sl * a->kv_stride * 2, QK_ROW_BYTES),
                         "unreferenced slot %lld poisoned", (long long)sl);
                break;
            }
        }
    }
    TK_CHECK(all_ff(b->o, view_bytes(T, H, a->o_stride_t, a->o_stride_h, DV)), "o poisoned");
    TK_CHECK(!b->lse == !a->lse && (!a->lse || all_ff((void *)b->lse, (size_t)T * H * 4)), "lse poisoned");
    /* fetch_output: write a pattern into the rebuilt o at its strides, fetch it dense */
    uint16_t *dense = malloc((size_t)T * H * 512 * 2), *want = malloc((size_t)T * H * 512 * 2);
    tu_fill(want, (size_t)T * H * 512 * 2, 99);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            memcpy((uint16_t *)b->o + t * b->o_stride_t + h * b->o_stride_h,
                   want + ((size_t)t * H + h) * DV, DV_ROW_BYTES);
    rc = kcap_call_fetch_output(d, &r, s, "o", m, dense, &err);
    TK_CHECK_OK(rc, err);
    TK_CHECK(!memcmp(dense, want, (size_t)T * H * 512 * 2), "fetch_output o");
    free(dense);
    free(want);
    kcap_rebuilt_free(&r, m);
}

/* Rows of one slot that differ (their checksum recomputed, so only the duplicate-slot check
 * can see it) are refused by the full read (bytes compared) and by the streaming check
 * (row hashes): chunked and contiguous layouts, several chunk sizes. */
static void check_dup_rows(void)
{
    static const struct {
        size_t chunk, min_compress;
    } lay[] = {{4096, 1024}, {64 << 10, 1024}, {0, (size_t)1 << 30}};
    for (size_t l = 0; l < sizeof lay / sizeof lay[0]; l++) {
        static const tk_vcase c = {.bs = 3, .q_len = 4, .heads = 2, .num_slots = 6, .idx64 = 1, .no_lse = 1,
                                   TU_VCASE}; /* 6 slots for 12 keys or more: ids repeat */
        tk_vcall v;
        kcap_error err = {0};
        tu_vcall(&c, 77 + l, &v);
        kcap_snapshot *s = tu_vattn_snapshot(&v, &err);
        TK_CHECK(s != NULL, "record: %s", err.msg);
        if (!s)
            continue;
        kcap_tensor *kv = NULL;
        const kcap_tensor *ix = kcap_snapshot_tensor(s, "kv_indices", KCAP_DIR_IN);
        for (int i = 0; i < s->ntensors; i++)
            if (!strcmp(s->tensors[i].name, "kv_cache"))
                kv = &s->tensors[i];
        int64_t a = -1, b = -1, n = ix ? ix->shape[0] : 0;
        for (int64_t i = 0; i < n && b < 0; i++)
            for (int64_t j = i + 1; j < n && b < 0; j++)
                if (((int64_t *)ix->data)[i] == ((int64_t *)ix->data)[j])
                    a = i, b = j;
        TK_CHECK(kv && b >= 0, "case %zu: a duplicate slot to damage", l);
        if (kv && b >= 0) {
            size_t rb = kv->nbytes / (size_t)kv->shape[0];
            ((uint8_t *)kv->data)[(size_t)b * rb + rb / 2] ^= 0x40;
            kcap_writer *w = kcap_writer_create(&(kcap_writer_opts){.threads = 2,
                                                   .chunk_bytes = lay[l].chunk,
                                                   .min_compress_bytes = lay[l].min_compress},
                                                &err);
            char name[64];
            snprintf(name, sizeof name, "duprows%zu.h5", l);
            TK_CHECK_OK(kcap_snapshot_write(w, s, tu_path(name), &err), err);
            kcap_snapshot *back = NULL;
            kcap_error e1 = {0}, e2 = {0};
            int r1 = kcap_snapshot_read(tu_path(name), &back, &e1);
            int r2 = kcap_snapshot_check(tu_path(name), &e2);
            TK_CHECK(r1 == KCAP_ERR_CORRUPT && strstr(e1.msg, "both hold slot"), "read: %d %s", r1,
                     e1.msg);
            TK_CHECK(r2 == KCAP_ERR_CORRUPT && strstr(e2.msg, "both hold slot"), "check (row "
                     "hashes), layout %zu: %d %s", l, r2, e2.msg);
            (void)a;
            kcap_snapshot_free(back);
            kcap_writer_free(w);
        }
        kcap_snapshot_free(s);
        tk_vcall_free(&v);
    }
}

/* A snapshot whose strided view (input q, output o) spans more than the reader's limit, its
 * stride scalar and recorded stride agreeing (so validation passes): the rebuild refuses
 * it, naming the tensor. */
static void check_bad_strides(kcap_snapshot *s, const char *scalar, const char *tensor, kcap_dir dir)
{
    kcap_scalar *sc = (kcap_scalar *)kcap_snapshot_scalar(s, scalar);
    kcap_tensor *t = (kcap_tensor *)kcap_snapshot_tensor(s, tensor, dir);
    TK_CHECK(sc && t && t->has_strides, "scalar %s, strided tensor %s", scalar, tensor);
    if (!sc || !t || !t->has_strides)
        return;
    int64_t keep = sc->i, keep_t = t->strides[0];
    sc->i = t->strides[0] = (int64_t)1 << 40;
    kcap_rebuilt r;
    kcap_error err = {0};
    int rc = kcap_call_rebuild(kcap_call_find("vattn_verify"), s, kcap_host_mem_ops(), KCAP_POOL_ORIGINAL, 1 << 20,
                               &r, &err);
    char want[64];
    snprintf(want, sizeof want, "%s: bad strides", tensor);
    TK_CHECK(rc == KCAP_ERR_SHAPE && strstr(err.msg, want), "%s = 2^40: rc %d (%s), want KCAP_ERR_SHAPE \"%s\"",
             scalar, rc, err.msg, want);
    if (rc == 0)
        kcap_rebuilt_free(&r, kcap_host_mem_ops());
    sc->i = keep, t->strides[0] = keep_t;
}

int main(void)
{
    kcap_writer_opts wo = {.threads = 2, .chunk_bytes = 0, .min_compress_bytes = 4096};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tcase *tc = &cases[c];
        for (int dt = 0; dt < 2; dt++) {
            tk_vcase vc = tc->c;
            vc.fp16 = dt;
            tk_vcall v;
            kcap_error err = {0};
            tu_vcall(&vc, c * 10 + dt, &v);
            kcap_snapshot *s = tu_vattn_snapshot(&v, &err);
            TK_CHECK(s != NULL, "record case %zu: %s", c, err.msg);
            if (!s) {
                tk_vcall_free(&v);
                continue;
            }
            check_recorded(&v, s);
            TK_CHECK_OK(kcap_call_validate(kcap_call_find("vattn_verify"), s, &err), err);
            wo.chunk_bytes = tc->chunk;
            kcap_writer *w = kcap_writer_create(&wo, &err);
            TK_CHECK(w != NULL, "writer: %s", err.msg);
            char name[64];
            snprintf(name, sizeof name, "case%zu_%d.kcap.h5", c, dt);
            const char *path = tu_path(name);
            int rc = kcap_snapshot_write(w, s, path, &err);
            TK_CHECK_OK(rc, err);
            kcap_snapshot *back = NULL;
            rc = kcap_snapshot_read(path, &back, &err);
            TK_CHECK_OK(rc, err);
            if (back) {
                compare_snap(s, back, name);
                check_rebuilt(&v, back, KCAP_POOL_ORIGINAL);
                check_rebuilt(&v, back, KCAP_POOL_REMAP);
                check_rebuilt(&v, back, KCAP_POOL_AUTO);
                if (c == 0 && dt == 0) {
                    check_bad_strides(back, "q_stride_t", "q", KCAP_DIR_IN);
                    check_bad_strides(back, "o_stride_t", "o", KCAP_DIR_OUT);
                }
            }
            kcap_snapshot *hdr = NULL;
            size_t *stored = NULL;
            rc = kcap_snapshot_read_header(path, &hdr, &stored, &err);
            TK_CHECK_OK(rc, err);
            if (hdr) {
                TK_CHECK(hdr->ntensors == s->ntensors && stored, "header tensors");
                for (int i = 0; i < hdr->ntensors; i++)
                    TK_CHECK(hdr->tensors[i].data == NULL && stored[i] > 0 &&
                              hdr->tensors[i].nbytes == s->tensors[i].nbytes,
                             "header tensor %d", i);
            }
            TK_CHECK_OK(kcap_snapshot_check(path, &err), err);
            free(stored);
            kcap_snapshot_free(hdr);
            kcap_snapshot_free(back);
            kcap_snapshot_free(s);
            kcap_writer_free(w);
            tk_vcall_free(&v);
        }
    }
    /* a writer of NULL (defaults) also works */
    {
        static const tk_vcase c = {.bs = 2, .q_len = 2, .heads = 2, .num_slots = 16, .idx64 = 1, .no_lse = 1, TU_VCASE};
        tk_vcall v;
        kcap_error err = {0};
        tu_vcall(&c, 5, &v);
        kcap_snapshot *s = tu_vattn_snapshot(&v, &err);
        TK_CHECK_OK(kcap_snapshot_write(NULL, s, tu_path("nullwriter.h5"), &err), err);
        kcap_snapshot *b = NULL;
        TK_CHECK_OK(kcap_snapshot_read(tu_path("nullwriter.h5"), &b, &err), err);
        if (b)
            compare_snap(s, b, "nullwriter");
        kcap_snapshot_free(b);
        kcap_snapshot_free(s);
        tk_vcall_free(&v);
    }
    check_dup_rows();
    return tk_summary("test_roundtrip");
}
