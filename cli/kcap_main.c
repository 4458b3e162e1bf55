/*
 * kcap_main.c — entry point of build/bin/kcap: dispatches to the subcommands that the
 * modules implement (see kcap_cli.h) and prints the usage summary.
 */
#include "kcap_cli.h"

#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} kcap_command;

static const kcap_command commands[] = {
    {"record", kcap_cmd_record, "run a command with libkcap.so preloaded, snapshotting its calls"},
    {"arm", kcap_cmd_arm, "arm a running, dormant process to capture its next calls"},
    {"shadow", kcap_cmd_shadow, "swap, stop or show the candidate kernel of a shadow-mode process"},
    {"info", kcap_cmd_info, "show a snapshot's metadata, tensors and compression"},
    {"check", kcap_cmd_check, "fully validate snapshot files or directories"},
    {"ls", kcap_cmd_ls, "list the snapshots in a directory"},
    {"replay", kcap_cmd_replay, "run snapshots through a kernel library and judge the results"},
    {"diff", kcap_cmd_diff, "compare two snapshots (or two folders) tensor by tensor"},
    {"dump", kcap_cmd_dump, "print a snapshot's values and per-tensor statistics"},
    {"export", kcap_cmd_export, "write a snapshot as numpy .npz or torch .pt (python3 -m kcap)"},
};

static void usage(FILE *f)
{
    fprintf(f, "kcap %s — capture live kernel calls, replay them against a rebuilt kernel\n\n"
               "usage: kcap <command> [options]     kcap -V | --version\n\ncommands:\n", KCAP_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'kcap <command> --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") ||
        !strcmp(argv[1], "version")) {
        printf("kcap %s\n", KCAP_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kcap: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
