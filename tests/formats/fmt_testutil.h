/*
 * fmt_testutil.h — helpers of the formats tests (their checks and generator are ../testkit.h):
 * a private temp dir that is removed at exit, deterministic random fills, and a hand-built
 * vattn call with strided views, duplicate slots and a padded KV pool (what capture would see).
 */
#ifndef FMT_TESTUTIL_H
#define FMT_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>

#include "kcap_calls.h"
#include "kcap_snapshot.h"
#include "verify_attn.h"
#include "../testkit_vattn.h" /* the checks, the generator, QK, DV */

/* checks: TK_CHECK / TK_CHECK_OK (../testkit.h); random draws: tk_next */
const char *tu_tmpdir(void);             /* created once, removed at exit */
char *tu_path(const char *name);         /* tu_tmpdir()/name, a per-thread ring of buffers */
void tu_fill(void *buf, size_t n, uint64_t seed);
void tu_fill_bf16(uint16_t *buf, size_t n, uint64_t seed); /* smooth-ish, finite values */
int tu_run(const char *cmd, char *out, size_t outn);          /* popen; returns exit code */

typedef struct tu_vattn {
    vattn_args a;
    void *q, *kv, *o;
    int32_t *indptr;
    void *indices;
    uint8_t *vis;
    float *lse;
    size_t q_bytes, kv_bytes, o_bytes;
    int64_t nnz;
} tu_vattn;

/* bs requests of q_len drafts, H heads, a pool of num_slots rows; slot ids drawn with
 * duplicates; q/o/kv padded (strided) when `padded`. */
int tu_vattn_make(tu_vattn *v, int bs, int q_len, int H, int64_t num_slots, int dtype,
                  int index_type, int with_vis, int with_lse, int padded, uint64_t seed);
void tu_vattn_free(tu_vattn *v);
/* A recorded snapshot (IN, fake outputs written, OUT) of v, meta filled. */
kcap_snapshot *tu_vattn_snapshot(tu_vattn *v, kcap_error *err);

#endif
