"""Tampered RV32IM traces and claims are refused: in check mode (ConstraintViolation or
LookupImbalance on the bus that carries the lie) for every instruction class, and where it
is cheap to show, a proof built on the tampered trace (prove(check=False)) fails to verify.

Each forgery changes the cells of one row *consistently* where that is possible (so that
the row's own constraints hold and only the argument that binds it -- the memory
argument, the program bus, the execution chain, the statement -- can catch it), and
recomputes BYTES' multiplicities from the tampered traces, so that a range lookup does
not give the lie away by accident.
"""
from __future__ import annotations

import numpy as np
import pytest

from steadfast.air import ConstraintViolation, LookupImbalance, check_traces
from steadfast.prover.core.prove import prove
from steadfast.rv32 import isa
from steadfast.rv32.chips.io import pack_output
from steadfast.rv32.statement import program_airs
from steadfast.rv32.tables import INDEX
from steadfast.rv32.traces import _lookup_counts, build_traces
from steadfast.rv32.chips.bytes import bytes_trace
from steadfast.verifier.errors import VerificationError
from steadfast.verifier.proof_format import Params
from steadfast.verifier.verify import verify

import rv32_samples as S

P = 2013265921
FAST = Params(log_blowup=2, num_queries=6, pow_bits=1, logup_pow_bits=1, deep_pow_bits=1,
              commit_pow_bits=1)


OBJECTIVE = "size"


@pytest.fixture(autouse=True, params=["size", "cells"])
def slot_objective(request):
    """Every forgery twice: at the default slots (the smallest proof: k = 1 but for
    BITWISE and MUL here) and at the fewest-cells slots (k = 2..4 for most chips), so
    that a lie is refused in any slot of a row."""
    global OBJECTIVE
    OBJECTIVE = request.param
    yield request.param
    OBJECTIVE = "size"


