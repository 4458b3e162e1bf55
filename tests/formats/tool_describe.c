/*
 * tool_describe.c — prints FORMAT.md's generated part: one section per args struct of the
 * built-in call descriptions (kernels/vattn_desc.c), naming every call that shares it, with
 * the table kcap_call_describe() renders (the same text every snapshot stores). Used by
 * scripts/format_tables.sh (`make format-tables`, and the drift test in `make test`).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kcap_calls.h"

int main(void)
{
    for (int i = 0; i < kcap_builtin_count; i++) {
        const kcap_call_desc *d = &kcap_builtin_calls[i];
        int first = 1;
        for (int k = 0; k < i; k++)
            first &= kcap_builtin_calls[k].args != d->args;
        if (!first)
            continue;
        printf("### ");
        for (int k = i, n = 0; k < kcap_builtin_count; k++)
            if (kcap_builtin_calls[k].args == d->args)
                printf("%s`%s`", n++ ? " / " : "", kcap_builtin_calls[k].name);
        printf("\n\nReference entry point `%s`, workspace `%s`, memory told by `%s`, tokens per "
               "request `%s`.\n\n",
               d->reference ? d->reference : "-", d->workspace_fn ? d->workspace_fn : "-",
               d->probe ? d->probe : "-", d->tokens_per_request ? d->tokens_per_request : "-");
        char *t = kcap_call_describe(d);
        if (!t) {
            fprintf(stderr, "tool_describe: out of memory\n");
            return 1;
        }
        printf("%s\n", t);
        free(t);
    }
    return 0;
}
