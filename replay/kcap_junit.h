/*
 * kcap_junit.h — JUnit XML for `kcap replay --junit` and `kcap diff --junit`: one
 * <testcase> per snapshot (or snapshot pair), so CI systems (GitLab, Jenkins, GitHub
 * reporters) show a per-case result with the failure's details.
 *
 * The layout is the common subset every consumer reads: <testsuites><testsuite name tests
 * failures errors skipped time><testcase classname name time> with an optional <failure
 * message type>text</failure> / <error ...> / <skipped/>. Text is escaped, and characters
 * XML 1.0 forbids (control bytes) are replaced, so the file always parses.
 */
#ifndef KCAP_JUNIT_H
#define KCAP_JUNIT_H

#include "kcap_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kcap_junit_status {
    KCAP_JUNIT_PASS = 0,
    KCAP_JUNIT_FAIL,
    KCAP_JUNIT_ERROR,
    KCAP_JUNIT_SKIP
} kcap_junit_status;

typedef struct kcap_junit_case {
    const char *classname; /* e.g. "kcap.replay" */
    const char *name;      /* the snapshot's name */
    double time_s;
    kcap_junit_status status;
    const char *message;   /* one line (failure/error/skip), may be NULL */
    const char *detail;    /* element text: the full explanation, may be NULL */
} kcap_junit_case;

/* Write the document to path ("-" = stdout; otherwise atomically). */
int kcap_junit_write(const char *path, const char *suite, const kcap_junit_case *cases, int n,
                     double time_s, kcap_error *err);

#ifdef __cplusplus
}
#endif

#endif
