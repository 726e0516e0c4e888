/* bench: a sized benchmark program with a chosen instruction mix.
 *
 * Input (exactly 28 bytes, 7 little-endian u32):
 *   iters     outer iterations
 *   n_alu     ALU units per iteration        (10 instructions each: 8 RV32I ALU + loop)
 *   n_mem     memory units per iteration     (11 each: lw lbu sw sb + 5 ALU + loop)
 *   n_mul     mul/div units per iteration    (15 each: mul mulh mulhsu mulhu div rem divu
 *                                             remu + 5 ALU + loop)
 *   n_p2      Poseidon2 calls per iteration  (7 each: 1 ECALL SYS_POSEIDON2 + 4 ALU + loop)
 *   mem_log2  memory working set: 2^mem_log2 words (0..16) that the memory units touch
 *   seed      initial state
 *
 * Cycles (retired instructions, the ECALLs included), exactly:
 *
 *   cycles = BENCH_BASE + iters * (10 + 10 n_alu + 11 n_mem + 15 n_mul + 7 n_p2)
 *
 * with BENCH_BASE the constant set-up/teardown cost measured by tests/test_guests.py
 * (see guests/README.md; it does not depend on the input's values, only on the code).
 * The whole loop is one inline-asm block, so gcc cannot change these counts; all of its
 * control flow depends on the counts only, never on data.
 *
 * Output (32 bytes, 8 u32): the final x, y, s, m registers (ALU, ALU, memory, mul/div
 * state), q (the Poseidon2 phase: 0 or 32), and words 0, 8 and 16 of the Poseidon2
 * buffer.  Exit code 0; 1 = malformed input; 3 = the precompile failed (qemu-user answers
 * -ENOSYS: run it there with n_p2 = 0).
 *
 * The units (registers are u32; t0..t2 temporaries):
 *   ALU:  x += y; y = rotl(y, 7) ^ x; t0 = x >>arith (y & 31); x += (y <u t0)
 *   MEM:  a = buf + (s & mask); w = lw a; b = lbu a+1; sw s -> a; sb w -> a+2;
 *         s = ((s + w) ^ b) + 0x555
 *   MUL:  t0 = mul(m,k); t1 = mulh(m,k); t2 = mulhsu(m,k); m = mulhu(m,k); t2 |= 1;
 *         t1 = div(t1,t2); t0 = rem(t0,t2); t1 |= 1; t2 = divu(t0,t1); t0 = remu(m,t1);
 *         m = ((m + t0) ^ t2) + 0x3a7
 *   P2:   compress P[q/4 .. q/4+16] into P[16 - q/2 ..] (word indices; q alternates 0 and
 *         32 bytes): P[0..16] -> P[16..24], then P[8..24] -> P[0..8], ...; every word of
 *         P stays canonical (< p), and no call's input and output overlap.
 */
#include "runtime/rt.h"

#define MEM_LOG2_MAX 16
static uint32_t membuf[1u << MEM_LOG2_MAX] __attribute__((aligned(16)));
static uint32_t pbuf[24] __attribute__((aligned(16)));

static uint32_t xorshift(uint32_t *st)
{
    uint32_t v = *st;
    v ^= v << 13;
    v ^= v >> 17;
    v ^= v << 5;
    return *st = v;
}

