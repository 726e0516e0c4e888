/* demo: an ordinary C program for the picolibc guests (docs/rv32.md "C programs
 * (picolibc)"), built with
 *
 *     scripts/rv32-cc -O2 guests/libc/demo.c -o demo.elf
 *
 * Input (stdin = the program's input): whitespace-separated tokens, each a decimal
 * integer (optionally signed) or a word of letters.
 * Output (stdout = the proved output):
 *     tokens: T
 *     words: W            then the distinct words in strcmp order, one per line
 *     sum = S             the integers' sum (64-bit)
 *     sqrt(|sum|) = %.6f
 *     sin(sum) = %.6f
 * Exit code: T mod 256.  A token that is neither (or an integer out of 64-bit range) is
 * reported on stderr ("demo: bad token ...") through a longjmp out of the parser, and
 * the exit code is 2.
 *
 * It uses stdio (fgets, printf, fprintf to stderr), malloc/realloc/free and strdup,
 * string.h, qsort, strtoll with errno, setjmp/longjmp and libm (sqrt, sin).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf bad_token;
static char bad[64];

struct words {
    char **v;
    size_t n, cap;
};

static void add_word(struct words *w, const char *s)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 8;
        w->v = realloc(w->v, w->cap * sizeof *w->v);
        if (!w->v)
            exit(3);
    }
    w->v[w->n++] = strdup(s);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_word(const char *s)
{
    for (; *s; s++)
        if (!isalpha((unsigned char)*s))
            return 0;
    return 1;
}

/* One token: an integer added to *sum, or a word; anything else longjmps. */
static void token(const char *s, struct words *w, int64_t *sum)
{
    if (is_word(s)) {
        add_word(w, s);
        return;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) {
        snprintf(bad, sizeof bad, "%s", s);
        longjmp(bad_token, 1);
    }
    *sum += v;
}

static struct words w;
static int64_t sum;
static unsigned tokens;

int main(void)
{
    char line[1024];

    if (setjmp(bad_token)) {
        fprintf(stderr, "demo: bad token '%s'\n", bad);
        return 2;
    }
    while (fgets(line, sizeof line, stdin)) {
        for (char *t = strtok(line, " \t\r\n"); t; t = strtok(NULL, " \t\r\n")) {
            token(t, &w, &sum);
            tokens++;
        }
    }

    qsort(w.v, w.n, sizeof *w.v, cmp);
    size_t distinct = 0;
    for (size_t i = 0; i < w.n; i++)
        if (distinct == 0 || strcmp(w.v[i], w.v[distinct - 1]) != 0)
            w.v[distinct++] = w.v[i];
        else
            free(w.v[i]);

    printf("tokens: %u\nwords: %zu\n", tokens, distinct);
    for (size_t i = 0; i < distinct; i++) {
        puts(w.v[i]);
        free(w.v[i]);
    }
    free(w.v);
    printf("sum = %lld\n", (long long)sum);
    printf("sqrt(|sum|) = %.6f\n", sqrt(fabs((double)sum)));
    printf("sin(sum) = %.6f\n", sin((double)sum));
    return (int)(tokens & 255);
}
