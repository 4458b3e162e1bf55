/*
 * kcap_bench.h — timing of one rebuilt call for `kcap replay --bench`.
 *
 * CUDA libraries are timed with CUDA events on the replay stream, after warm-up runs, with
 * the L2 cache flushed before every timed run (a memset of a buffer of at least twice the
 * L2 size, outside the timed interval) so each run reads its KV rows from HBM as it would
 * in the server, where other layers evict them between calls. CPU libraries get the host
 * wall clock. The traffic model (unique bytes, FLOPs) comes from the snapshot itself.
 */
#ifndef KCAP_BENCH_H
#define KCAP_BENCH_H

#include "kcap_calls.h"
#include "kcap_devmem.h"
#include "kcap_kernlib.h"
#include "kcap_replay.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Unique bytes the call must move: every input and output tensor of the snapshot, except
 * that a ROWS (pool) tensor counts each distinct slot once, however often it is indexed.
 * FLOPs: the call description's summary (verify attention: 2 * sum_b q_len * H * kv_len_b *
 * (576 + 512), QK^T and PV); 0 when the description or the snapshot cannot tell.
 */
void kcap_bench_traffic(const kcap_call_desc *d, const kcap_snapshot *s, double *bytes,
                        double *flops);

/* Time fn(args, ws, wsb, stream) on the device (dev != NULL) or on the host (dev == NULL).
 * Fills res (iters, median/min ms); bytes/flops/gbs/tflops are for the caller. */
int kcap_bench_run(kcap_dev *dev, kcap_kern_fn fn, const void *args, void *ws, size_t wsb,
                   int warmup, int iters, kcap_bench_result *res, kcap_error *err);

#ifdef __cplusplus
}
#endif

#endif
