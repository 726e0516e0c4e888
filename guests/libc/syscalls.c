/* The operating-system layer of the picolibc guests: what picolibc (Debian's
 * picolibc-riscv64-unknown-elf, tinystdio) expects from below, over the Steadfast
 * machine's system calls (docs/rv32.md "System calls", "C programs (picolibc)").
 *
 *   stdin   buffered reads of fd 0 = the program's input (read, 63);
 *   stdout  fd 1 = the proved output, fully buffered (4 KiB), flushed when full, by
 *           fflush and at exit();
 *   stderr  fd 2 = a diagnostic stream that is not part of the proved statement,
 *           line-buffered (a write per line, and at exit());
 *   read/write   the POSIX calls themselves (the machine: fd 0 readable, fd 1 and 2
 *           writable, anything else EBADF);
 *   _exit   exit_group (94): the run ends with the code mod 256;
 *   sbrk    the heap [__heap_start, __heap_end) of guests/libc/rv32.ld (16 MiB unless the
 *           link sets __heap_size); past it sbrk fails with ENOMEM, so malloc returns NULL
 *           with errno = ENOMEM;
 *   kill(getpid(), sig)   (abort, raise) ends the run with exit code 128 + sig after
 *           flushing stderr;
 *   fgets   replaced: picolibc 1.8's returns NULL when the input ends in a line without a
 *           newline, losing it; this one is C's (the partial line, then NULL);
 *   the rest -- files, clocks, entropy, processes -- fail with ENOSYS (open, stat,
 *   unlink, rename, gettimeofday, times, getentropy: so fopen returns NULL, time() and
 *   clock() return -1) or answer for the one process (getpid = 1, isatty = 0,
 *   fstat/lseek/close on fds 0..2).  No threads.
 *
 * The same ELF runs under qemu-riscv32 (Linux's RISC-V numbers) with the same output and
 * exit code.  A system call the machine does not have (inline `ecall` with another a7)
 * stops the machine with ExecutionError kind "syscall" naming the number.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/types.h>
#include <unistd.h>

#define SYS_READ 63
#define SYS_WRITE 64
#define SYS_EXIT_GROUP 94

static inline long sf_syscall3(long n, long a, long b, long c)
{
    register long a0 __asm__("a0") = a;
    register long a1 __asm__("a1") = b;
    register long a2 __asm__("a2") = c;
    register long a7 __asm__("a7") = n;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a7) : "memory");
    return a0;
}

static long sf_result(long r)
{
    if ((unsigned long)r > (unsigned long)-4096L) {   /* -4095 .. -1: -errno */
        errno = (int)-r;
        return -1;
    }
    return r;
}

ssize_t read(int fd, void *buf, size_t count)
{
    return sf_result(sf_syscall3(SYS_READ, fd, (long)buf, (long)count));
}

ssize_t write(int fd, const void *buf, size_t count)
{
    return sf_result(sf_syscall3(SYS_WRITE, fd, (long)buf, (long)count));
}

void _exit(int code)
{
    for (;;)
        sf_syscall3(SYS_EXIT_GROUP, code, 0, 0);
}

/* ---- the heap */
extern char __heap_start[], __heap_end[];
static char *sf_brk = __heap_start;

void *sbrk(ptrdiff_t incr)
{
    char *old = sf_brk;
    if (incr >= 0 ? (size_t)incr > (size_t)(__heap_end - sf_brk)
                  : (size_t)-incr > (size_t)(sf_brk - __heap_start)) {
        errno = ENOMEM;
        return (void *)-1;
    }
    sf_brk += incr;
    return old;
}

/* ---- stdin, stdout, stderr (tinystdio FILEs) */
struct sf_file {
    FILE file;              /* first: tinystdio passes &file back */
    int fd;
    int line;               /* flush at '\n' */
    int len, pos, size;
    unsigned char *buf;
};

#define SF_IN_BYTES 4096
#define SF_OUT_BYTES 4096
#define SF_ERR_BYTES 256
/* Not zeroed by crt0.S (rv32.ld's .noinit): their contents before use do not matter. */
static unsigned char sf_in_buf[SF_IN_BYTES] __attribute__((section(".noinit.sf_in")));
static unsigned char sf_out_buf[SF_OUT_BYTES] __attribute__((section(".noinit.sf_out")));
static unsigned char sf_err_buf[SF_ERR_BYTES] __attribute__((section(".noinit.sf_err")));

static int sf_flush(FILE *f)
{
    struct sf_file *s = (struct sf_file *)f;
    int done = 0;
    if (s->fd == 0)
        return 0;
    while (done < s->len) {
        ssize_t r = write(s->fd, s->buf + done, (size_t)(s->len - done));
        if (r <= 0) {
            s->len = 0;
            return -1;
        }
        done += (int)r;
    }
    s->len = 0;
    return 0;
}

