/*
 * test_capture_layout.c — the staging layout computed from the call descriptions
 * (capture/kcap_stage_layout.c), without a GPU: for vattn_verify and vattn_extend calls, every
 * tensor becomes a segment at the right address with the right row geometry, the counted
 * parts are read from the right element (kv_indptr[bs], mask_indptr[bs]), the fixed part
 * holds what the scalars size, and a second call of the same sizes served from the layout
 * cache equals a fresh computation with its own pointers patched in.
 */
#include "kcap_stage_layout.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verify_attn.h"
#include "../testkit_vattn.h" /* the checks, QK, DV */

#define R16(x) (((x) + 15) & ~15ll)
/* fake addresses: nothing is ever read through them */
#define AT(n) ((void *)(uintptr_t)(0x100000ull * (n)))

static const kseg *seg_at(const kcap_layout *l, unsigned long long src, int in)
{
    for (int k = 0; k < (in ? l->nin : l->nout); k++)
        if ((in ? l->seg_in : l->seg_out)[k].src == src)
            return &(in ? l->seg_in : l->seg_out)[k];
    return NULL;
}

static void verify_case(int bs, int q, int H, int64_t qst, int64_t qsh, int vis, int base)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    vattn_args a = {.struct_size = sizeof a, .dtype = VATTN_DTYPE_BF16,
                    .index_type = VATTN_INDEX_INT64, .bs = bs, .q_len = q, .num_heads = H,
                    .num_slots = 1000, .sm_scale = 0.1f, .q = AT(base + 1), .q_stride_t = qst,
                    .q_stride_h = qsh, .kv_cache = AT(base + 2), .kv_stride = QK + 64,
                    .kv_indptr = AT(base + 3), .kv_indices = AT(base + 4),
                    .visibility = vis ? AT(base + 5) : NULL, .o = AT(base + 6),
                    .o_stride_t = (int64_t)H * DV, .o_stride_h = DV, .lse = AT(base + 7)};
    kcap_layout l;
    TK_CHECK(d && !kcap_stage_layout(d, &a, &l), "verify layout");
    long long T = (long long)bs * q;
    TK_CHECK(l.nin == 4 + vis && l.nout == 2, "segments %d in, %d out", l.nin, l.nout);
    TK_CHECK(l.ncounts == 1 && l.count_src[0] == (uintptr_t)AT(base + 3) + 4ull * bs &&
              l.count_size[0] == 4, "nnz read at kv_indptr[bs] (int32)");
    const kseg *ip = seg_at(&l, (uintptr_t)AT(base + 3), 1), *ix = seg_at(&l, (uintptr_t)AT(base + 4), 1),
               *qs = seg_at(&l, (uintptr_t)AT(base + 1), 1), *kv = seg_at(&l, (uintptr_t)AT(base + 2), 1),
               *o = seg_at(&l, (uintptr_t)AT(base + 6), 0), *lse = seg_at(&l, (uintptr_t)AT(base + 7), 0);
    TK_CHECK(ip && ip->counter == KCAP_SEG_STATIC && ip->nrows == bs + 1 && ip->row_bytes == 4, "kv_indptr dense");
    TK_CHECK(ix && ix->counter == 0 && ix->row_bytes == 8 && !ix->idx, "kv_indices counted, 8-byte rows");
    TK_CHECK(qs && qs->nrows == T * H && qs->n1 == H && qs->s0 == 2 * qst && qs->s1 == 2 * qsh &&
              qs->row_bytes == 2 * QK, "q: strided rows of 576 bf16");
    TK_CHECK(kv && kv->counter == 0 && kv->idx == (uintptr_t)AT(base + 4) && kv->idx_size == 8 &&
              kv->s0 == 2 * (QK + 64) && kv->row_bytes == 2 * QK && kv->pool_rows == 1000,
             "kv_cache: pool rows gathered by kv_indices");
    TK_CHECK(o && o->nrows == T * H && o->row_bytes == 1024 && lse && lse->nrows == T &&
              lse->row_bytes == 4 * H, "outputs o (strided rows), lse (dense, T rows of H floats)");
    long long fixed = R16(4 * (bs + 1)) + R16(T * H * 1152) + (vis ? R16(bs * q * q) : 0) +
                      R16(T * H * 1024) + R16(4 * T * H);
    TK_CHECK(l.fixed_bytes == fixed, "fixed part %lld, want %lld", l.fixed_bytes, fixed);
    long long counts[2] = {37, 0};
    TK_CHECK(kcap_layout_bytes(&l, counts) == (unsigned long long)(fixed + R16(37 * 8) + R16(37 * 1152)),
             "region bytes for nnz = 37");
}

