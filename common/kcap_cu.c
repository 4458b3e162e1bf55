/*
 * kcap_cu.c — run-time loader of the CUDA driver API (see kcap_cu.h for why).
 */
#include "kcap_cu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

static kcap_cu g_cu;
static const kcap_cu *g_cu_ok;
static const char *g_cu_why = "CUDA driver not loaded";
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;

static void kcap_cu_do_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        g_cu_why = "libcuda.so.1 not found (no NVIDIA driver on this machine)";
        return;
    }
#define KCAP_CU_SYM(name, sym, ret, params)                                                \
    g_cu.name = (ret(CUDAAPI *) params)dlsym(h, sym);                                      \
    if (!g_cu.name) {                                                                      \
        g_cu_why = "libcuda.so.1 lacks " sym " (driver too old)";                         \
        dlclose(h);                                                                        \
        return;                                                                            \
    }
    KCAP_CU_FUNCS(KCAP_CU_SYM)
#undef KCAP_CU_SYM
#define KCAP_CU_OPT_SYM(name, sym, ret, params) g_cu.name = (ret(CUDAAPI *) params)dlsym(h, sym);
    KCAP_CU_OPT_FUNCS(KCAP_CU_OPT_SYM)
#undef KCAP_CU_OPT_SYM
    g_cu.handle = h;
    if (g_cu.cuInit(0) != CUDA_SUCCESS) {
        g_cu_why = "cuInit failed (no usable CUDA device)";
        return;
    }
    int n = 0;
    if (g_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
        g_cu_why = "no CUDA device";
        return;
    }
    g_cu_ok = &g_cu;
}

const kcap_cu *kcap_cu_load(const char **why)
{
    pthread_once(&g_cu_once, kcap_cu_do_load);
    if (!g_cu_ok && why)
        *why = g_cu_why;
    return g_cu_ok;
}

const char *kcap_cu_errstr(const kcap_cu *cu, CUresult r)
{
    const char *s = NULL;
    if (cu && cu->cuGetErrorString && cu->cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}
