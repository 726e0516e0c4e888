"""Proof format: round trip, determinism, documented header, JSON, and a reader that
rejects malformed bytes with ShapeError only."""
import json
import struct

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
from steadfast.verifier import ShapeError, decode, encode, to_json
from steadfast.verifier.proof_format import FORMAT_VERSION, MAGIC, P, FriProof, Proof, TableProof

HEADER = "<HHBBBBHBBBBHI"          # version .. logup_nonce (after the magic)
SEC0 = 4 + struct.calcsize(HEADER)  # offset of the first table's section_len


@pytest.fixture(scope="module")
def proof():
    t, pv = ex.fibonacci_trace(3)
    return prove([t], [ex.fibonacci_air()], [pv], Params(log_blowup=1, num_queries=3, pow_bits=1))


def test_round_trip_is_identity(proof):
    assert encode(decode(proof)) == proof


def test_header_layout(proof):
    assert proof[:4] == MAGIC
    (version, reserved, lb, pw, lf, lpw, nq, dpw, cpw, lar, lcap, nt,
     logup_nonce) = struct.unpack_from(HEADER, proof, 4)
    assert (version, reserved) == (FORMAT_VERSION, 0) and FORMAT_VERSION == 5
    assert (lb, pw, lf, nq, nt) == (1, 1, 2, 3, 1)
    assert (lpw, dpw, cpw) == (16, 14, 8)                  # the grinding defaults
    assert (lar, lcap) == (Params().log_fri_arity, Params().log_cap)
    assert SEC0 == 24
    d = decode(proof)
    assert logup_nonce == d.logup_nonce
    section = struct.unpack_from("<I", proof, SEC0)[0]
    assert proof[SEC0 + 4] == 3                            # log_n of the only table
    # the FRI section follows the last table (docs/protocol.md §5)
    fri_at = SEC0 + 4 + section
    assert d.fri.num_layers == 1                           # log_n 3 + 1 -> h_final 3
    from steadfast.verifier.proof_format import encode_fri
    assert proof[fri_at:] == encode_fri(d.fri)


def test_older_versions_get_a_clear_error(proof):
    for v in (4, 3, 2, 1, 0, 6):
        b = bytearray(proof)
        struct.pack_into("<H", b, 4, v)
        with pytest.raises(ShapeError, match=f"unsupported proof version {v} "
                                             r"\(this verifier reads 5\)"):
            decode(bytes(b))


def test_json_rendering(proof):
    doc = json.loads(to_json(proof))
    assert doc["magic"] == "STFK" and doc["params"]["num_queries"] == 3
    t = doc["tables"][0]
    assert t["log_n"] == 3 and 1 <= len(t["main_rows"]) <= 3 and len(t["main_rows"][0]) == 2
    assert len(t["main_cap"]) == 1 << Params().log_cap and len(t["main_cap"][0]) == 8
    assert doc["fri"]["num_layers"] == len(doc["fri"]["caps"]) == 1
    assert len(doc["fri"]["final_poly"]) == 4


@pytest.mark.parametrize("cut", [0, 3, 4, 10, 19, 20, 21, 100, -5, -1])
def test_truncations_raise_shape_error(proof, cut):
    with pytest.raises(ShapeError):
        decode(proof[:cut])


def test_malformed_headers(proof):
    b = bytearray(proof)
    for mutate, msg in [
        (lambda x: x.__setitem__(0, ord("X")), "magic"),
        (lambda x: struct.pack_into("<H", x, 4, FORMAT_VERSION + 1), "version"),
        (lambda x: struct.pack_into("<H", x, 6, 1), "reserved"),
        (lambda x: struct.pack_into("<B", x, 8, 0), "log_blowup"),
        (lambda x: struct.pack_into("<B", x, 11, 31), "logup_pow_bits"),
        (lambda x: struct.pack_into("<B", x, 14, 31), "deep_pow_bits"),
        (lambda x: struct.pack_into("<B", x, 15, 255), "commit_pow_bits"),
        (lambda x: struct.pack_into("<B", x, 16, 0), "log_fri_arity"),
        (lambda x: struct.pack_into("<B", x, 16, 5), "log_fri_arity"),
        (lambda x: struct.pack_into("<B", x, 17, 9), "log_cap"),
        (lambda x: struct.pack_into("<H", x, 18, 0), "at least one table"),
        (lambda x: struct.pack_into("<I", x, SEC0, 7), "trailing|truncated"),
    ]:
        c = bytearray(b)
        mutate(c)
        with pytest.raises(ShapeError, match=msg):
            decode(bytes(c))
    with pytest.raises(ShapeError, match="trailing"):
        decode(proof + b"\0")
    with pytest.raises(ShapeError):
        decode("not bytes")