static int sf_put(char c, FILE *f)
{
    struct sf_file *s = (struct sf_file *)f;
    s->buf[s->len++] = (unsigned char)c;
    if (s->len == s->size || (s->line && c == '\n')) {
        if (sf_flush(f) < 0)
            return _FDEV_ERR;
    }
    return (unsigned char)c;
}

static int sf_get(FILE *f)
{
    struct sf_file *s = (struct sf_file *)f;
    if (s->pos == s->len) {
        ssize_t r = read(s->fd, s->buf, (size_t)s->size);
        if (r == 0)
            return _FDEV_EOF;
        if (r < 0)
            return _FDEV_ERR;
        s->len = (int)r;
        s->pos = 0;
    }
    return s->buf[s->pos++];
}

static struct sf_file sf_stdin = {
    .file = FDEV_SETUP_STREAM(NULL, sf_get, sf_flush, _FDEV_SETUP_READ),
    .fd = 0, .line = 0, .len = 0, .pos = 0, .size = SF_IN_BYTES, .buf = sf_in_buf,
};
static struct sf_file sf_stdout = {
    .file = FDEV_SETUP_STREAM(sf_put, NULL, sf_flush, _FDEV_SETUP_WRITE),
    .fd = 1, .line = 0, .len = 0, .pos = 0, .size = SF_OUT_BYTES, .buf = sf_out_buf,
};
static struct sf_file sf_stderr = {
    .file = FDEV_SETUP_STREAM(sf_put, NULL, sf_flush, _FDEV_SETUP_WRITE),
    .fd = 2, .line = 1, .len = 0, .pos = 0, .size = SF_ERR_BYTES, .buf = sf_err_buf,
};

FILE *const stdin = &sf_stdin.file;
FILE *const stdout = &sf_stdout.file;
FILE *const stderr = &sf_stderr.file;

/* exit() runs the destructors after the atexit handlers; this one runs last of them. */
__attribute__((destructor(101))) static void sf_flush_all(void)
{
    sf_flush(stdout);
    sf_flush(stderr);
}

/* fgets as C specifies it (C11 7.21.7.2): up to size - 1 characters, through a newline;
 * NULL only if end-of-file comes before any character or on a read error. */
char *fgets(char *restrict str, int size, FILE *restrict stream)
{
    char *cp = str;
    if (size <= 0)
        return NULL;
    while (size > 1) {
        int c = getc(stream);
        if (c == EOF) {
            if (cp == str || !feof(stream))
                return NULL;
            break;
        }
        *cp++ = (char)c;
        size--;
        if (c == '\n')
            break;
    }
    *cp = '\0';
    return str;
}

/* ---- the rest of what picolibc calls */
pid_t getpid(void) { return 1; }

int kill(pid_t pid, int sig)
{
    if (pid != 1 && pid != 0 && pid != -1) {
        errno = ESRCH;
        return -1;
    }
    if (sig == 0)
        return 0;
    sf_flush(stderr);
    _exit(128 + (sig & 127));
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    (void)how;
    (void)set;
    if (old)
        *old = 0;
    return 0;
}

int isatty(int fd)
{
    errno = (fd >= 0 && fd <= 2) ? ENOTTY : EBADF;
    return 0;
}

int fstat(int fd, struct stat *st)
{
    if (fd < 0 || fd > 2) {
        errno = EBADF;
        return -1;
    }
    *st = (struct stat){0};
    st->st_mode = S_IFCHR;
    return 0;
}

off_t lseek(int fd, off_t offset, int whence)
{
    (void)offset;
    (void)whence;
    errno = (fd >= 0 && fd <= 2) ? ESPIPE : EBADF;
    return -1;
}

int close(int fd)
{
    if (fd >= 0 && fd <= 2)
        return 0;
    errno = EBADF;
    return -1;
}

int open(const char *path, int flags, ...)
{
    (void)path;
    (void)flags;
    errno = ENOSYS;
    return -1;
}

int stat(const char *path, struct stat *st)
{
    (void)path;
    (void)st;
    errno = ENOSYS;
    return -1;
}

int unlink(const char *path)
{
    (void)path;
    errno = ENOSYS;
    return -1;
}

int rename(const char *from, const char *to)
{
    (void)from;
    (void)to;
    errno = ENOSYS;
    return -1;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tv;
    (void)tz;
    errno = ENOSYS;
    return -1;
}

clock_t times(struct tms *buf)
{
    (void)buf;
    errno = ENOSYS;
    return (clock_t)-1;
}

int getentropy(void *buf, size_t len)
{
    (void)buf;
    (void)len;
    errno = ENOSYS;
    return -1;
}
