/*
 * dl_scope_dep.c — test library (test_capture_host.sh): stands for a runtime that is only a
 * dependency of a library loaded RTLD_LOCAL, so it is outside the global scope. It defines a
 * plain symbol and the two CUDA runtime entry points libkcap.so interposes (returning success).
 */
int kt_dep_sym(void) { return 42; }
int cudaStreamBeginCapture(void *s, int mode)
{
    (void)s;
    (void)mode;
    return 0;
}
int cudaStreamEndCapture(void *s, void **graph)
{
    (void)s;
    *graph = (void *)0x1;
    return 0;
}
