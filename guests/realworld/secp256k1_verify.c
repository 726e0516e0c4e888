/* secp256k1_verify: ECDSA verification and public-key recovery over secp256k1 with
 * libsecp256k1 itself (the copy bundled in the `secp256k1` Python package's sdist,
 * libsecp256k1/; scripts/build_realworld.sh fetches it: none of it is in this
 * repository), linked as its own translation unit src/secp256k1.c with the recovery
 * module.
 *
 * Input: n >= 0 records of 130 bytes:
 *     msg32 (the 32-byte message hash) || sig64 (compact r || s, big-endian)
 *     || recid (1 byte, 0..3) || pubkey33 (SEC1 compressed public key)
 * Output: per record, 34 bytes:
 *     status: bit 0 = secp256k1_ecdsa_verify(sig, msg32, pubkey) accepts (lower-S form,
 *                     as libsecp256k1 requires),
 *             bit 1 = the key secp256k1_ecdsa_recover gives from (sig, recid, msg32)
 *                     equals pubkey,
 *             bit 2 = pubkey33 does not parse (bits 0 and 1 are then 0),
 *             bit 3 = sig64 does not parse (r or s >= the group order);
 *     recovered33: the recovered key, compressed (33 zero bytes if recovery fails).
 * Exit code: the number of records whose status is not 3 (both checks passed), at most
 * 254; 255 (and no output) if the input is not a multiple of 130 bytes.
 *
 * Built with scripts/rv32-cc (picolibc): scripts/build_realworld.sh secp256k1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secp256k1.h"
#include "secp256k1_recovery.h"

#define RECORD 130

static unsigned char *read_all(size_t *len)
{
    size_t cap = 4096, n = 0, r;
    unsigned char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    *len = n;
    return buf;
}

int main(void)
{
    size_t len;
    unsigned char *in = read_all(&len);
    if (in == NULL || len % RECORD != 0)
        return 255;
    secp256k1_context *ctx = secp256k1_context_create(SECP256K1_CONTEXT_VERIFY);
    unsigned bad = 0;
    for (size_t off = 0; off < len; off += RECORD) {
        const unsigned char *msg = in + off, *sig64 = msg + 32, *pk33 = msg + 97;
        int recid = msg[96];
        unsigned char status = 0, rec33[33] = {0};
        secp256k1_pubkey pub, rec;
        secp256k1_ecdsa_signature sig;
        secp256k1_ecdsa_recoverable_signature rsig;

        int pub_ok = secp256k1_ec_pubkey_parse(ctx, &pub, pk33, 33);
        int sig_ok = secp256k1_ecdsa_signature_parse_compact(ctx, &sig, sig64);
        if (!pub_ok)
            status |= 4;
        if (!sig_ok)
            status |= 8;
        if (pub_ok && sig_ok && secp256k1_ecdsa_verify(ctx, &sig, msg, &pub))
            status |= 1;
        if (recid >= 0 && recid <= 3 &&
            secp256k1_ecdsa_recoverable_signature_parse_compact(ctx, &rsig, sig64, recid) &&
            secp256k1_ecdsa_recover(ctx, &rec, &rsig, msg)) {
            size_t outlen = sizeof rec33;
            secp256k1_ec_pubkey_serialize(ctx, rec33, &outlen, &rec, SECP256K1_EC_COMPRESSED);
            if (pub_ok && memcmp(rec33, pk33, 33) == 0)
                status |= 2;
        }
        if (status != 3 && bad < 254)
            bad++;
        fwrite(&status, 1, 1, stdout);
        fwrite(rec33, 1, sizeof rec33, stdout);
    }
    secp256k1_context_destroy(ctx);
    free(in);
    return (int)bad;
}