static void extend_case(int masked)
{
    const kcap_call_desc *d = kcap_call_find("vattn_extend");
    int bs = 3, q = 4, H = 8;
    vattn_extend_args a = {.struct_size = sizeof a, .dtype = VATTN_DTYPE_FP16,
                           .index_type = VATTN_INDEX_INT32, .bs = bs, .q_len = q, .num_heads = H,
                           .num_slots = 500, .sm_scale = 0.1f, .q = AT(11), .q_stride_t = H * QK,
                           .q_stride_h = QK, .k_extend = AT(12), .k_extend_stride = 640,
                           .kv_cache = AT(13), .kv_stride = QK, .qo_indptr = AT(14),
                           .kv_indptr = AT(15), .kv_indices = AT(16),
                           .custom_mask = masked ? AT(17) : NULL,
                           .mask_indptr = masked ? AT(18) : NULL, .o = AT(19),
                           .o_stride_t = H * DV, .o_stride_h = DV, .lse = NULL};
    kcap_layout l;
    TK_CHECK(d && !kcap_stage_layout(d, &a, &l), "extend layout");
    TK_CHECK(l.ncounts == 1 + masked, "%d counts", l.ncounts);
    TK_CHECK(l.count_src[0] == (uintptr_t)AT(15) + 4ull * bs && l.count_size[0] == 4, "nnz at kv_indptr[bs]");
    if (masked) {
        TK_CHECK(l.count_src[1] == (uintptr_t)AT(18) + 8ull * bs && l.count_size[1] == 8,
                 "mask length at mask_indptr[bs] (int64)");
        const kseg *m = seg_at(&l, (uintptr_t)AT(17), 1);
        TK_CHECK(m && m->counter == 1 && m->row_bytes == 1, "custom_mask counted by mask_indptr[bs]");
    }
    const kseg *k = seg_at(&l, (uintptr_t)AT(12), 1), *kv = seg_at(&l, (uintptr_t)AT(13), 1);
    TK_CHECK(k && k->nrows == bs * q && k->n1 == 1 && k->s0 == 2 * 640 && k->row_bytes == 1152,
             "k_extend: T strided rows");
    TK_CHECK(kv && kv->idx == (uintptr_t)AT(16) && kv->idx_size == 4 && kv->counter == 0,
             "prefix rows gathered by int32 kv_indices");
    TK_CHECK(l.nout == 1, "lse absent: one output");
}

/* Same sizes, new pointers: the cached layout with this call's addresses equals a fresh
 * computation (a description copy under another address misses the cache). */
static void cache_case(void)
{
    const kcap_call_desc *d = kcap_call_find("vattn_verify");
    kcap_call_desc fresh = *d;
    vattn_args a = {.struct_size = sizeof a, .dtype = VATTN_DTYPE_BF16, .index_type = 1, .bs = 2,
                    .q_len = 3, .num_heads = 4, .num_slots = 99, .sm_scale = 1, .q = AT(21),
                    .q_stride_t = 4 * QK, .q_stride_h = QK, .kv_cache = AT(22), .kv_stride = QK,
                    .kv_indptr = AT(23), .kv_indices = AT(24), .visibility = AT(25), .o = AT(26),
                    .o_stride_t = 2048, .o_stride_h = DV, .lse = AT(27)};
    kcap_layout first, again, want;
    TK_CHECK(!kcap_stage_layout(d, &a, &first), "first");
    vattn_args b = a;
    b.q = AT(31), b.kv_cache = AT(32), b.kv_indptr = AT(33), b.kv_indices = AT(34);
    b.visibility = AT(35), b.o = AT(36), b.lse = AT(37);
    TK_CHECK(!kcap_stage_layout(d, &b, &again), "second (cached)");
    TK_CHECK(!kcap_stage_layout(&fresh, &b, &want), "fresh");
    TK_CHECK(!memcmp(&again, &want, sizeof want), "cached + rebased layout equals a fresh one");
    TK_CHECK(again.count_src[0] == (uintptr_t)AT(33) + 8, "count read from the new kv_indptr");
    b.visibility = NULL; /* an optional tensor gone: a different layout, not the cached one */
    TK_CHECK(!kcap_stage_layout(d, &b, &again) && again.nin == first.nin - 1, "no visibility: one segment less");
}

int main(void)
{
    verify_case(1, 1, 1, QK, QK, 0, 100);
    verify_case(3, 5, 16, 16 * 584 + 8, 584, 1, 200);
    verify_case(3, 5, 16, 16 * 584 + 8, 584, 1, 300); /* cached, other pointers */
    extend_case(0);
    extend_case(1);
    cache_case();
    return tk_summary("test_capture_layout");
}
