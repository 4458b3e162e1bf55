/*
 * dl_scope_main.c — dlopens libdl_scope_user.so RTLD_LOCAL (RTLD_GLOBAL with a second
 * argument "global") and prints what its lookups and graph calls returned: "lookup=1 graph=0
 * exec=0" without libkcap.so, and must be the same with it (test_capture_host.sh).
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | (argc == 3 ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        fprintf(stderr, "dl_scope_main: %s\n", dlerror());
        return 2;
    }
    int (*lookup)(void) = (int (*)(void))dlsym(h, "kt_lookup");
    int (*graph)(void) = (int (*)(void))dlsym(h, "kt_graph");
    int (*exec)(void) = (int (*)(void))dlsym(h, "kt_graph_exec");
    if (!lookup || !graph || !exec)
        return 2;
    printf("lookup=%d graph=%d exec=%d\n", lookup(), graph(), exec());
    return 0;
}