int main(void)
{
    uint32_t hdr[7];
    if (rt_read_full(hdr, sizeof hdr) != sizeof hdr)
        return 1;
    uint8_t extra;
    if (rt_read(0, &extra, 1) > 0)
        return 1;
    uint32_t iters = hdr[0], n_alu = hdr[1], n_mem = hdr[2], n_mul = hdr[3], n_p2 = hdr[4];
    uint32_t mem_log2 = hdr[5], seed = hdr[6];
    if (mem_log2 > MEM_LOG2_MAX)
        return 1;

    /* Initial state from the seed (xorshift32 of seed | 1; branch-free). */
    uint32_t st = seed | 1u;
    uint32_t x = xorshift(&st), y = xorshift(&st), s = xorshift(&st), m = xorshift(&st);
    uint32_t k = xorshift(&st) | 1u;
    for (int i = 0; i < 16; i++)
        pbuf[i] = xorshift(&st) % BABYBEAR_P;

    uint32_t mask = ((1u << mem_log2) - 1u) << 2;  /* byte offset of a word in membuf */
    uint32_t q = 0;
    uint32_t *pend = pbuf + 16;
    register long a0 __asm__("a0") = 0;           /* last ECALL's result */
    register uint32_t *a1 __asm__("a1");
    register long a7 __asm__("a7") = (long)SYS_POSEIDON2;
    uint32_t it = iters, cnt, t0, t1, t2;

    __asm__ volatile(
        "   beqz  %[it], 9f\n"
        "0:\n"
        /* ALU units */
        "   mv    %[cnt], %[na]\n"
        "   beqz  %[cnt], 2f\n"
        "1: add   %[x], %[x], %[y]\n"
        "   slli  %[t0], %[y], 7\n"
        "   srli  %[t1], %[y], 25\n"
        "   or    %[y], %[t0], %[t1]\n"
        "   xor   %[y], %[y], %[x]\n"
        "   sra   %[t0], %[x], %[y]\n"
        "   sltu  %[t1], %[y], %[t0]\n"
        "   add   %[x], %[x], %[t1]\n"
        "   addi  %[cnt], %[cnt], -1\n"
        "   bnez  %[cnt], 1b\n"
        "2:\n"
        /* memory units */
        "   mv    %[cnt], %[nm]\n"
        "   beqz  %[cnt], 4f\n"
        "3: and   %[t0], %[s], %[mask]\n"
        "   add   %[t0], %[t0], %[buf]\n"
        "   lw    %[t1], 0(%[t0])\n"
        "   lbu   %[t2], 1(%[t0])\n"
        "   sw    %[s], 0(%[t0])\n"
        "   sb    %[t1], 2(%[t0])\n"
        "   add   %[s], %[s], %[t1]\n"
        "   xor   %[s], %[s], %[t2]\n"
        "   addi  %[s], %[s], 0x555\n"
        "   addi  %[cnt], %[cnt], -1\n"
        "   bnez  %[cnt], 3b\n"
        "4:\n"
        /* mul/div units */
        "   mv    %[cnt], %[nd]\n"
        "   beqz  %[cnt], 6f\n"
        "5: mul    %[t0], %[m], %[k]\n"
        "   mulh   %[t1], %[m], %[k]\n"
        "   mulhsu %[t2], %[m], %[k]\n"
        "   mulhu  %[m], %[m], %[k]\n"
        "   ori    %[t2], %[t2], 1\n"
        "   div    %[t1], %[t1], %[t2]\n"
        "   rem    %[t0], %[t0], %[t2]\n"
        "   ori    %[t1], %[t1], 1\n"
        "   divu   %[t2], %[t0], %[t1]\n"
        "   remu   %[t0], %[m], %[t1]\n"
        "   add    %[m], %[m], %[t0]\n"
        "   xor    %[m], %[m], %[t2]\n"
        "   addi   %[m], %[m], 0x3a7\n"
        "   addi   %[cnt], %[cnt], -1\n"
        "   bnez   %[cnt], 5b\n"
        "6:\n"
        /* Poseidon2 units */
        "   mv    %[cnt], %[np]\n"
        "   beqz  %[cnt], 8f\n"
        "7: add   a0, %[pb], %[q]\n"
        "   slli  %[t0], %[q], 1\n"
        "   sub   a1, %[pe], %[t0]\n"
        "   ecall\n"
        "   xori  %[q], %[q], 32\n"
        "   addi  %[cnt], %[cnt], -1\n"
        "   bnez  %[cnt], 7b\n"
        "8:\n"
        "   addi  %[it], %[it], -1\n"
        "   bnez  %[it], 0b\n"
        "9:\n"
        : [it] "+r"(it), [cnt] "=&r"(cnt), [x] "+r"(x), [y] "+r"(y), [s] "+r"(s),
          [m] "+r"(m), [q] "+r"(q), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2),
          "+r"(a0), "=&r"(a1)
        : [na] "r"(n_alu), [nm] "r"(n_mem), [nd] "r"(n_mul), [np] "r"(n_p2),
          [k] "r"(k), [mask] "r"(mask), [buf] "r"(membuf), [pb] "r"(pbuf),
          [pe] "r"(pend), "r"(a7)
        : "memory");

    if (rt_is_error(a0))
        return 3;
    uint32_t out[8] = {x, y, s, m, q, pbuf[0], pbuf[8], pbuf[16]};
    rt_write_all(1, out, sizeof out);
    return 0;
}
