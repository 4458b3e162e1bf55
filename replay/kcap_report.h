/*
 * kcap_report.h — what `kcap replay` shows: the terminal table (one row per snapshot, then
 * the details of every failing case), the TTY-only progress line, and the --json document.
 *
 * Kept apart from the engine so the engine never prints and the formats of the two outputs
 * (people read the table, machines read the JSON) are defined in one place each.
 */
#ifndef KCAP_REPORT_H
#define KCAP_REPORT_H

#include <stdio.h>

#include "kcap_compare.h"
#include "kcap_devmem.h"
#include "kcap_replay.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_run_info {
    const char *kernel;       /* --kernel as given */
    const char *kernel_hash;  /* of the bytes that ran */
    const char *backend;      /* "cpu" / "cuda" */
    const char *ref;          /* "cpu" / "gpu" / "none" */
    const char *ref_lib;
    const kcap_replay_opts *opts;
    const kcap_dev_info *dev; /* NULL for a CPU run */
    int run;                  /* 1-based run number (watch mode re-runs) */
    double wall_ms;           /* the whole run: every case, load to verdict */
    const char *load_error;   /* the run could not start (library): then no cases */
} kcap_run_info;

/* Table header and one row per case; `bench` adds the timing columns. */
void kcap_report_header(FILE *f, const kcap_run_info *info);
void kcap_report_row(FILE *f, const kcap_case_result *c, int bench);
/* After the table: every error and every failing tensor of failing cases, in full. */
void kcap_report_details(FILE *f, const kcap_case_result *cases, int n);
/* "N cases: P passed, F failed (E errors) in T s" */
void kcap_report_summary(FILE *f, const kcap_case_result *cases, int n, double wall_ms);

/* Progress on stderr, only when stderr is a terminal; clear it with i < 0. */
void kcap_report_progress(int i, int n, const char *name);

/* The whole run as one JSON document. Returns 0 or KCAP_ERR_IO. */
int kcap_report_json(const char *path, const kcap_run_info *info,
                     const kcap_case_result *cases, int n, kcap_error *err);

/* One comparison as a JSON object (shared with kcap diff); loc may be NULL. */
void kcap_report_cmp_json(FILE *f, const kcap_cmp_result *r, const kcap_cmp_tol *tol,
                          int ndim, const int64_t *shape, const int64_t *loc);

/* "(r,t,h,c)" of a verdict's worst element into buf. */
void kcap_report_loc(const kcap_tensor_verdict *tv, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
