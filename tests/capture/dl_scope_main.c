/*
 * dl_scope_main.c — dlopens libdl_scope_user.so RTLD_LOCAL and prints what its lookups and
 * graph-capture calls returned: "lookup=1 graph=0" without libkcap.so, and must be the same
 * with it (test_capture_host.sh).
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dl_scope_main: %s\n", dlerror());
        return 2;
    }
    int (*lookup)(void) = (int (*)(void))dlsym(h, "kt_lookup");
    int (*graph)(void) = (int (*)(void))dlsym(h, "kt_graph");
    if (!lookup || !graph)
        return 2;
    printf("lookup=%d graph=%d\n", lookup(), graph());
    return 0;
}
