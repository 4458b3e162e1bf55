/*
 * kcap_ptx.S — embeds the PTX of capture/kcap_gather.cu (built by nvcc at build time) in
 * libkcap.so as the NUL-terminated string kcap_gather_ptx, without a code generator or a
 * CUDA link. Built without nvcc, the string is empty and the device path falls back to
 * row-by-row copies (and the zero-stall staging is unavailable).
 */
    .section .rodata
    .globl kcap_gather_ptx
    .hidden kcap_gather_ptx
    .type kcap_gather_ptx, @object
    .p2align 4
kcap_gather_ptx:
#ifdef KCAP_PTX_FILE
    .incbin KCAP_PTX_FILE
#endif
    .byte 0
    .size kcap_gather_ptx, .-kcap_gather_ptx
    .section .note.GNU-stack,"",@progbits
