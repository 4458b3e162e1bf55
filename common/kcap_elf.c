/*
 * kcap_elf.c — the whole-library check of kcap_elf.h: ELF64 for this machine, every header
 * table and loadable segment inside the bytes we have (what a truncated build breaks).
 */
#include "kcap_elf.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

const char *kcap_elf_problem(const unsigned char *b, size_t len)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG))
        return len < SELFMAG ? "file too short to be a library" : "not an ELF file";
    Elf64_Ehdr eh;
    memcpy(&eh, b, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
        return "not a 64-bit shared library";
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
        (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff)
        return "program headers lie beyond the end of the file (truncated?)";
    if (eh.e_shnum && (eh.e_shoff > len ||
                       (uint64_t)eh.e_shnum * eh.e_shentsize > len - eh.e_shoff))
        return "section headers lie beyond the end of the file (truncated?)";
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, b + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) &&
            (ph.p_offset > len || ph.p_filesz > len - ph.p_offset))
            return "a segment lies beyond the end of the file (truncated?)";
    }
    return NULL;
}

