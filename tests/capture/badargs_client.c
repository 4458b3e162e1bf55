/*
 * badargs_client.c — 64 calls the verify library rejects or faults on, each in a forked
 * child, printing what each returned ("case N status S") or the signal that ended it
 * ("case N signal S"). Run bare and under libkcap.so, the two outputs must be identical:
 * capture must never turn a rejected call into a crash (5 of these once crashed under
 * capture when its stub vattn_workspace_size skipped the workspace checks and the data check
 * then read unmapped kv_indptr / kv_indices directly).
 *
 * Case = workspace variant (4: valid, NULL, 1 byte, misaligned) x data variant (16: valid,
 * kv_indptr / kv_indices / q / kv_cache / visibility unmapped, kv_indptr shorter than bs+1
 * ending at an unmapped page, decreasing kv_indptr, kv_indices out of range, huge nnz,
 * misaligned q / kv_indices, bad struct_size, num_heads 0, unmapped lse, NULL args).
 * Linked against libverify_attn_cpu.so (the dynamic-linker path); with `--dlopen LIB` the
 * functions come from dlopen(LIB, RTLD_LOCAL) + dlsym instead (the path of Python ctypes).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "verify_attn.h"
#include "../testkit_vattn.h" /* QK, DV */

enum { BS = 2, QL = 2, H = 2, KV = 40, SLOTS = 128 };

static uint16_t g_q[BS * QL * H * QK], g_pool[SLOTS * QK], g_o[BS * QL * H * DV];
static float g_lse[BS * QL * H];
static int32_t g_indptr[BS + 1] = {0, KV, 2 * KV};
static int64_t g_idx[2 * KV + 8];
static uint8_t g_vis[BS * QL * QL];

typedef int (*verify_fn)(const vattn_args *, void *, size_t, void *);
typedef size_t (*wssize_fn)(const vattn_args *);
static verify_fn g_verify = vattn_verify;
static wssize_fn g_wssize = vattn_workspace_size;

static int one_case(int c, unsigned char *noaccess, size_t page)
{
    vattn_args a = {.struct_size = sizeof a, .dtype = VATTN_DTYPE_BF16,
                    .index_type = VATTN_INDEX_INT64, .bs = BS, .q_len = QL, .num_heads = H,
                    .num_slots = SLOTS, .sm_scale = 0.0625f, .q = g_q,
                    .q_stride_t = H * QK, .q_stride_h = QK, .kv_cache = g_pool,
                    .kv_stride = QK, .kv_indptr = g_indptr, .kv_indices = g_idx,
                    .visibility = g_vis, .o = g_o, .o_stride_t = H * DV, .o_stride_h = DV,
                    .lse = g_lse};
    size_t need = g_wssize(&a);
    static unsigned char ws_buf[1 << 20] __attribute__((aligned(64)));
    void *ws = ws_buf;
    size_t wsb = need;
    switch (c / 16) {
    case 1: ws = NULL; break;
    case 2: wsb = 1; break;
    case 3: ws = ws_buf + 1; break;
    default: break;
    }
    /* the last bs ints of a page followed by the unmapped page */
    int32_t *short_ip = (int32_t *)(noaccess - BS * sizeof(int32_t));
    static int32_t dec[BS + 1] = {0, KV, KV - 5};
    static int32_t huge[BS + 1] = {0, KV, 1 << 30};
    switch (c % 16) {
    case 1: a.kv_indptr = (const int32_t *)noaccess; break;
    case 2: a.kv_indices = noaccess; break;
    case 3:
        short_ip[0] = 0, short_ip[1] = KV;
        a.kv_indptr = short_ip;
        break;
    case 4: a.kv_indptr = dec; break;
    case 5: g_idx[3] = SLOTS + 7; break;
    case 6: a.q = (const void *)noaccess; break;
    case 7: a.kv_cache = (const void *)noaccess; break;
    case 8: a.visibility = noaccess; break;
    case 9: a.kv_indptr = huge; break;
    case 10: a.q = (const char *)g_q + 1; break;
    case 11: a.kv_indices = (const char *)g_idx + 4; break;
    case 12: a.struct_size = 8; break;
    case 13: a.num_heads = 0; break;
    case 14: a.lse = (float *)(void *)(noaccess + page - 4); break;
    case 15: return g_verify(NULL, ws, wsb, NULL);
    default: break;
    }
    return g_verify(&a, ws, wsb, NULL);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--dlopen")) {
        void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        g_verify = h ? (verify_fn)dlsym(h, "vattn_verify") : NULL;
        g_wssize = h ? (wssize_fn)dlsym(h, "vattn_workspace_size") : NULL;
        if (!g_verify || !g_wssize) {
            fprintf(stderr, "badargs_client: cannot load %s: %s\n", argv[2], dlerror());
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: badargs_client [--dlopen LIB]\n");
        return 2;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + page, page, PROT_NONE))
        return 1;
    for (int i = 0; i < 2 * KV + 8; i++)
        g_idx[i] = (i * 37) % SLOTS;
    for (size_t i = 0; i < sizeof g_q / 2; i++)
        g_q[i] = 0x3f80;
    for (size_t i = 0; i < sizeof g_pool / 2; i++)
        g_pool[i] = (uint16_t)(0x3f00 + (i % 64));
    for (int c = 0; c < 64; c++) {
        fflush(stdout);
        pid_t p = fork();
        if (p < 0)
            return 1;
        if (p == 0)
            _exit(one_case(c, m + page, page) & 0xff);
        int st = 0;
        waitpid(p, &st, 0);
        if (WIFSIGNALED(st))
            printf("case %d signal %d\n", c, WTERMSIG(st));
        else
            printf("case %d status %d\n", c, WEXITSTATUS(st));
    }
    return 0;
}
