/*
 * kcap_replay.h — the replay engine: one snapshot through a kernel library (and an
 * independent reference), judged against the captured output and the reference.
 *
 * Split from the command (kcap_cmd_replay.c) so the watch loop, the tests and any future
 * front end drive the same code: a kcap_replayer holds the freshly loaded libraries of one
 * run; kcap_replayer_run() fills a kcap_case_result per snapshot and never prints.
 */
#ifndef KCAP_REPLAY_H
#define KCAP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "kcap_calls.h"
#include "kcap_compare.h"
#include "kcap_devmem.h"
#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kcap_ref_mode {
    KCAP_REF_AUTO = 0, /* gpu for a CUDA library, cpu for a CPU library */
    KCAP_REF_NONE,
    KCAP_REF_CPU,      /* libverify_attn_cpu.so (vattn_verify_reference), host memory */
    KCAP_REF_GPU       /* vattn_verify_reference of the CUDA library */
} kcap_ref_mode;

typedef struct kcap_replay_opts {
    const char *kernel_path;
    kcap_ref_mode ref;
    const char *ref_lib;          /* NULL: <build_dir>/lib/libverify_attn_cpu.so (cpu) or
                                     <build_dir>/lib/libverify_attn.so (gpu, CPU kernel) */
    const char *build_dir;        /* where the default reference libraries live */
    kcap_pool_mode pool;
    kcap_cmp_tol tol_half;        /* bf16 / f16 outputs */
    kcap_cmp_tol tol_f32;         /* fp32 outputs (lse) */
    int bench;
    int iters;                    /* timed runs for --bench */
    int warmup;
    int device;                   /* CUDA device ordinal */
    const char *save_dir;         /* --save-outputs: write each case with the kernel's
                                     outputs here (NULL: keep nothing) */
} kcap_replay_opts;

void kcap_replay_opts_default(kcap_replay_opts *o);

#define KCAP_MAX_OUTS 4

typedef struct kcap_tensor_verdict {
    char name[KCAP_NAME_MAX];
    kcap_dtype dtype;
    int ndim;
    int64_t shape[KCAP_MAX_DIMS];
    kcap_cmp_tol tol;
    kcap_cmp_result r;
    int has_loc;        /* loc = (request, token, head, channel) of r.worst */
    int64_t loc[4];
} kcap_tensor_verdict;

typedef struct kcap_side_verdict {
    int ran;            /* 0: not compared (see error) */
    int pass;
    int bitwise;        /* every output bitwise equal */
    int nout;
    kcap_tensor_verdict out[KCAP_MAX_OUTS];
    char error[1024];   /* why this side could not be judged */
} kcap_side_verdict;

typedef struct kcap_bench_result {
    int ran;
    int iters;
    int cuda;           /* 1: CUDA events, L2 flushed between runs; 0: host wall clock */
    double median_ms, min_ms;
    double bytes;       /* unique bytes moved: inputs + outputs, KV rows once per distinct slot */
    double flops;
    double gbs, tflops; /* at the median */
    double pct_peak_bw; /* of the device's peak memory bandwidth; 0 when unknown */
} kcap_bench_result;

typedef struct kcap_case_result {
    char path[4096];
    char name[256];     /* the file's base name */
    int status;         /* KCAP_OK: the case ran (verdicts valid); else the failing code */
    char error[1024];   /* status != OK: one sentence naming the file and the problem */
    char call[KCAP_NAME_MAX];
    /* shape summary (-1 when the snapshot lacks the field) */
    int64_t bs, q_len, num_heads, kv_total, kv_max, num_slots;
    char dtype[16];
    char index_type[8];
    int tree;           /* 1: a non-causal visibility mask, 0: causal (or none) */
    char pool[16];      /* "original" or "remap" */
    size_t pool_bytes;
    int captured_status;/* what the kernel returned at capture time */
    int replay_status;  /* what it returned now */
    kcap_side_verdict vs_captured;
    kcap_side_verdict vs_ref;
    kcap_bench_result bench;
    double wall_ms;     /* load + rebuild + runs + compare of this case */
    /* where wall_ms went: read+decompress+validate, the whole reference side (rebuild, run,
     * fetch), rebuild+upload for the kernel, the kernel call (incl. sync), fetch+compare,
     * --bench */
    double read_ms, ref_ms, rebuild_ms, run_ms, check_ms, bench_ms;
    int pass;           /* status OK, vs_captured pass, vs_ref pass (or not requested) */
    char saved[4096];   /* --save-outputs: the file written ("" when none) */
} kcap_case_result;

typedef struct kcap_replayer kcap_replayer; /* opaque: the loaded libraries of one run */

/*
 * Load the kernel library (a private fresh copy) and the reference; *dev is opened lazily
 * when a CUDA library needs it and is left open for the caller to reuse across runs (the
 * caller frees it with kcap_dev_free). Errors name the library and the problem.
 */
int kcap_replayer_create(const kcap_replay_opts *o, kcap_dev **dev, kcap_replayer **out,
                         kcap_error *err);
void kcap_replayer_free(kcap_replayer *r); /* accepts NULL */

/* "cpu" / "cuda"; the reference actually used ("cpu", "gpu", "none") and its library. */
const char *kcap_replayer_backend(const kcap_replayer *r);
const char *kcap_replayer_ref_name(const kcap_replayer *r);
const char *kcap_replayer_ref_path(const kcap_replayer *r);
const char *kcap_replayer_kernel_hash(const kcap_replayer *r);

/* Replay one snapshot file. Always fills *res (res->status says whether it ran); returns
 * res->status. */
int kcap_replayer_run(kcap_replayer *r, const char *path, kcap_case_result *res);

#ifdef __cplusplus
}
#endif

#endif
