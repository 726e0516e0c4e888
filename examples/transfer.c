/* transfer: a token-transfer state transition.
 *
 * All integers little-endian; the input must be exactly the following, with no trailing
 * bytes:
 *
 *   state:      u32 n_accounts
 *               n_accounts x account  { u32 id; u32 nonce; u64 balance }   16 bytes each,
 *               ids strictly increasing
 *   transfers:  u32 n_transfers
 *               n_transfers x transfer { u32 from; u32 to; u32 nonce; u64 amount }  20 bytes
 *               (u64 = two u32 words, low word first)
 *
 * The transfers are applied in order.  A transfer is valid when (first failing check
 * gives its status):
 *
 *   1  `from` is an account id            (else: unknown sender)
 *   2  `to` is an account id              (else: unknown recipient)
 *   3  from != to                         (else: self transfer)
 *   4  nonce == sender's nonce            (else: bad nonce)
 *   5  sender's nonce < 2^32 - 1          (else: nonce exhausted)
 *   6  amount <= sender's balance         (else: insufficient balance)
 *   7  recipient's balance + amount < 2^64 (else: recipient overflow)
 *
 * A valid transfer (status 0) moves `amount` from sender to recipient and increments the
 * sender's nonce; an invalid one changes nothing.  A zero amount is valid (it only
 * increments the nonce).
 *
 * Output: the new state, in the input's state format (4 + 16 n_accounts bytes), then one
 *         status byte per transfer (n_transfers bytes).
 * Exit code: the number of rejected transfers mod 256.  A malformed input (wrong length,
 *         ids not strictly increasing) writes nothing and exits with 255.
 */
#include "runtime/rt.h"

typedef struct {            /* the input's 16-byte account record (4-byte aligned) */
    uint32_t id, nonce, bal_lo, bal_hi;
} account;

typedef struct {            /* the input's 20-byte transfer record */
    uint32_t from, to, nonce, amt_lo, amt_hi;
} transfer;

enum { OK = 0, UNKNOWN_SENDER, UNKNOWN_RECIPIENT, SELF_TRANSFER, BAD_NONCE,
       NONCE_EXHAUSTED, INSUFFICIENT_BALANCE, RECIPIENT_OVERFLOW };

static uint64_t balance(const account *a) { return (uint64_t)a->bal_hi << 32 | a->bal_lo; }

static void set_balance(account *a, uint64_t v)
{
    a->bal_lo = (uint32_t)v;
    a->bal_hi = (uint32_t)(v >> 32);
}

/* Binary search over the accounts (ids strictly increasing); NULL if absent. */
static account *find(account *acc, uint32_t n, uint32_t id)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (acc[mid].id == id)
            return &acc[mid];
        if (acc[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static uint8_t apply(account *acc, uint32_t n, const transfer *t)
{
    account *from = find(acc, n, t->from);
    if (!from)
        return UNKNOWN_SENDER;
    account *to = find(acc, n, t->to);
    if (!to)
        return UNKNOWN_RECIPIENT;
    if (from == to)
        return SELF_TRANSFER;
    if (t->nonce != from->nonce)
        return BAD_NONCE;
    if (from->nonce == 0xffffffffu)
        return NONCE_EXHAUSTED;
    uint64_t amount = (uint64_t)t->amt_hi << 32 | t->amt_lo;
    uint64_t fb = balance(from), tb = balance(to);
    if (amount > fb)
        return INSUFFICIENT_BALANCE;
    if (tb + amount < tb)
        return RECIPIENT_OVERFLOW;
    set_balance(from, fb - amount);
    set_balance(to, tb + amount);
    from->nonce++;
    return OK;
}

int main(void)
{
    size_t len;
    uint8_t *in = rt_read_all(&len);          /* 16-byte aligned */

    /* Parse and check the layout (all offsets are multiples of 4: aligned loads). */
    if (len < 4)
        return 255;
    uint32_t n_acc = rt_ld32(in);
    if (n_acc > (len - 4) / 16)
        return 255;
    size_t state_len = 4 + 16 * (size_t)n_acc;
    if (len - state_len < 4)
        return 255;
    uint32_t n_tx = rt_ld32(in + state_len);
    if (n_tx > (len - state_len - 4) / 20 || len != state_len + 4 + 20 * (size_t)n_tx)
        return 255;
    account *acc = (account *)(void *)(in + 4);
    const transfer *tx = (const transfer *)(const void *)(in + state_len + 4);
    for (uint32_t i = 1; i < n_acc; i++)
        if (acc[i - 1].id >= acc[i].id)
            return 255;

    /* Apply; the status bytes are kept in the heap and written after the state. */
    uint8_t *status = rt_alloc(n_tx);
    uint32_t rejected = 0;
    for (uint32_t i = 0; i < n_tx; i++) {
        status[i] = apply(acc, n_acc, &tx[i]);
        rejected += status[i] != OK;
    }
    rt_write_all(1, in, state_len);           /* count + accounts, updated in place */
    rt_write_all(1, status, n_tx);
    return (int)(rejected & 0xff);
}
