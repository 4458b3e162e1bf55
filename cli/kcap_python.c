/*
 * kcap_python.c — the CLI's bridge to the kcap Python package: `kcap export` (python3 -m
 * kcap export ...) and kcap_cli_run_python() for `kcap replay --report`.
 *
 * Why hand over instead of C: npz is a zip of .npy files that numpy writes and reads
 * natively, and the report draws with matplotlib; the Python package already reads
 * snapshots through the C reader (libkcapfmt.so). This file only makes that package
 * findable — the in-tree python/ next to build/, or an installed
 * PREFIX/lib/python3.X/dist-packages — and points it at this build's reader.
 */
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kcap_cli.h"

static void prepend_env(const char *var, const char *dir)
{
    const char *old = getenv(var);
    char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    setenv(var, buf, 1);
}

/* PYTHONPATH / KCAP_LIBFMT for this build or installation; returns the interpreter. */
static const char *python_env(void)
{
    const char *build = kcap_build_dir();
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
    snprintf(p, sizeof p, "%s/bin/kcap", build);
    if (!getenv("KCAP_BIN") && access(p, X_OK) == 0)
        setenv("KCAP_BIN", p, 1);
    const char *py = getenv("KCAP_PYTHON");
    if (!py || !*py)
        py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    return py;
}

int kcap_cli_run_python(const char *const *args, const char *who)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", who, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        const char *py = python_env();
        int n = 0;
        while (args[n])
            n++;
        const char **argv = calloc((size_t)n + 4, sizeof *argv);
        if (argv) {
            argv[0] = py;
            argv[1] = "-m";
            argv[2] = "kcap";
            memcpy(argv + 3, args, (size_t)n * sizeof *argv);
            execvp(py, (char *const *)argv);
        }
        fprintf(stderr, "%s: cannot run %s -m kcap: %s (set KCAP_PYTHON)\n", who, py,
                strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void export_usage(FILE *f)
{
    fprintf(f, "usage: kcap export FILE --to npz|pt [-o OUT] [--raw] [-q|-v]\n\n"
               "Writes a snapshot in a format numpy or torch reads natively:\n"
               "  npz: inputs/NAME, outputs/NAME, scalars/NAME, meta (JSON); bf16 becomes\n"
               "       float32 unless --raw keeps the uint16 bits (np.load);\n"
               "  pt:  torch.save of {inputs, outputs, scalars, meta, dtypes}, bf16 as\n"
               "       torch.bfloat16 (torch.load; needs torch in the interpreter).\n"
               "  -t, --to FMT       npz or pt (required)\n"
               "  -o, --output OUT   the file to write (default FILE with the new suffix;\n"
               "                     - = stdout). An existing file is never replaced (nor\n"
               "                     FILE itself): pick another name; a pipe or device\n"
               "                     (a FIFO, /dev/stdout, /dev/null) is written in place.\n"
               "  --raw              npz: keep bf16 as uint16 bits\n"
               "  -q: no 'wrote' line; -v: also every tensor written (name, dtype, shape).\n"
               KCAP_CLI_COMMON_HELP
               "Runs `python3 -m kcap export` (the kcap Python package; $KCAP_PYTHON picks\n"
               "the interpreter). Exit status: 0 ok, 1 failure, 2 usage error.\n");
}

int kcap_cmd_export(int argc, char **argv)
{
    static const struct option lo[] = {{"to", required_argument, 0, 't'},
                                       {"output", required_argument, 0, 'o'},
                                       {"raw", no_argument, 0, 'r'}, KCAP_CLI_COMMON_OPTS};
    const char *to = NULL, *out = NULL;
    int raw = 0, verbosity = KCAP_NORMAL, ch;
    optind = 0;
    while ((ch = kcap_cli_getopt("export", argc, argv, "t:o:" KCAP_CLI_COMMON_SHORT, lo)) != -1) {
        switch (ch) {
        case 't': to = optarg; break;
        case 'o': out = optarg; break;
        case 'r': raw = 1; break;
        case 'h': export_usage(stdout); return 0;
        case 'q':
        case 'v': kcap_cli_verbosity(ch, &verbosity); break;
        default: return 2; /* kcap_cli_getopt said what */
        }
    }
    if (argc - optind != 1) {
        if (argc - optind > 1)
            kcap_cli_usage_error("export", "one FILE only (got '%s' after '%s')",
                                 argv[optind + 1], argv[optind]);
        else
            export_usage(stderr);
        return 2;
    }
    if (!to || (strcmp(to, "npz") && strcmp(to, "pt"))) {
        kcap_cli_usage_error("export", to ? "--to: '%s' is not npz or pt" : "--to npz|pt is "
                             "required%s", to ? to : "");
        return 2;
    }
    /* the options as the Python side spells them: one parser decides what is valid. OUT as
     * --output=OUT and FILE after --, so that argparse takes a name starting with '-' (which
     * getopt accepted: -o -out.npz, -- -x.h5) as the value it is and not as an option. */
    char *outopt = NULL;
    if (out && asprintf(&outopt, "--output=%s", out) < 0) {
        fprintf(stderr, "kcap export: -o %s: out of memory\n", out);
        return 1;
    }
    const char *args[10];
    int n = 0;
    args[n++] = "export";
    args[n++] = "--to";
    args[n++] = to;
    if (outopt)
        args[n++] = outopt;
    if (raw)
        args[n++] = "--raw";
    if (verbosity != KCAP_NORMAL)
        args[n++] = verbosity == KCAP_QUIET ? "--quiet" : "--verbose";
    args[n++] = "--";
    args[n++] = argv[optind];
    args[n] = NULL;
    int rc = kcap_cli_run_python(args, "kcap export");
    free(outopt);
    return rc < 0 ? 1 : rc;
}
