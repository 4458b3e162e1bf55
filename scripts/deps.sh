#!/usr/bin/env bash
# deps.sh — the Debian packages kcap builds and tests with.
#   deps.sh --check PKG...    the build needs hdf5.h and zstd.h: if either is missing, install
#                             PKG... when root with apt-get (a fresh box just works), else
#                             print the exact command and fail
#   deps.sh --install PKG...  apt-get install every PKG not yet installed (root), or print
#                             the command to run
set -u
mode=$1; shift
have_headers() {
    local h5inc
    h5inc=$(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
    printf '#include <hdf5.h>\n#include <zstd.h>\nint main(void){return 0;}\n' |
        ${CC:-cc} $h5inc -x c -fsyntax-only - 2>/dev/null
}
if [ "$mode" = --check ] && have_headers; then exit 0; fi
missing=()
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    have_headers && exit 0
    echo "deps: packages installed but hdf5.h/zstd.h not found by the compiler" >&2; exit 1
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 || {
        echo "deps: 'apt-get install ${missing[*]}' failed" >&2
        [ "$mode" = --check ] && have_headers && exit 0
        exit 1; }
    exit 0
fi
echo "deps: missing Debian packages: ${missing[*]}" >&2
echo "deps: run: sudo apt-get install ${missing[*]}" >&2
exit 1
