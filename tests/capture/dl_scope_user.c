/*
 * dl_scope_user.c — test library (test_capture_host.sh), linked against libdl_scope_dep.so
 * and dlopen'ed RTLD_LOCAL by dl_scope_main: what a Python extension that links a runtime
 * does. Its dlsym(RTLD_DEFAULT) must still see its own dependency, and its graph-capture
 * calls must still reach its runtime, with libkcap.so preloaded.
 */
#include <dlfcn.h>

int cudaStreamBeginCapture(void *s, int mode);
int cudaStreamEndCapture(void *s, void **graph);

int kt_lookup(void) { return dlsym(RTLD_DEFAULT, "kt_dep_sym") != 0; }
int kt_graph(void)
{
    void *g = 0;
    int a = cudaStreamBeginCapture(0, 0);
    int b = cudaStreamEndCapture(0, &g);
    return a * 10 + b;
}
