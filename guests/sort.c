/* sort: sorts unsigned 32-bit integers (stable bottom-up merge sort, O(n log n)).
 *
 * Input:  u32 count n, then n u32 values (all little-endian; exactly 4 + 4n bytes).
 * Output: the n values in non-decreasing order, as n little-endian u32 (4n bytes).
 * Exit code 0; 1 (and no output) if the input is not exactly 4 + 4n bytes.
 */
#include "runtime/rt.h"

/* Merges the sorted runs a[lo..mid) and a[mid..hi) into out[lo..hi). */
static void merge(const uint32_t *a, uint32_t *out, size_t lo, size_t mid, size_t hi)
{
    size_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi)
        out[k++] = (a[j] < a[i]) ? a[j++] : a[i++];   /* ties take the left run: stable */
    while (i < mid)
        out[k++] = a[i++];
    while (j < hi)
        out[k++] = a[j++];
}

/* Sorts v[0..n) using tmp[0..n) as scratch; returns whichever buffer holds the result. */
static uint32_t *merge_sort(uint32_t *v, uint32_t *tmp, size_t n)
{
    uint32_t *src = v, *dst = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            merge(src, dst, lo, mid, hi);
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

int main(void)
{
    size_t len;
    uint8_t *in = rt_read_all(&len);          /* 16-byte aligned: word loads are aligned */
    if (len < 4)
        return 1;
    uint32_t n = rt_ld32(in);
    if ((len - 4) / 4 != n || (len - 4) % 4 != 0)
        return 1;
    uint32_t *v = (uint32_t *)(void *)(in + 4);
    uint32_t *tmp = rt_alloc(4 * (size_t)n);
    uint32_t *sorted = merge_sort(v, tmp, n);
    rt_write_all(1, sorted, 4 * (size_t)n);
    return 0;
}
