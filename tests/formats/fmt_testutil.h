/*
 * fmt_testutil.h — helpers of the formats tests and tools over the test kit (checks and the
 * generator: ../testkit.h; the vattn call: ../testkit_vattn.h): a private temp dir that is
 * removed at exit, deterministic random fills, the formats tests' kind of call (repeating slot
 * ids, optionally strided views) and the snapshot that records it.
 */
#ifndef FMT_TESTUTIL_H
#define FMT_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>

#include "kcap_calls.h"
#include "kcap_snapshot.h"
#include "verify_attn.h"
#include "../testkit_vattn.h" /* the checks, the generator, the call, QK, DV */

const char *tu_tmpdir(void);             /* created once, removed at exit */
char *tu_path(const char *name);         /* tu_tmpdir()/name, a per-thread ring of buffers */
void tu_fill(void *buf, size_t n, uint64_t seed);
void tu_fill_bf16(uint16_t *buf, size_t n, uint64_t seed); /* smooth-ish, finite values */
int tu_run(const char *cmd, char *out, size_t outn);          /* popen; returns exit code */

/* The formats tests' calls, as tk_vcase fields of a designated initializer: prefixes of 0..8
 * keys and slot ids that repeat (shared prefixes, a pool that may be smaller than the keys), so
 * the recorder's row gathering and the duplicate-row checks always have work. TU_VCASE_PADDED:
 * the views strided (a gap after each q / o head row and token, pool rows of QK + 64 elements),
 * as a server's tensors often are; these exact strides are what test_cli.sh reads back. */
#define TU_VCASE .max_prefix = 8, .dup_slots = 1
#define TU_VCASE_PADDED .q_gap_h = 24, .q_gap_t = 64, .o_gap_h = 8, .o_gap_t = 24, .kv_stride = QK + 64

/* The kit's call of case c, drawn from seed (tk_seed): the same seed, the same call. */
void tu_vcall(const tk_vcase *c, uint64_t seed, tk_vcall *v);
/* A recorded snapshot (IN, fake outputs written, OUT) of v, meta filled. */
kcap_snapshot *tu_vattn_snapshot(tk_vcall *v, kcap_error *err);

#endif
