/* hello: the README's example guest.
 *
 * Input:  any bytes.
 * Output: "hello from rv32im\n" followed by the input bytes in reverse order.  Exit 0.
 */
#include "runtime/rt.h"

int main(void)
{
    size_t n;
    uint8_t *in = rt_read_all(&n);
    rt_puts(1, "hello from rv32im\n");
    for (size_t i = 0, j = n; i + 1 < j; i++, j--) {     /* reverse in place */
        uint8_t t = in[i];
        in[i] = in[j - 1];
        in[j - 1] = t;
    }
    rt_write_all(1, in, n);
    return 0;
}
