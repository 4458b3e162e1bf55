/*
 * vattn_check.h — argument validation shared by the CPU and CUDA verify-attention libraries.
 *
 * Both libraries must reject exactly the same calls with exactly the same status codes, so
 * the checks live in one place (vattn_check.c) and are compiled into both .so files.
 * Internal header: not installed, not part of the ABI.
 */
#ifndef VATTN_CHECK_H
#define VATTN_CHECK_H

#include "verify_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks every host-visible field of *args (pointers, flags, sizes, strides, scale) and the
 * workspace against `need`, the library's workspace size for these sizes ((size_t)-1 when it
 * rejects them); does NOT dereference tensor pointers. Returns VATTN_OK or the first failing
 * vattn_status. `need_align16` adds the 16-byte alignment checks of the CUDA path. */
int vattn_check_args_ws(const vattn_args *args, const void *workspace, size_t workspace_bytes,
                        int need_align16, size_t need);
int vattn_check_extend_args_ws(const vattn_extend_args *args, const void *workspace,
                               size_t workspace_bytes, int need_align16, size_t need);

/* Host memory only: checks kv_indptr (starts at 0, non-decreasing, kv_len_b >= q_len) and
 * that every kv_indices entry is in [0, num_slots). The extend form: qo_indptr[b] = b*q_len,
 * prefix ranges non-decreasing, mask_indptr leaving each request q_len * kv_len entries. */
int vattn_check_host_data(const vattn_args *args);
int vattn_check_extend_host_data(const vattn_extend_args *args);

/* The shared status-message table. */
const char *vattn_status_message(int status);

#ifdef __cplusplus
}
#endif

#endif
