/* Entry point of every guest (rv32im, ilp32).
 *
 * The loader has set sp to a 16-byte-aligned stack top (qemu-user sets its own);
 * nothing else is assumed: argc/argv/envp/auxv are not read, and .bss is zero because
 * every loader zero-fills a PT_LOAD segment's memsz beyond its filesz.
 *
 * _start sets gp (the linker may relax accesses near __global_pointer$ to gp-relative
 * ones), calls main() and exits (exit_group, 94) with main's return value.
 */
    .file "crt0.S"
    .section .text.start, "ax"
    .globl _start
    .type _start, @function
_start:
    .option push
    .option norelax
    la      gp, __global_pointer$
    .option pop
    andi    sp, sp, -16         /* keep the given stack, 16-byte aligned */
    call    main
    li      a7, 94              /* exit_group(a0) */
    ecall
1:  j       1b                  /* not reached */
    .size _start, . - _start
