/*
 * vattn_extend_util.h — the kernel tests' names for the test kit's extend form of a verify call
 * (tk_vext_build in ../testkit_vattn.h: draft rows in k_extend, the pool's draft rows NaN,
 * prefix-only kv_indices, SGLang's mask with garbage in its prefix columns and between
 * requests), bound to the kernel tests' one stream g_rng (vattn_test_util.h), as the CPU and
 * GPU tests call it. The conversion itself lives in the kit, so the capture client makes its
 * extend calls the same way. Header-only, static.
 */
#ifndef VATTN_EXTEND_UTIL_H
#define VATTN_EXTEND_UTIL_H

#include "vattn_test_util.h"

#define VATTN_EXT_MASK_PAD TK_VEXT_MASK_PAD

typedef tk_vext vattn_ext_host;

/* tk_vext_build with the garbage drawn from g_rng */
static void vattn_ext_from_verify(const vattn_args *a, const int32_t *indptr, const void *indices, const uint8_t *vis,
                                  const uint16_t *kv, size_t kv_elems, int kext_gap, vattn_ext_host *X)
{
    tk_vext_build(&g_rng, a, indptr, indices, vis, kv, kv_elems, kext_gap, X);
}

static void vattn_ext_free(vattn_ext_host *X) { tk_vext_free(X); }

#endif /* VATTN_EXTEND_UTIL_H */
