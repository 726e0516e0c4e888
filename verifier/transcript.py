"""The one Fiat-Shamir transcript, used by the prover and the verifier alike.

A duplex sponge over Poseidon2 (width 16, rate 8, capacity 8) in the style of Plonky3's
``DuplexChallenger``:

* ``observe(x)`` appends x to the input buffer and empties the output buffer; when the
  input buffer holds 8 elements the sponge *duplexes*: lanes 0..7 are overwritten with
  the inputs, the state is permuted, and lanes 0..7 become the output buffer.
* ``sample()`` duplexes first if inputs are pending or no output is left (a duplex with
  no input just permutes), then takes the **first** remaining output element.

Every operation is labelled and framed, so no two different sequences of operations
feed the sponge the same elements::

    frame = [tag] + label_elems(label) + [len(values)] + values
    tag:  1 absorb, 2 sample (values = [count]), 3 fork (values = [index]),
          4 proof-of-work (values = [nonce])
    label_elems(s) = [len(bytes)] + [3-byte little-endian chunks of the ASCII bytes]

Every labelled operation is also appended to ``log`` as ``(op, label, count)``; the test
suite compares the prover's and the verifier's logs.

Challenges: a base challenge is one sampled element; an EF challenge is 4 sampled
elements (c0 first).  Query indices and proof-of-work read the low bits of sampled
canonical values.  ``fork(i)`` copies the whole sponge (state and both buffers) and
absorbs a fork frame with the table index, giving each table its own transcript.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .poseidon2 import P, RATE, duplex_blocks, permute

TAG_ABSORB, TAG_SAMPLE, TAG_FORK, TAG_POW = 1, 2, 3, 4
DOMAIN = "steadfast/stark/v1"


def label_elems(label: str) -> list[int]:
    return list(_label_elems(label))


@lru_cache(maxsize=256)
def _label_elems(label: str) -> tuple[int, ...]:
    b = label.encode("ascii")
    return (len(b),) + tuple(int.from_bytes(b[i:i + 3], "little") for i in range(0, len(b), 3))


class Transcript:
    """Labelled duplex-sponge transcript (see the module docstring for the exact framing)."""

    def __init__(self, domain: str = DOMAIN, _empty: bool = False):
        self.state = np.zeros(16, dtype=np.uint32)
        self.inbuf: list[int] = []
        self.outbuf: list[int] = []
        self.log: list[tuple] = []
        if not _empty:
            self.absorb("domain:" + domain, [])

    # ------------------------------------------------------------ sponge core
    def _duplex(self) -> None:
        # lanes 0..k-1 overwritten with the pending inputs, then one permutation (one
        # compiled call: numba's dispatch is the cost here, not the permutation)
        self.state = duplex_blocks(self.state, np.array(self.inbuf, dtype=np.uint32))
        self.inbuf = []
        self.outbuf = self.state[:RATE].tolist()

    def _observe(self, x: int) -> None:
        self.outbuf = []
        self.inbuf.append(x)
        if len(self.inbuf) == RATE:
            self._duplex()

    def _observe_many(self, xs: list) -> None:
        """``_observe`` of every element of ``xs`` in order, with all the duplexes the
        sequence triggers run in one compiled call.  Afterwards the output buffer is the
        last duplex's output if the last element completed an input block, else empty
        (every observe empties it) -- exactly as element by element."""
        if not xs:
            return
        buf = self.inbuf + xs
        full = len(buf) - len(buf) % RATE
        if full:
            self.state = duplex_blocks(self.state, np.array(buf[:full], dtype=np.uint32))
            self.inbuf = buf[full:]
            self.outbuf = [] if self.inbuf else self.state[:RATE].tolist()
        else:
            self.inbuf = buf
            self.outbuf = []

    def _sample(self) -> int:
        if self.inbuf or not self.outbuf:
            self._duplex()
        return self.outbuf.pop(0)

    def _frame(self, tag: int, label: str, values) -> None:
        self._observe_many([tag, *_label_elems(label), len(values), *values])

    # ------------------------------------------------------------ labelled operations
    def absorb(self, label: str, values) -> None:
        """Absorb field elements (any iterable of ints / a uint32 array, canonical)."""
        if isinstance(values, list):
            vals = [int(v) for v in values]
            bad = [v for v in vals if not 0 <= v < P]
        else:
            arr = np.asarray(values, dtype=np.int64).reshape(-1)
            bad = arr[(arr < 0) | (arr >= P)].tolist() if arr.size else []
            vals = arr.tolist()
        if bad:
            raise ValueError(f"transcript {label}: {bad[0]} is not a canonical field element")
        self.log.append(("absorb", label, len(vals)))
        self._frame(TAG_ABSORB, label, vals)

    def sample_base(self, label: str, count: int = 1) -> list[int]:
        self.log.append(("sample", label, count))
        self._frame(TAG_SAMPLE, label, [count])
        return [self._sample() for _ in range(count)]

    def sample_ef(self, label: str) -> np.ndarray:
        """An EF challenge: 4 sampled elements as uint32[4] (c0..c3)."""
        self.log.append(("sample_ef", label, 1))
        self._frame(TAG_SAMPLE, label, [4])
        return np.array([self._sample() for _ in range(4)], dtype=np.uint32)

    def sample_bits(self, label: str, bits: int, count: int) -> np.ndarray:
        """``count`` indices in [0, 2^bits): the low bits of sampled elements."""
        if not 0 <= bits <= 30:
            raise ValueError(f"cannot sample {bits}-bit indices (at most 30)")
        self.log.append(("sample_bits", label, count))
        self._frame(TAG_SAMPLE, label, [count])
        mask = (1 << bits) - 1
        return np.array([self._sample() & mask for _ in range(count)], dtype=np.int64)

    def fork(self, index: int) -> "Transcript":
        """An independent copy for table ``index`` (state || index)."""
        child = Transcript(_empty=True)
        child.state = self.state.copy()
        child.inbuf = list(self.inbuf)
        child.outbuf = list(self.outbuf)
        self.log.append(("fork", "table", index))
        child.log.append(("forked", "table", index))
        child._frame(TAG_FORK, "table", [index])
        return child

    # ------------------------------------------------------------ proof of work
    def _pow_prefix(self, label: str):
        """Observe the PoW frame up to (excluding) the nonce; return the lane the nonce
        will occupy (the state's other lanes are then fixed)."""
        self._observe_many([TAG_POW, *_label_elems(label), 1])
        return len(self.inbuf)

    def check_pow(self, label: str, nonce: int, bits: int) -> bool:
        """Absorb ``nonce`` and test that the next sampled element has ``bits`` low zero
        bits.  Advances the transcript (prover and verifier both call this once)."""
        if not 0 <= int(nonce) < P:
            return False
        self.log.append(("pow", label, bits))
        self._pow_prefix(label)
        self._observe(int(nonce))
        return (self._sample() & ((1 << bits) - 1)) == 0

    def grind(self, label: str, bits: int, batch: int = 1 << 12, permute_batch=None,
              search=None) -> int:
        """Find the smallest nonce passing :meth:`check_pow` (deterministic), without
        advancing this transcript.  Candidates are permuted in batches -- or, given
        ``search(base, lane, bits)`` (the prover's compiled search), found by it: the
        smallest n in [0, p) whose permutation of ``base`` with n at ``lane`` has element
        0 divisible by 2^bits, or None to fall back to the batches."""
        permute_batch = permute_batch or permute
        probe = self.copy()
        lane = probe._pow_prefix(label)
        base = probe.state.copy()
        base[:lane] = probe.inbuf
        if search is not None:
            got = search(np.asarray(base, np.uint32), lane, bits)
            if got is not None:
                return int(got)
        mask = (1 << bits) - 1
        for start in range(0, P, batch):
            nonces = np.arange(start, min(P, start + batch), dtype=np.uint32)
            states = np.repeat(base[None, :], nonces.size, axis=0)
            states[:, lane] = nonces
            out = np.asarray(permute_batch(states))
            ok = np.nonzero((out[:, 0] & mask) == 0)[0]
            if ok.size:
                return int(nonces[ok[0]])
        raise RuntimeError("no proof-of-work nonce found")  # pragma: no cover

    def prove_work(self, label: str, bits: int, permute_batch=None, search=None) -> int:
        """Prover side of a grinding step: find the smallest nonce and absorb it (the
        verifier calls :meth:`check_pow` with the same label and bits); ``search``: see
        :meth:`grind`."""
        # a batch of the expected attempts (2^bits; about 1.6 batches on average, the
        # least work per nonce found): a small grind does not pay for thousands of
        # wasted permutations
        batch = 1 << min(13, max(6, bits))
        if batch <= 2048:           # small grinds: this thread's compiled permutation beats
            permute_batch = None    # a thread-pool or device hand-off per call
        nonce = self.grind(label, bits, batch=batch, permute_batch=permute_batch,
                           search=search)
        if not self.check_pow(label, nonce, bits):          # advances the transcript
            raise RuntimeError(f"{label}: grinding returned a bad nonce")  # pragma: no cover
        return nonce

    def copy(self) -> "Transcript":
        t = Transcript(_empty=True)
        t.state = self.state.copy()
        t.inbuf = list(self.inbuf)
        t.outbuf = list(self.outbuf)
        t.log = list(self.log)
        return t
