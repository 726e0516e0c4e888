/* keccak256: the Keccak-256 digest (Ethereum's keccak256: Keccak[c=512] with the original
 * 0x01 padding, NOT FIPS 202 SHA3-256) of the program's input, computed by pycryptodome's
 * own C code (src/keccak.c of its sdist, #included here; scripts/build_realworld.sh
 * fetches it: none of it is in this repository).
 *
 * Input: any bytes.  Output: the 32-byte digest.  Exit code: 0; 1 if pycryptodome's code
 * reports an error (it does not for Keccak-256).
 *
 * Built with scripts/rv32-cc (picolibc): scripts/build_realworld.sh keccak.
 */
#include <stdio.h>
#include <stdlib.h>

#include "keccak.c"                 /* pycryptodome-<version>/src/keccak.c */

#define CHUNK 4096

int main(void)
{
    keccak_state *st;
    uint8_t digest[32];
    uint8_t *buf = malloc(CHUNK);
    size_t n;

    if (buf == NULL || keccak_init(&st, 2 * 32, 24) != 0)   /* capacity 512 bits, 24 rounds */
        return 1;
    while ((n = fread(buf, 1, CHUNK, stdin)) > 0)
        if (keccak_absorb(st, buf, n) != 0)
            return 1;
    if (keccak_digest(st, digest, sizeof digest, 0x01) != 0)
        return 1;
    fwrite(digest, 1, sizeof digest, stdout);
    keccak_destroy(st);
    free(buf);
    return 0;
}
