/*
 * kcap_config.h — kcap_config.c: everything the environment sets (KCAP_*), parsed once into
 * a kcap_config, and the number/range/bool/tolerance parsers `kcap record` and `kcap shadow`
 * share with it. Bottom layer of libkcap: no state, no I/O, unit-tested alone
 * (tests/capture/test_capture_config.c).
 */
#ifndef KCAP_CONFIG_H
#define KCAP_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define KCAP_MAX_RANGES 64

typedef struct kcap_range {
    uint64_t lo, hi; /* inclusive */
} kcap_range;

#define KCAP_MAX_TAG_FILTERS 4
#define KCAP_TAG_KEY_MAX 32

/* One KCAP_TAGS term: calls whose tag `key` (set by the host with kcap_tag) is in ranges. */
/* The compare tolerances of shadow mode, in this order everywhere: replay's --atol/--rtol
 * (bf16/fp16 outputs) and --lse-atol/--lse-rtol (fp32 outputs: lse), by the same names. */
enum { KCAP_TOL_ATOL, KCAP_TOL_RTOL, KCAP_TOL_LSE_ATOL, KCAP_TOL_LSE_RTOL, KCAP_NTOL };
typedef struct kcap_tol_name {
    const char *env;  /* KCAP_SHADOW_ATOL, ... */
    const char *flag; /* --atol, ... (kcap record, kcap shadow; kcap replay's own) */
    const char *key;  /* atol, ... (the terms of kcap shadow's request, "shadow atol=1 /CAND") */
} kcap_tol_name;
extern const kcap_tol_name kcap_tol_names[KCAP_NTOL];

typedef struct kcap_tag_filter {
    char key[KCAP_TAG_KEY_MAX];
    int nranges;
    kcap_range ranges[16];
} kcap_tag_filter;

/* Everything the environment can set (capture/README.md lists each variable). */
typedef struct kcap_config {
    char dir[PATH_MAX];      /* KCAP_DIR (required) */
    int nranges;             /* KCAP_CALLS; 0 = every call */
    kcap_range ranges[KCAP_MAX_RANGES];
    uint64_t every;          /* KCAP_EVERY; 1 = every call */
    uint64_t max;            /* KCAP_MAX snapshots; 0 = unlimited */
    uint64_t max_bytes;      /* KCAP_MAX_BYTES (dense bytes accepted); 0 = unlimited */
    uint64_t queue_bytes;    /* KCAP_QUEUE_BYTES: bound of all host memory capture allocates */
    int dormant;             /* KCAP_DORMANT=1 */
    int graph_twins;         /* KCAP_GRAPH_TWINS: clean twins of CUDA graphs (default 1) */
    int shadow_graphs;       /* KCAP_SHADOW_GRAPHS: shadow calls in CUDA graph capture (default 1) */
    int shadow_thread;       /* KCAP_SHADOW_THREAD: eager candidates launched by kcap's thread (0) */
    int shadow_hold_ms;      /* KCAP_SHADOW_HOLD_MS: the service stream's longest wait for it */
    int log;                 /* KCAP_LOG quiet|warn|info */
    int flush_ms;            /* KCAP_FLUSH_TIMEOUT seconds at exit, as ms */
    int fork_follow;         /* KCAP_FORK=follow (child captures into its own files) | dormant */
    int level;               /* KCAP_ZSTD_LEVEL */
    int threads;             /* KCAP_THREADS compression threads; 0 = min(4, CPUs) */
    uint64_t ring_bytes;     /* KCAP_RING_BYTES: bound of the device staging ring */
    int gpu_async;           /* KCAP_GPU_MODE=async (zero-stall, default) | sync */
    char run_id[20];         /* KCAP_RUN_ID; "" = 8 random hex digits drawn at start */
    int ntag_filters;        /* KCAP_TAGS=key=ranges[;key=ranges]: all must match */
    char shadow[PATH_MAX];   /* KCAP_SHADOW: candidate library (shadow mode); "" = off */
    long shadow_per_shape;   /* KCAP_SHADOW_PER_SHAPE: divergent snapshots kept per shape */
    long shadow_max_slowdown; /* KCAP_SHADOW_MAX_SLOWDOWN: candidate slower than this many times
                                 production on 3 calls in a row is switched off (0: never) */
    double shadow_tol[KCAP_NTOL]; /* KCAP_SHADOW_ATOL, _RTOL, _LSE_ATOL, _LSE_RTOL (the
                                     KCAP_TOL_* order); default replay's (kcap_compare.h) */
    kcap_tag_filter tag_filters[KCAP_MAX_TAG_FILTERS];
} kcap_config;

/* Parse the KCAP_* variables through `get` (getenv-like). Returns 0, or KCAP_ERR_CONFIG with
 * one sentence naming the variable and the problem in why[]. Defaults are filled first. */
typedef const char *(*kcap_getenv_fn)(const char *name, void *ud);
int kcap_config_parse(kcap_config *c, kcap_getenv_fn get, void *ud, char *why, size_t whylen);
void kcap_config_defaults(kcap_config *c);
/* Number parsers shared with `kcap record`: plain / with K,M,G(,T) binary suffixes / ranges. */
int kcap_parse_u64(const char *s, uint64_t *out);
int kcap_parse_bytes(const char *s, uint64_t *out);
int kcap_parse_ranges(const char *s, kcap_range *r, int max, int *n);
/* A compare tolerance (KCAP_SHADOW_ATOL..., kcap record/shadow --atol...): a finite number
 * >= 0 written in full, such as 0.02 or 1e-3 (0 or -1). */
int kcap_parse_tol(const char *s, double *out);
/* The tolerance terms that lead kcap shadow's swap request, "atol=1 lse_rtol=0.01 /CAND.so":
 * each "key=value" (a key of kcap_tol_names, a value as kcap_parse_tol) into tol[], the
 * others untouched, until a word that starts with '/' or the end; *rest = there. 0, or -1
 * with *rest at the bad term (tol[] then partly updated). */
int kcap_parse_tol_terms(const char *s, double tol[KCAP_NTOL], const char **rest);
/* 1/yes/true/on -> 1, 0/no/false/off -> 0 (case-insensitive); -1 otherwise. */
int kcap_parse_bool(const char *v, int *out);
/* KCAP_TAGS's syntax: terms key=ranges separated by ';', e.g. "layer=0-3;step=100-199" (0 or -1). */
int kcap_parse_tag_filters(const char *s, kcap_tag_filter *f, int max, int *n);
/* 1 if seq is selected by ranges/every. */
int kcap_config_selects(const kcap_config *c, uint64_t seq);

#endif
