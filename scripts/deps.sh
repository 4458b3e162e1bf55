#!/usr/bin/env bash
# deps.sh — the Debian packages kcap builds and tests with.
#   deps.sh --check PKG...    the build needs hdf5.h and zstd.h: if either is missing, install
#                             PKG... when root with apt-get (a fresh box just works), else
#                             print the exact command and fail
#   deps.sh --install PKG...  apt-get install every PKG not yet installed (root), or print
#                             the command to run; then the test-only packages below
# Test-only packages (--install only, never needed to build): chromium, the real browser
# tests/e2e/test_report_browser.sh renders `kcap replay --report` pages in. Installed in a
# step of their own whose failure is only a note (e.g. Ubuntu's chromium is a snap stub that
# cannot install in a container): that test then skips and says why.
TEST_PACKAGES=(chromium)
set -u
mode=$1; shift
updated=0  # apt-get update ran already
not_installed() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}
install_test_packages() {
    [ "$mode" = --install ] || return 0
    local t
    t=($(not_installed "${TEST_PACKAGES[@]}"))
    [ ${#t[@]} -eq 0 ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "deps: installing test-only ${t[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        { [ "$updated" = 1 ] || apt-get update -qq; } >&2
        apt-get install -y -qq --no-install-recommends "${t[@]}" >&2 ||
            echo "deps: note: 'apt-get install ${t[*]}' failed; the tests that need it will skip" >&2
    else
        echo "deps: for the browser test also: sudo apt-get install ${t[*]}" >&2
    fi
    return 0
}
have_headers() {
    local h5inc
    h5inc=$(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
    printf '#include <hdf5.h>\n#include <zstd.h>\nint main(void){return 0;}\n' |
        ${CC:-cc} $h5inc -x c -fsyntax-only - 2>/dev/null
}
if [ "$mode" = --check ] && have_headers; then exit 0; fi
missing=($(not_installed "$@"))
if [ ${#missing[@]} -eq 0 ]; then
    have_headers && { install_test_packages; exit 0; }
    echo "deps: packages installed but hdf5.h/zstd.h not found by the compiler" >&2; exit 1
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    updated=1
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 || {
        echo "deps: 'apt-get install ${missing[*]}' failed" >&2
        [ "$mode" = --check ] && have_headers && exit 0
        exit 1; }
    install_test_packages
    exit 0
fi
echo "deps: missing Debian packages: ${missing[*]}" >&2
echo "deps: run: sudo apt-get install ${missing[*]}" >&2
exit 1
