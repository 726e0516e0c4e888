/* merkle: a Merkle root with the Poseidon2 precompile (SYS_POSEIDON2).
 *
 * Input:  u32 count n >= 1, then n leaves of 8 u32 words each (little-endian; exactly
 *         4 + 32n bytes); every word a canonical BabyBear element (< p = 2^31 - 2^27 + 1).
 * Tree:   the leaves are level 0.  Level k+1 pairs the nodes of level k in order:
 *         parent = compress(left, right) = lanes 0..7 of Poseidon2(left || right); a last
 *         unpaired node of an odd level is carried up unchanged.  The root is the single
 *         node of the last level (n = 1: the leaf itself).  n - 1 compressions in all.
 * Output: the root, 8 little-endian u32 words (32 bytes).  Exit code 0.
 * Errors (no output): 1 = malformed length or n = 0, 2 = a word >= p,
 *         3 = the precompile failed (e.g. qemu-user: -ENOSYS).
 */
#include "runtime/rt.h"

int main(void)
{
    size_t len;
    uint8_t *in = rt_read_all(&len);
    if (len < 4)
        return 1;
    uint32_t n = rt_ld32(in);
    if (n == 0 || (len - 4) % 32 != 0 || (len - 4) / 32 != n)
        return 1;
    uint32_t *nodes = (uint32_t *)(void *)(in + 4);   /* node i = words 8i..8i+8 */
    for (size_t i = 0; i < 8 * (size_t)n; i++)
        if (nodes[i] >= BABYBEAR_P)
            return 2;

    /* In place: level k's node 2i and 2i+1 are the 16 consecutive words at nodes + 16i,
     * exactly the precompile's input; the parent goes to node i of the same array
     * (through a separate output buffer, so no call's input and output overlap). */
    uint32_t out[8];
    for (size_t count = n; count > 1; count = (count + 1) / 2) {
        size_t pairs = count / 2;
        for (size_t i = 0; i < pairs; i++) {
            if (rt_is_error(rt_poseidon2(nodes + 16 * i, out)))
                return 3;
            for (int j = 0; j < 8; j++)
                nodes[8 * i + j] = out[j];
        }
        if (count & 1)                        /* carry the odd node up */
            for (int j = 0; j < 8; j++)
                nodes[8 * pairs + j] = nodes[8 * (count - 1) + j];
    }
    rt_write_all(1, nodes, 32);
    return 0;
}
