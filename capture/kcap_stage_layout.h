/*
 * kcap_stage_layout.h — where each tensor of a call goes in a staging region of the device
 * ring, computed from the call's description (kcap_stage_layout.c).
 *
 * A region holds a fixed part (every tensor whose size the scalars decide: index pointers,
 * strided q / o views, ...) followed by the counted parts, whose row count only the device
 * knows: a dense tensor whose first dimension is an element of another device tensor
 * (kv_indices: kv_indptr[bs] entries; SGLang's custom mask: mask_indptr[bs] bytes), and the
 * pool rows a ROWS tensor gathers by such an index. The host never reads device memory for
 * this: the gate kernel reads each count (kcap_gather.cu) and sizes the region. The segment's
 * layout is shared with the kernels (kcap_stage_dev.h). Internal to libkcap.so.
 */
#ifndef KCAP_STAGE_LAYOUT_H
#define KCAP_STAGE_LAYOUT_H

#include "kcap_calls.h"
#include "kcap_stage_dev.h"

#define KCAP_SEG_STATIC (-1)
#define KCAP_ZERO_ROW_BYTES 1280 /* kcap_gather.cu's zero row: the widest pool row staged */

/* One tensor of a phase: row r of the stored (dense) tensor is at
 * src + (r / n1) * s0 + (r % n1) * s1 (bytes), or for pool rows at src + idx[r] * s0
 * (kcap_stage_dev.h; counter: KCAP_SEG_STATIC or the count giving nrows). */
typedef struct kcap_seg kseg;

typedef struct kcap_layout {
    kseg seg_in[KCAP_MAX_SEGS], seg_out[KCAP_MAX_SEGS];
    int nin, nout;
    long long fixed_bytes;                       /* the static part, 16-byte aligned pieces */
    unsigned long long count_src[KCAP_NCOUNTS];  /* device address of each count element */
    int count_size[KCAP_NCOUNTS];                /* 4 or 8 (int32 / int64) */
    int ncounts;
    /* where the addresses came from (description argument indices), so a layout computed
       for one call serves the next call of the same sizes with its own pointers */
    int seg_in_arg[KCAP_MAX_SEGS], seg_out_arg[KCAP_MAX_SEGS], seg_idx_arg[KCAP_MAX_SEGS];
    int seg_out_dtype[KCAP_MAX_SEGS]; /* kcap_dtype of each output (shadow mode's compare) */
    int count_arg[KCAP_NCOUNTS];
    long long count_off[KCAP_NCOUNTS];
} kcap_layout;

/* The layout of one call; 0, or -1 when the description needs something the staging
 * kernels do not do (then the call takes the synchronous path, or is not captured in a
 * graph). Reads only the args struct, never a tensor. Layouts depend on the scalars alone
 * (and which optional tensors are present): the last few are kept, and a call of the same
 * sizes only gets its own addresses patched in (evaluating the description's expressions
 * on every call cost the armed host thread ~20-40 us). */
int kcap_stage_layout(const kcap_call_desc *d, const void *args, kcap_layout *out);

/* A segment's rows, given the counts the device read (static segments: nrows). */
long long kcap_seg_rows(const kseg *g, const long long *counts);
/* Byte offset of a counted segment of seg_in in the region (after the fixed part, in
 * order, each 16-byte aligned), given the counts; static segments: dst_off. */
long long kcap_seg_offset(const kcap_layout *l, int k, const long long *counts);
/* Bytes of the whole region for these counts. */
unsigned long long kcap_layout_bytes(const kcap_layout *l, const long long *counts);

#endif
