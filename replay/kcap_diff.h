/*
 * kcap_diff.h — `kcap diff`: one pair of snapshots (kcap_cmd_diff.c) and two folders paired
 * case by case (kcap_diffdir.c), sharing the per-pair comparison and its JSON.
 */
#ifndef KCAP_DIFF_H
#define KCAP_DIFF_H

#include <stdio.h>

#include "kcap_compare.h"
#include "kcap_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcap_diff_opts {
    kcap_cmp_tol half;  /* bf16 / f16 tensors */
    kcap_cmp_tol f32;   /* fp32 / fp64 tensors */
    const char *json;   /* --json FILE or "-" (NULL: none) */
    const char *junit;  /* --junit FILE or "-" */
    FILE *out;          /* the human-readable table */
    int candidate;      /* one shadow-mode file: its /candidate outputs (a) against its
                           production outputs (b) */
} kcap_diff_opts;

/* What one pair came to: the exit status of a single diff and its worst tensor. */
typedef struct kcap_diff_result {
    int status;             /* 0 agree, 1 differ, 2 trouble (unreadable file) */
    char worst[KCAP_NAME_MAX]; /* the tensor furthest out of tolerance ("" if none) */
    char verdict[16];       /* its verdict word, or "shape", "only-in-a", ... */
    double max_abs;         /* its max abs difference */
    char error[1200];       /* status 2: why; status 1: one line of what differs */
    double wall_ms;
} kcap_diff_result;

/*
 * Compare snapshot files pa and pb (pb is the reference side). Prints the full table to
 * `table` when non-NULL; when `json` is non-NULL writes the pair's JSON object (without
 * the document header) there. Fills *res; returns res->status.
 */
int kcap_diff_pair(const char *pa, const char *pb, const kcap_diff_opts *o, FILE *table,
                   FILE *json, kcap_diff_result *res);

/* Two folders: pair the files, diff every pair, print one row each; exit status. */
int kcap_diff_dirs(const char *da, const char *db, const kcap_diff_opts *o);

/* A --junit document of n pairs named by names[i]. Returns 0 or an error code (printed). */
int kcap_diff_junit(const kcap_diff_opts *o, const char *const *names,
                    const kcap_diff_result *res, int n, double wall_ms);

#ifdef __cplusplus
}
#endif

#endif
