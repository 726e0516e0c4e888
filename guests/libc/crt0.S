/* Start file of the picolibc guests (rv32im, ilp32; scripts/rv32-cc links it first).
 *
 * The loader has set sp (the machine: 0x7FFF_FFF0; qemu-user: its own stack) and mapped
 * the segments of guests/libc/rv32.ld with zeros beyond their file bytes.  _start:
 *   1. gp = __global_pointer$ (the linker relaxes accesses near it to gp-relative ones),
 *      tp = __tls_base (the one thread's TLS block, in place: picolibc's errno lives
 *      there), sp rounded down to 16 bytes;
 *   2. zeroes [__bss_start, __bss_end) (.sbss, .bss) a word at a time -- redundant on
 *      both loaders, which zero-fill, but what a C start file promises; 3 cycles per
 *      4-byte word of .bss (a large static array costs that at every start: prefer
 *      malloc, whose heap is not touched);
 *   3. runs the constructors (__libc_init_array);
 *   4. calls main(0, argv, envp) with argv = envp = { NULL };
 *   5. exit(main's return value): atexit handlers, destructors (syscalls.c's flushes
 *      stdout and stderr), then _exit -> exit_group(93/94) with the value mod 256.
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
    la      tp, __tls_base
    andi    sp, sp, -16
    la      t0, __bss_start
    la      t1, __bss_end
    bgeu    t0, t1, 2f
1:  sw      zero, 0(t0)
    addi    t0, t0, 4
    bltu    t0, t1, 1b
2:  call    __libc_init_array
    li      a0, 0
    la      a1, __steadfast_argv
    mv      a2, a1
    call    main
    call    exit
3:  j       3b                  /* not reached: exit does not return */
    .size _start, . - _start

    .section .sbss.__steadfast_argv, "aw", @nobits
    .balign 4
    .type __steadfast_argv, @object
__steadfast_argv:
    .zero   4                   /* argv[0] = envp[0] = NULL */
    .size __steadfast_argv, 4
