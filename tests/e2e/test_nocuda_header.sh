#!/usr/bin/env bash
# test_nocuda_header.sh — cli/nocuda/cuda.h (used to build the CPU parts without the CUDA
# toolkit) must agree with the real cuda.h: every constant it defines has the same value
# and every type the same size. The names are read from the stub itself, so a new one is
# checked as soon as it is added. Skips (77) where no toolkit header exists to compare with.
. "$(dirname "$0")/../lib.sh"
# every step must succeed: the first failing command ends the test with its status
set -eo pipefail
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
[ -f "$CUDA_HOME/include/cuda.h" ] || skip "no $CUDA_HOME/include/cuda.h to compare with"
# the stub without its comments (the preprocessor keeps #defines with -dD)
${CC:-cc} -E -dD -P -x c cli/nocuda/cuda.h > "$T/stub.i"
consts=$(grep -oE '\bCUDA?_[A-Z0-9_]+\b' "$T/stub.i" | grep -vE '^(CUDAAPI|CUDA_CB)$' | sort -u)
types=$(grep -oE '\bCU[a-z][A-Za-z_]*\b' "$T/stub.i" | grep -vE '_(st|enum)$' | sort -u)
[ -n "$consts" ] && [ -n "$types" ]
{
    echo '#include <cuda.h>'
    echo '#include <stdio.h>'
    echo 'int main(void) {'
    for c in $consts; do echo "printf(\"$c %lld\\n\", (long long)($c));"; done
    for t in $types; do echo "printf(\"sizeof $t %zu\\n\", sizeof($t));"; done
    echo 'return 0; }'
} > "$T/p.c"
${CC:-cc} -std=gnu11 -Wall -Werror -I"$CUDA_HOME/include" "$T/p.c" -o "$T/real"
${CC:-cc} -std=gnu11 -Wall -Werror -Icli/nocuda "$T/p.c" -o "$T/stub"
"$T/real" > "$T/real.txt"
"$T/stub" > "$T/stub.txt"
diff "$T/real.txt" "$T/stub.txt"
echo "$(wc -l < "$T/real.txt") constants and sizes agree with $CUDA_HOME/include/cuda.h"