class Forgery:
    """A copy of the honest traces with named cells changed."""

    def __init__(self):
        self.prog, self.ex, tr = S.all_classes()
        if OBJECTIVE != "size":
            tr = build_traces(self.prog, self.ex, max_cycles=1000, slot_objective=OBJECTIVE)
        self.airs = list(tr.airs)
        self.traces = [t.copy() for t in tr.traces]
        self.pvs = [list(p) for p in tr.table_public_values]
        self.slots = dict(tr.slots)

    def _k(self, table):
        return self.slots.get(table, 1)

    def col(self, table, name, item=0):
        """The column of ``name`` for item ``item`` (slot item % k, chips/slots.py)."""
        air, k = self.airs[INDEX[table]], self._k(table)
        w = air.main_width // k
        base = air.main_names[:w]
        j = base.index(name if k == 1 else f"{name}@0")
        return j + (item % k) * w

    def get(self, table, item, name):
        k = self._k(table)
        return int(self.traces[INDEX[table]][item // k, self.col(table, name, item)])

    def set(self, table, item, name, value):
        k = self._k(table)
        self.traces[INDEX[table]][item // k, self.col(table, name, item)] = int(value) % P

    def add(self, table, item, name, delta):
        self.set(table, item, name, self.get(table, item, name) + delta)

    def rows(self, table, flag, where=None):
        """Items (row-major over the slots) of ``table`` whose column ``flag`` is 1 (and
        ``where(item)``)."""
        t, k = self.traces[INDEX[table]], self._k(table)
        items = range(t.shape[0] * k)
        out = [i for i in items if self.get(table, i, flag) == 1 and (where is None or where(i))]
        assert out, f"no {table} row with {flag}"
        return out

    def rebalance(self):
        """BYTES' multiplicities of the tampered traces (kept if a tuple is not in the
        table: then the lookup itself is the lie)."""
        try:
            counts = _lookup_counts(self.airs, self.traces, self.pvs)
        except ValueError:
            return self
        self.traces[INDEX["bytes"]] = bytes_trace(counts)
        return self

    def refused(self, bus=None, constraint=None):
        with pytest.raises((ConstraintViolation, LookupImbalance)) as e:
            check_traces(self.airs, self.traces, self.pvs)
        if bus is not None:
            buses = (bus,) if isinstance(bus, str) else tuple(bus)
            assert isinstance(e.value, LookupImbalance) and e.value.bus in buses, e.value
        if constraint is not None:
            assert isinstance(e.value, ConstraintViolation) and \
                e.value.constraint.split("@")[0] == constraint, e.value
        return e.value


def test_honest_traces_pass():
    f = Forgery().rebalance()
    check_traces(f.airs, f.traces, f.pvs)


# ------------------------------------------------------------------ results

@pytest.mark.parametrize("table,flag,col,constraint", [
    ("alu", "f_add", "c_lo", "c_lo_arith"),
    ("alu", "f_sub", "c_hi", "c_hi_arith"),
    ("alu", "f_slt", "c_lo", "c_lo_cmp"),
    ("alu", "f_sltu", "c_lo", "c_lo_cmp"),
    ("bitwise", "f_xor", "c_lo", "c_lo"),
    ("bitwise", "f_and", "c_hi", "c_hi"),
    ("shift", "f_sll", "c[0]", "c0"),
    ("shift", "f_sra", "c[3]", "c3"),
    ("shift", "f_srl", "c[1]", "c1"),
    ("mul", "f_mul", "c_lo", "c_lo"),
    ("mul", "f_mulh", "c_hi", "c_hi"),
    ("div", "f_div", "c_lo", "c0"),
    ("div", "f_remu", "c_hi", "c1"),
    ("load", "f_lb", "c_lo", "c_lo"),
    ("load", "f_lhu", "c_hi", "c_hi"),
    ("store", "f_sb", "n_lo", "n_lo"),
    ("store", "f_sh", "n_hi", "n_hi"),
    ("ecall", "k_read", "res_lo", "res_lo"),
    ("branch", "f_bne", "taken", "taken"),
    ("branch", "f_bltu", "taken", "taken"),
])
def test_wrong_result(table, flag, col, constraint):
    """A wrong value written by an instruction breaks its chip's constraint."""
    f = Forgery()
    f.add(table, f.rows(table, flag)[0], col, 1)
    f.rebalance().refused(constraint=constraint)


def test_wrong_alu_result_consistent_carries():
    """ADD with its u limb, result and carry all moved together: the adder fails."""
    f = Forgery()
    r = f.rows("alu", "f_add")[0]
    for name in ("c_lo", "u_lo"):
        f.add("alu", r, name, 1)
    f.rebalance().refused(constraint="adder_lo")


def test_branch_outcome_forged():
    """A branch taken the other way (taken and z flipped: the equality witness fails)."""
    f = Forgery()
    r = f.rows("branch", "f_beq")[0]
    f.set("branch", r, "taken", 1 - f.get("branch", r, "taken"))
    f.set("branch", r, "z", 1 - f.get("branch", r, "z"))
    f.rebalance().refused()


# ------------------------------------------------------------------ the memory argument

def test_wrong_register_value_read():
    """An ADD that reads rs1 as one more (and adds consistently): only the memory argument
    sees that the register never held that value."""
    f = Forgery()
    ok = lambda r: f.get("alu", r, "a_lo") < 0xFFFE and f.get("alu", r, "u_lo") < 0xFFFE  # noqa
    r = f.rows("alu", "f_add", ok)[0]
    for name in ("a_lo", "u_lo", "c_lo"):
        f.add("alu", r, name, 1)
    f.rebalance().refused(bus="rv32_mem")


def test_load_disagrees_with_last_store():
    """LW returning a word one more than the last store put there (value and result moved
    together): the memory argument refuses."""
    f = Forgery()
    ok = lambda r: f.get("load", r, "x0") < 0xFF and f.get("load", r, "o1") == 0  # noqa
    r = f.rows("load", "f_lw", ok)[0]
    for name in ("w_lo", "c_lo", "x0"):
        f.add("load", r, name, 1)
    f.rebalance().refused(bus="rv32_mem")


def test_store_of_another_value():
    """SW storing rs2 + 1 (rs2 read unchanged): the store chip's n = r constraint."""
    f = Forgery()
    r = f.rows("store", "f_sw")[0]
    f.add("store", r, "n_lo", 1)
    f.rebalance().refused(constraint="n_lo")


def test_stale_timestamp():
    """A read claiming the previous access is not earlier than itself."""
    f = Forgery()
    r = f.rows("alu", "f_add")[0]
    ts = 3 * f.get("alu", r, "clk") + 1
    f.set("alu", r, "r1_pts", ts)
    f.rebalance().refused()


def test_wrong_initial_memory():
    """MEMORY claiming another initial value for an image word."""
    f = Forgery()
    r = f.rows("memory", "img")[0]
    f.add("memory", r, "i_lo", 1)
    f.rebalance().refused(bus="rv32_image")


def test_memory_boundary_unsorted():
    """Two MEMORY rows for one address (a second chain) break the sorted order."""
    f = Forgery()
    real = f.rows("memory", "real")
    r = real[1]
    for name in ("wl", "wh"):
        f.set("memory", r, name, f.get("memory", real[0], name))
    f.set("memory", r, "gap", 0)
    f.rebalance().refused()


# ------------------------------------------------------------------ control flow, program

def test_wrong_pc():
    """A row executing at another pc: the execution chain and the program bus refuse."""
    f = Forgery()
    r = f.rows("alu", "f_add")[3]
    f.add("alu", r, "pcw", 1)
    f.rebalance().refused()


def test_instruction_not_in_the_program():
    """An ADD of b = 0 run as a SUB (a - 0 = a + 0: every constraint of the row holds):
    no PROGRAM row holds a SUB at that pc."""
    f = Forgery()
    zero_b = lambda r: all(f.get("alu", r, c) == 0 for c in ("imm_lo", "imm_hi", "r_lo",  # noqa
                                                              "r_hi"))
    r = f.rows("alu", "f_add", zero_b)[0]
    f.set("alu", r, "f_add", 0)
    f.set("alu", r, "f_sub", 1)
    f.rebalance().refused(bus="rv32_program")


def test_write_to_x0():
    """A row writing x0 instead of the sink: the decoded rd is 32."""
    f = Forgery()
    r = f.rows("alu", "f_add", lambda r: f.get("alu", r, "rd") == 32)[0]
    f.set("alu", r, "rd", 0)
    f.rebalance().refused()


def test_jump_value_and_target():
    """JAL/LUI/... writing another value or going elsewhere: the value and the target are
    PROGRAM's (the first bus to disagree, alphabetically, is reported)."""
    for col in ("v_lo", "tgt"):
        f = Forgery()
        f.add("jump", f.rows("jump", "real")[0], col, 1)
        f.rebalance().refused(bus=("rv32_exec", "rv32_mem", "rv32_program"))


# ------------------------------------------------------------------ the statement

def test_forged_exit_code():
    f = Forgery()
    f.pvs[INDEX["registers"]][0] += 1
    f.refused(bus="rv32_exit")


def test_forged_output_byte():
    """The IO table built for another output (what a verifier builds from a proof that
    claims it) does not balance the bytes the program wrote."""
    f = Forgery()
    out = bytearray(f.ex.output)
    out[1] ^= 1
    f.airs = program_airs(f.prog, S.ALL_INPUT, bytes(out), 2, f.slots)
    f.pvs[INDEX["io"]] = pack_output(bytes(out))
    f.refused(bus="rv32_io")


def test_forged_input():
    f = Forgery()
    f.airs = program_airs(f.prog, b"jello world", f.ex.output, 2, f.slots)
    f.refused(bus="rv32_io")


def test_forged_cycle_limit():
    f = Forgery()
    f.pvs[INDEX["ecall"]][0] = f.ex.cycles - 1
    f.refused(constraint="cycle_limit")


def test_ecall_kind_forged():
    """The exit ECALL claimed as a read: the call number check fails."""
    f = Forgery()
    r = f.rows("ecall", "k_exit")[0]
    f.set("ecall", r, "k_exit", 0)
    f.set("ecall", r, "k_read", 1)
    f.rebalance().refused()


# ------------------------------------------------------------------ proofs

@pytest.mark.parametrize("kind", ["memory", "constraint"])
def test_proof_of_a_forgery_does_not_verify(kind):
    f = Forgery()
    if kind == "memory":
        ok = lambda r: f.get("alu", r, "a_lo") < 0xFFFE and f.get("alu", r, "u_lo") < 0xFFFE  # noqa
        r = f.rows("alu", "f_add", ok)[0]
        for name in ("a_lo", "u_lo", "c_lo"):
            f.add("alu", r, name, 1)
    else:
        f.add("alu", f.rows("alu", "f_add")[0], "c_lo", 1)
    f.rebalance()
    proof = prove(f.traces, f.airs, f.pvs, FAST, check=False)
    with pytest.raises(VerificationError):
        verify(proof, f.airs, f.pvs, min_security_bits=0)


# ------------------------------------------------------------------ system calls

def test_read_of_another_input_byte():
    """read(0) writing a byte the input does not have at that position."""
    f = Forgery()
    r = [i for i in f.rows("ioword", "k_in") if f.get("ioword", i, "f[1]") == 1][0]
    f.add("ioword", r, "a[1]", 1)
    f.rebalance().refused(bus=("rv32_io", "rv32_mem"))


def test_read_count_forged():
    """read(0) claiming one byte fewer than min(count, available)."""
    f = Forgery()
    r = f.rows("ecall", "k_read")[0]
    f.add("ecall", r, "n_lo", -1)
    f.add("ecall", r, "res_lo", -1)
    f.rebalance().refused(constraint="read_n0")


def test_write_skipping_a_byte():
    """write(1) moving one byte fewer of a word (the chain's counts then disagree)."""
    f = Forgery()
    r = [i for i in f.rows("ioword", "k_out") if f.get("ioword", i, "h[3]") == 0][0]
    j = max(j for j in range(4) if f.get("ioword", r, f"f[{j}]") == 1)
    f.set("ioword", r, f"f[{j}]", 0)
    f.set("ioword", r, f"h[{j}]", 0)
    f.rebalance().refused()


def test_poseidon2_output_forged():
    """SYS_POSEIDON2 writing another word than the permutation's lane."""
    f = Forgery()
    r = f.rows("p2call", "real")[0]
    f.add("p2call", r, "out0_lo", 1)
    f.rebalance().refused(bus=("poseidon2", "rv32_mem"))


def test_non_canonical_poseidon2_word():
    """An input word w + p (the same field element, another 32-bit word) fails the
    canonical check even where the permutation would accept it."""
    f = Forgery()
    r = f.rows("p2call", "real")[0]
    lo, hi = f.get("p2call", r, "in0_lo"), f.get("p2call", r, "in0_hi")
    w = lo + (hi << 16) + P
    assert w < 1 << 32
    f.set("p2call", r, "in0_lo", w & 0xFFFF)
    f.set("p2call", r, "in0_hi", w >> 16)
    f.set("p2call", r, "in0_beta", 1)
    with pytest.raises(ValueError):           # the range check cannot succeed
        _lookup_counts(f.airs, f.traces, f.pvs)
    f.refused()


# ------------------------------------------------------------------ issue #40: a Poseidon2
# output word with a non-canonical limb pair (the review's accepted forgery)

def _p2_program(check: str, expected: int = 0):
    """Hash 16 words with SYS_POSEIDON2, load output word 0 into t0, and exit with
    ``eq``: t0 != expected (0 when the hash is the expected one), or ``small``:
    t0 < 2^16 (a proof-of-work style check; 0 for almost every hash)."""
    tail = {"eq": f"""
    li t1, {expected}
    sub t2, t0, t1
    sltu a0, zero, t2
""", "small": """
    li t1, 0x10000
    sltu a0, t0, t1
"""}[check]
    src = f"""
    li a7, 0x53460001
    li a0, 0x30000
    li a1, 0x30100
    ecall
    li t3, 0x30100
    lw t0, 0(t3)
{tail}
    li a7, 93
    ecall
"""
    words = b"".join(((7919 * i + 12345) % P).to_bytes(4, "little") for i in range(16))
    return S.traced(src, data=[(0x30000, words)], max_cycles=64)


class _P2Forgery(Forgery):
    """Forgery's cell editor over a given (program, execution, traces)."""

    def __init__(self, traced):
        self.prog, self.ex, tr = traced
        self.airs = list(tr.airs)
        self.traces = [t.copy() for t in tr.traces]
        self.pvs = [list(p) for p in tr.table_public_values]
        self.slots = dict(tr.slots)

    def item(self, table, where):
        t = self.traces[INDEX[table]]
        out = [i for i in range(t.shape[0] * self._k(table)) if where(i)]
        assert len(out) == 1, (table, out)
        return out[0]

    def only(self, table, flag):
        return self.item(table, lambda i: self.get(table, i, flag) == 1)

    def set_reg_final(self, reg, lo, hi):
        t = INDEX["registers"]
        self.traces[t][reg, self.airs[t].main_names.index("f_lo")] = lo % P
        self.traces[t][reg, self.airs[t].main_names.index("f_hi")] = hi % P


def _sub_like(a, b):
    """u, k0, k1 of ALU's adder u + b = a + 2^32 k1 on limbs, a's limbs any integers
    (read as field elements): the witness an ALU row accepts."""
    u_lo, k0 = (a[0] - b[0]) % (1 << 16), int(a[0] - b[0] < 0)
    d = a[1] - b[1] - k0
    u_hi, k1 = d % (1 << 16), int(d < 0)
    return (u_lo, u_hi), k0, k1


def _forge_p2_word(check: str, f=None):
    """The review's forgery: output word 0 written as (lo - 1, hi - 0x7800 mod p) -- the
    same field element (2^16 * 0x7800 = p - 1) -- loaded by LW into t0 and compared as a
    32-bit integer, every later cell consistent; the exit code flips to 1."""
    ex = _p2_program("eq")[1]
    h = int(ex.record.ecall_mem_after[list(ex.record.ecall_mem_is_write).index(1)])
    lo, hi = h & 0xFFFF, h >> 16
    assert 1 <= lo and 1 <= hi < 0x7800, hex(h)
    f = _P2Forgery(_p2_program(check, expected=h))
    assert f.ex.exit_code == 0
    a = (lo - 1, hi - 0x7800)                     # the alias (hi as a signed integer)
    assert (a[0] + (1 << 16) * a[1]) % P == h
    r = f.only("p2call", "real")
    f.set("p2call", r, "out0_lo", a[0])
    f.set("p2call", r, "out0_hi", a[1])
    f.set("p2call", r, "out0_beta", 1)
    # MEMORY's final value of the word, LW's read and result (it byte-checks only lo)
    m = f.item("memory", lambda i: f.get("memory", i, "real") == 1
               and f.get("memory", i, "wl") + (f.get("memory", i, "wh") << 16) == 0x30100 // 4)
    f.set("memory", m, "f_lo", a[0])
    f.set("memory", m, "f_hi", a[1])
    ld = f.only("load", "f_lw")
    for name, v in (("w_lo", a[0]), ("w_hi", a[1]), ("c_lo", a[0]), ("c_hi", a[1]),
                    ("x0", a[0] & 0xFF), ("x1", a[0] >> 8)):
        f.set("load", ld, name, v)
    f.set_reg_final(5, *a)                        # t0
    if check == "eq":                             # sub t2, t0, t1; sltu a0, zero, t2
        s = f.only("alu", "f_sub")
        u, k0, k1 = _sub_like(a, (lo, hi))
        for name, v in (("a_lo", a[0]), ("a_hi", a[1]), ("u_lo", u[0]), ("u_hi", u[1]),
                        ("k0", k0), ("k1", k1), ("c_lo", u[0]), ("c_hi", u[1])):
            f.set("alu", s, name, v)
        f.set_reg_final(7, *u)                    # t2 = 0x87FF_FFFF, not 0
        c = f.only("alu", "f_sltu")
        u2, k0, k1 = _sub_like((0, 0), u)
        for name, v in (("r_lo", u[0]), ("r_hi", u[1]), ("u_lo", u2[0]), ("u_hi", u2[1]),
                        ("k0", k0), ("k1", k1), ("c_lo", k1)):
            f.set("alu", c, name, v)
    else:                                         # sltu a0, t0, 0x10000
        c = f.only("alu", "f_sltu")
        u2, k0, k1 = _sub_like(a, (0, 1))
        for name, v in (("a_lo", a[0]), ("a_hi", a[1]), ("u_lo", u2[0]), ("u_hi", u2[1]),
                        ("k0", k0), ("k1", k1), ("c_lo", k1)):
            f.set("alu", c, name, v)
    assert k1 == 1
    f.set_reg_final(10, 1, 0)                     # a0 = 1
    e = f.only("ecall", "k_exit")
    for name in ("a0_lo", "res_lo", "code"):
        f.set("ecall", e, name, 1)
    f.pvs[INDEX["registers"]][0] = 1              # the claimed exit code
    return f


def _before_40(f, monkeypatch):
    """f's AIRs with P2CALL as it was before #40 (no range check of the output limbs)."""
    from steadfast.rv32.chips import precompile
    monkeypatch.setattr(precompile, "_output_limbs", lambda *a: None)
    airs = list(f.airs)
    airs[INDEX["p2call"]] = precompile.build_p2call(2)
    monkeypatch.undo()
    return airs


@pytest.mark.parametrize("check", ["eq", "small"])
def test_non_canonical_poseidon2_output_was_accepted_and_is_refused(check, monkeypatch):
    """#40's forgery: against the P2CALL of before the fix the forged traces are a
    consistent witness (check_traces passes: exit code 1 where the program exits 0);
    against today's AIRs the output limb's range lookup has no BYTES row."""
    f = _forge_p2_word(check)
    old = _before_40(f, monkeypatch)
    f.traces[INDEX["bytes"]] = bytes_trace(_lookup_counts(old, f.traces, f.pvs))
    check_traces(old, f.traces, f.pvs)             # the hole, reproduced
    with pytest.raises(ValueError):                # hi - 0x7800 mod p: no range16 row
        _lookup_counts(f.airs, f.traces, f.pvs)
    with pytest.raises(LookupImbalance) as e:
        check_traces(f.airs, f.traces, f.pvs)
    assert e.value.bus == "rv32_range16"


@pytest.mark.parametrize("check", ["eq", "small"])
def test_non_canonical_poseidon2_output_proof_refused_by_verify(check, monkeypatch):
    """The forged exit code in a proof: the unmodified verifier of the statement
    (verify_execution: program, input, max_cycles) refuses it with a VerificationError;
    the same witness proved against the old AIR verified against it (the bug)."""
    from steadfast.rv32.statement import verify_execution
    f = _forge_p2_word(check)
    old = _before_40(f, monkeypatch)
    bt = bytes_trace(_lookup_counts(old, f.traces, f.pvs))
    traces = list(f.traces)
    traces[INDEX["bytes"]] = bt
    bad = prove(traces, old, f.pvs, FAST, check=False)
    assert verify(bad, old, f.pvs, min_security_bits=0)        # accepted before #40
    with pytest.raises(VerificationError):
        verify_execution(bad, f.prog, b"", 64, min_security_bits=0)
    forged = prove(traces, f.airs, f.pvs, FAST, check=False)    # today's AIRs
    with pytest.raises(VerificationError):
        verify_execution(forged, f.prog, b"", 64, min_security_bits=0)
