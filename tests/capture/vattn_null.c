/*
 * vattn_null.c — a library with the verify ABI whose functions return at once, so the
 * dormant-overhead benchmark measures libkcap.so's per-call cost and nothing else.
 */
#include "verify_attn.h"

VATTN_API int vattn_verify(const vattn_args *a, void *ws, size_t n, void *s)
{
    (void)ws, (void)n, (void)s;
    return a ? 0 : 1;
}

VATTN_API int vattn_verify_reference(const vattn_args *a, void *ws, size_t n, void *s)
{
    (void)ws, (void)n, (void)s;
    return a ? 0 : 1;
}

VATTN_API const char *vattn_backend(void) { return "cpu"; }
