/*
 * vattn_winput.c — a shadow-mode candidate that uses its inputs as scratch: it zeroes the
 * first token and head of q and returns success (test_capture_shadow_hostile.sh: the
 * service's q must be untouched, the candidate reading kcap's copy of the inputs). Built
 * with -DWS_WRITES_O, its workspace function also zeroes the start of the output o it is
 * shown (the service's o must be untouched).
 */
#include <string.h>

#include "verify_attn.h"

VATTN_API int vattn_verify(const vattn_args *a, void *ws, size_t n, void *s)
{
    (void)ws, (void)n, (void)s;
    if (a && a->q)
        memset((void *)a->q, 0, 2 * 576);
    return 0;
}

VATTN_API int vattn_abi_version(void) { return VATTN_ABI_VERSION; }
VATTN_API const char *vattn_backend(void) { return "cpu"; }
VATTN_API size_t vattn_workspace_size(const vattn_args *a)
{
#ifdef WS_WRITES_O
    if (a && a->o)
        memset(a->o, 0, 64);
#endif
    return a ? 0 : (size_t)-1;
}
VATTN_API const char *vattn_status_string(int status) { return status ? "error" : "success"; }
