/*
 * kcap_cmd_export.c — `kcap export FILE --to npz [-o OUT] [--raw]`: hands over to the Python
 * package (python3 -m kcap export ...), which does the writing with numpy.
 *
 * Why exec instead of C: npz is a zip of .npy files that numpy writes and reads natively;
 * the Python package already reads snapshots through the C reader (libkcapfmt.so). This
 * command only makes that package findable — the in-tree python/ next to build/, or an
 * installed PREFIX/lib/python3.X/dist-packages — and points it at this build's reader.
 */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcap_cli.h"

static void prepend_env(const char *var, const char *dir)
{
    const char *old = getenv(var);
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    setenv(var, buf, 1);
}

int kcap_cmd_export(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: kcap export FILE --to npz [-o OUT] [--raw]\n\n"
                   "Writes a snapshot as a numpy .npz (inputs/NAME, outputs/NAME, scalars/NAME,\n"
                   "meta as JSON); bf16 becomes float32 unless --raw keeps the uint16 bits.\n"
                   "Runs `python3 -m kcap export` (the kcap Python package; $KCAP_PYTHON picks\n"
                   "the interpreter). Exit status: 0 ok, 1 failure, 2 usage error.\n");
        return argc < 2 ? 2 : 0;
    }
    const char *build = kcap_cli_build_dir();
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/../python/kcap/__init__.py", build);
    if (access(p, R_OK) == 0) { /* in-tree: build/../python */
        snprintf(p, sizeof p, "%s/../python", build);
        prepend_env("PYTHONPATH", p);
    }
    glob_t g;
    snprintf(p, sizeof p, "%s/lib/python3*/dist-packages", build); /* installed */
    if (glob(p, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            prepend_env("PYTHONPATH", g.gl_pathv[i]);
        globfree(&g);
    }
    snprintf(p, sizeof p, "%s/lib/libkcapfmt.so", build);
    if (!getenv("KCAP_LIBFMT") && access(p, R_OK) == 0)
        setenv("KCAP_LIBFMT", p, 1);
    const char *py = getenv("KCAP_PYTHON");
    if (!py || !*py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        fprintf(stderr, "kcap export: out of memory\n");
        return 1;
    }
    args[0] = (char *)py;
    args[1] = "-m";
    args[2] = "kcap";
    args[3] = "export";
    for (int i = 1; i < argc; i++)
        args[3 + i] = argv[i];
    execvp(py, args);
    fprintf(stderr, "kcap export: cannot run %s: %m (set KCAP_PYTHON)\n", py);
    free(args);
    return 1;
}
