/* Freestanding runtime for Steadfast rv32im guests: exit, I/O helpers, a bump heap and
 * the mem* functions gcc may emit calls to.  Built with -fno-tree-loop-distribute-patterns
 * so that the loops below are not themselves turned into calls to memset/memcpy. */
#include "rt.h"

__attribute__((noreturn)) void rt_exit(int code)
{
    for (;;)
        rt_syscall3(SYS_EXIT_GROUP, code, 0, 0);
}

/* ---- heap */
static uint8_t heap[RT_HEAP_BYTES] __attribute__((aligned(16)));
static size_t heap_used;

size_t rt_heap_left(void) { return RT_HEAP_BYTES - heap_used; }

void *rt_alloc(size_t n)
{
    size_t rounded = (n + 15u) & ~15u;
    if (rounded < n || rounded > RT_HEAP_BYTES - heap_used) {
        rt_puts(2, "rt_alloc: out of memory\n");
        rt_exit(255);
    }
    void *p = heap + heap_used;
    heap_used += rounded;
    return p;
}

/* ---- input */
size_t rt_read_full(void *buf, size_t n)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = rt_read(0, p + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

uint8_t *rt_read_all(size_t *len)
{
    /* All remaining heap space is the buffer; what is read is then kept allocated. */
    uint8_t *start = heap + heap_used;
    size_t cap = RT_HEAP_BYTES - heap_used, got = 0;
    for (;;) {
        if (got == cap) {               /* full: is there more input? */
            uint8_t probe;
            if (rt_read(0, &probe, 1) > 0) {
                rt_puts(2, "rt_read_all: input larger than the heap\n");
                rt_exit(255);
            }
            break;
        }
        ssize_t r = rt_read(0, start + got, cap - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    heap_used += (got + 15u) & ~15u;
    *len = got;
    return start;
}

/* ---- output */
void rt_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = rt_write(fd, p, n);
        if (r <= 0)
            rt_exit(255);
        p += r;
        n -= (size_t)r;
    }
}

void rt_puts(int fd, const char *s) { rt_write_all(fd, s, strlen(s)); }

void rt_put_u32(int fd, uint32_t v)
{
    char buf[10];
    int i = 10;
    do {
        buf[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    rt_write_all(fd, buf + i, (size_t)(10 - i));
}

/* ---- mem* (byte loops: any alignment, never a misaligned word access) */
void *memcpy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if ((((size_t)d | (size_t)s | n) & 3u) == 0) {     /* all word-aligned: copy words */
        uint32_t *dw = dst;
        const uint32_t *sw = src;
        for (size_t i = 0; i < n / 4u; i++)
            dw[i] = sw[i];
        return dst;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (d == s || n == 0)
        return dst;
    if (d < s) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        for (size_t i = n; i > 0; i--)
            d[i - 1] = s[i - 1];
    }
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)c;
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return (int)x[i] - (int)y[i];
    return 0;
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n] != 0)
        n++;
    return n;
}