def test_non_canonical_value_is_rejected(proof):
    p = decode(proof)
    p.tables[0].ood_main = p.tables[0].ood_main.copy()
    raw = encode(p)
    # find the ood_main bytes and overwrite the first element with p
    needle = p.tables[0].ood_main.astype("<u4").tobytes()
    pos = raw.index(needle)
    bad = bytearray(raw)
    struct.pack_into("<I", bad, pos, P)
    with pytest.raises(ShapeError, match=">= p"):
        decode(bytes(bad))


def test_huge_declared_dimension_is_rejected_before_allocation(proof):
    p = decode(proof)
    raw = encode(p)
    # public_values is the first array of the section: ndim after log_n, then its dim
    at = SEC0 + 5
    assert raw[at] == 1
    bad = bytearray(raw)
    struct.pack_into("<I", bad, at + 1, 1 << 23)
    with pytest.raises(ShapeError, match="truncated|bytes"):
        decode(bytes(bad))
    struct.pack_into("<I", bad, at + 1, 1 << 30)
    with pytest.raises(ShapeError, match="out of bounds"):
        decode(bytes(bad))


def _u(*shape):
    return np.zeros(shape, np.uint32)


def _synthetic(**over):
    """A well-formed (not valid) v3 proof: one table of log_n 3 with aux, cap 2^2."""
    kw = dict(log_n=3, public_values=_u(2), main_cap=_u(4, 8), aux_cap=_u(4, 8),
              terminal=_u(4), parts_cap=_u(4, 8), ood_main=_u(2, 4), ood_main_next=_u(0, 4),
              ood_aux=_u(8, 4), ood_aux_next=_u(8, 4), ood_parts=_u(4, 4), zeta_nonce=1,
              deep_nonce=2, main_rows=_u(3, 2), main_nodes=_u(5, 8), aux_rows=_u(3, 8),
              aux_nodes=_u(5, 8), parts_rows=_u(3, 4), parts_nodes=_u(5, 8))
    fri = dict(caps=[_u(4, 8)], fold_nonces=np.array([7], np.uint32), final_poly=_u(4, 4),
               pow_nonce=9, values=[_u(3, 4)], nodes=[_u(2, 8)])
    for k, v in over.items():
        (fri if k in fri else kw)[k] = v
    return Proof(Params(num_queries=3, log_cap=2), [TableProof(**kw)], FriProof(**fri))


def test_synthetic_round_trip():
    raw = encode(_synthetic())
    d = decode(raw)
    assert encode(d) == raw
    assert d.fri.pow_nonce == 9 and d.tables[0].deep_nonce == 2
    assert d.tables[0].raw and raw.count(d.tables[0].raw) == 1


@pytest.mark.parametrize("over,msg", [
    (dict(main_cap=_u(2, 8)), "main_cap"),                 # cap 2^min(2, 4) = 4 rows
    (dict(parts_cap=_u(4, 4)), "parts_cap"),
    (dict(aux_cap=_u(0, 8)), "terminal"),                  # terminal without aux
    (dict(terminal=_u(0)), "terminal"),
    (dict(aux_cap=_u(0, 8), terminal=_u(0)), "aux_rows"),  # rows without aux
    (dict(parts_rows=_u(2, 4)), "parts_rows"),             # one row count per section
    (dict(main_rows=_u(4, 2), aux_rows=_u(4, 8), parts_rows=_u(4, 4)), "opened rows"),
    (dict(main_nodes=_u(5, 4)), "main_nodes"),
    (dict(ood_main=_u(2, 3)), "ood_main"),
    (dict(log_n=0), "log_n"),
    (dict(log_n=25), "log_n"),
    (dict(fold_nonces=_u(2)), "fold_nonces"),
    (dict(final_poly=_u(3, 4)), "power of two"),
    (dict(final_poly=_u(4, 3)), "final_poly"),
    (dict(caps=[_u(4, 9)]), "fri_cap"),
    (dict(values=[_u(3, 5)]), "fri_values"),
    (dict(nodes=[_u(3, 7)]), "fri_nodes"),
])
def test_decode_checks_shapes(over, msg):
    try:
        raw = encode(_synthetic(**over))
    except ValueError:                      # the writer refuses some of them itself
        return
    with pytest.raises(ShapeError, match=msg):
        decode(raw)


def test_writer_rejects_wrong_types():
    with pytest.raises(TypeError):
        encode(_synthetic(ood_main=np.zeros((2, 4), np.float64)))
    with pytest.raises(ValueError):
        encode(_synthetic(main_nodes=np.zeros((2, 4, 8), np.uint32)))
    with pytest.raises(ValueError, match="FRI section"):
        encode(_synthetic(values=[]))
    p = _synthetic()
    p.fri = None
    with pytest.raises(ValueError, match="FRI section"):
        encode(p)
