/*
 * kcap_builddir.c — the build tree of the running program (kcap_builddir.h): the parent of
 * the executable's directory, from /proc/self/exe (a symlink to the program) so it holds
 * wherever the checkout lives and whatever the working directory is.
 */
#include "kcap_builddir.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

const char *kcap_build_dir(void)
{
    static char dir[PATH_MAX];
    if (dir[0])
        return dir;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return ".";
    exe[n] = '\0';
    /* …/build/bin/kcap -> …/build */
    char *d = dirname(exe);
    snprintf(dir, sizeof dir, "%s", dirname(d));
    return dir;
}
