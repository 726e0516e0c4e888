"""Proof format: round trip, determinism, documented header, JSON, and a reader that
rejects malformed bytes with ShapeError only."""
import json
import struct

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
from steadfast.verifier import ShapeError, decode, encode, to_json
from steadfast.verifier.proof_format import FORMAT_VERSION, MAGIC, P


@pytest.fixture(scope="module")
def proof():
    t, pv = ex.fibonacci_trace(3)
    return prove([t], [ex.fibonacci_air()], [pv], Params(num_queries=3, pow_bits=1))


def test_round_trip_is_identity(proof):
    assert encode(decode(proof)) == proof


def test_header_layout(proof):
    assert proof[:4] == MAGIC
    (version, reserved, lb, pw, lf, lpw, nq, dpw, cpw, nt,
     logup_nonce) = struct.unpack_from("<HHBBBBHBBHI", proof, 4)
    assert (version, reserved) == (FORMAT_VERSION, 0) and FORMAT_VERSION == 2
    assert (lb, pw, lf, nq, nt) == (1, 1, 2, 3, 1)
    assert (lpw, dpw, cpw) == (16, 12, 8)                  # the grinding defaults
    assert logup_nonce == decode(proof).logup_nonce
    section = struct.unpack_from("<I", proof, 22)[0]
    assert 26 + section == len(proof)
    assert proof[26] == 3                                  # log_n of the only table


def test_older_versions_get_a_clear_error(proof):
    for v in (1, 0, 3):
        b = bytearray(proof)
        struct.pack_into("<H", b, 4, v)
        with pytest.raises(ShapeError, match=f"unsupported proof version {v} "
                                             r"\(this verifier reads 2\)"):
            decode(bytes(b))


def test_json_rendering(proof):
    doc = json.loads(to_json(proof))
    assert doc["magic"] == "STFK" and doc["params"]["num_queries"] == 3
    t = doc["tables"][0]
    assert t["log_n"] == 3 and len(t["main_rows"]) == 3 and len(t["main_rows"][0]) == 2
    assert len(t["fri_leaves"]) == 1                       # log_n 3 - log_final_poly_len 2


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
        (lambda x: struct.pack_into("<I", x, 22, 7), "trailing|truncated"),
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
    # public_values is the first array of the section: ndim at offset 27, dim at 28
    assert raw[27] == 1
    bad = bytearray(raw)
    struct.pack_into("<I", bad, 28, 1 << 23)
    with pytest.raises(ShapeError, match="truncated|bytes"):
        decode(bytes(bad))
    struct.pack_into("<I", bad, 28, 1 << 30)
    with pytest.raises(ShapeError, match="out of bounds"):
        decode(bytes(bad))


def test_writer_rejects_wrong_types():
    from steadfast.verifier.proof_format import Proof, TableProof
    z = np.zeros(0, np.uint32)
    t = TableProof(1, z, z, z, z, z, *([np.zeros((0, 4), np.float64)] * 7), 0,
                   *([np.zeros((0, 0), np.uint32), np.zeros((0, 0, 8), np.uint32)] * 3))
    with pytest.raises((TypeError, ValueError)):
        encode(Proof(Params(), [t]))
