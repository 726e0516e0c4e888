/* Tiny freestanding runtime for Steadfast rv32im guests (no libc).
 *
 * ABI (see guests/README.md): ECALL with the number in a7, arguments in a0..a2, result
 * in a0; Linux RISC-V numbers read(63), write(64), exit(93), exit_group(94), plus the
 * Poseidon2 precompile SYS_POSEIDON2 = 0x53460001.
 */
#ifndef STEADFAST_RT_H
#define STEADFAST_RT_H

typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed int int32_t;
typedef signed long long int64_t;
typedef unsigned int size_t;
typedef int ssize_t;

#define SYS_READ 63
#define SYS_WRITE 64
#define SYS_EXIT 93
#define SYS_EXIT_GROUP 94
#define SYS_POSEIDON2 0x53460001u

/* BabyBear prime: every word given to the Poseidon2 precompile must be below it. */
#define BABYBEAR_P 2013265921u

/* ---- raw system calls */
static inline long rt_syscall3(long n, long a, long b, long c)
{
    register long a0 __asm__("a0") = a;
    register long a1 __asm__("a1") = b;
    register long a2 __asm__("a2") = c;
    register long a7 __asm__("a7") = n;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory");
    return a0;
}

static inline ssize_t rt_read(int fd, void *buf, size_t n)
{
    return rt_syscall3(SYS_READ, fd, (long)buf, (long)n);
}

static inline ssize_t rt_write(int fd, const void *buf, size_t n)
{
    return rt_syscall3(SYS_WRITE, fd, (long)buf, (long)n);
}

__attribute__((noreturn)) void rt_exit(int code);

/* Poseidon2 compression: out[0..8] = lanes 0..7 of Poseidon2(in[0..16]).  Every in[i]
 * must be < BABYBEAR_P.  Returns the ECALL's a0: a value in [-4095, -1] is an error
 * (qemu-user answers -ENOSYS = -38: it has no such call). */
static inline long rt_poseidon2(const uint32_t in[16], uint32_t out[8])
{
    return rt_syscall3(SYS_POSEIDON2, (long)in, (long)out, 0);
}

static inline int rt_is_error(long ret) { return ret < 0 && ret >= -4095; }

/* ---- input and output */

/* Reads the whole input (fd 0) into the runtime heap; returns its start (16-byte aligned)
 * and stores the byte count in *len.  Exits with code 255 if the heap cannot hold it. */
uint8_t *rt_read_all(size_t *len);

/* Reads up to n bytes, retrying short reads until n bytes or end of input. */
size_t rt_read_full(void *buf, size_t n);

/* Writes all n bytes to fd (retrying short writes); exits with 255 on a write error. */
void rt_write_all(int fd, const void *buf, size_t n);
void rt_puts(int fd, const char *s);           /* a NUL-terminated string, no newline added */
void rt_put_u32(int fd, uint32_t v);           /* decimal */

/* ---- heap: a bump allocator over a fixed .bss array (RT_HEAP_BYTES) */
#define RT_HEAP_BYTES (4u << 20)
void *rt_alloc(size_t n);                      /* 16-byte aligned; exits 255 when full */
size_t rt_heap_left(void);

/* ---- little-endian words at 4-byte-aligned addresses (no misaligned accesses) */
static inline uint32_t rt_ld32(const uint8_t *p) { return *(const uint32_t *)(const void *)p; }
static inline void rt_st32(uint8_t *p, uint32_t v) { *(uint32_t *)(void *)p = v; }

/* ---- what gcc may call even in freestanding code */
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);

#endif
