/*
 * kcap_elf.h — kcap_elf.c: is a byte buffer a whole shared library for this machine? A build
 * caught half-way writes a truncated ELF whose program headers point past the end of the
 * file; dlopen() maps those pages anyway and the process dies of SIGBUS when the loader
 * touches them. Replay checks a kernel library's bytes before loading them, and so does the
 * interposer before it loads a shadow-mode candidate into the host process.
 */
#ifndef KCAP_ELF_H
#define KCAP_ELF_H

#include <stddef.h>

/* NULL when b[0..len) is an ELF64 shared object whose header tables and loadable segments
 * all lie inside the bytes; else why not (a static string). */
const char *kcap_elf_problem(const unsigned char *b, size_t len);

#endif
