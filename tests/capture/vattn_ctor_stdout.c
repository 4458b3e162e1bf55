/*
 * vattn_ctor_stdout.c — linked into a copy of the CPU library (libvattn_cpu_redir.so): a
 * correct candidate whose constructor writes 1 MB to stdout and then points stdout at
 * /dev/null, as some libraries' logging does. `kcap shadow`'s replay gate must still read
 * the replay's document (it came on stdout, which this spoiled and then hid).
 */
#include <stdio.h>
#include <string.h>

__attribute__((constructor)) static void vattn_ctor_stdout(void)
{
    char line[1024];
    memset(line, 'x', sizeof line - 2);
    line[sizeof line - 2] = '\n', line[sizeof line - 1] = '\0';
    for (int i = 0; i < 1024; i++)
        fputs(line, stdout);
    fflush(stdout);
    if (!freopen("/dev/null", "w", stdout))
        return;
}
