"""Proof format 6: round trip, determinism, documented header and layout (table sections,
then the commitments section, then the FRI section), JSON, a reader that rejects
malformed bytes with ShapeError only, and the verifier's use of the three mixed-height
commitments (transcript order, table_check_key, the join's openings)."""
import json
import struct

import numpy as np
import pytest

from steadfast.air import examples as ex
from steadfast.prover import Params, prove
from steadfast.verifier import MerkleError, ShapeError, decode, encode, to_json
from steadfast.verifier.errors import FriError
from steadfast.verifier.join import verify_join
from steadfast.verifier.merkle import cap_height, leaf_set, multiproof_size
from steadfast.verifier.poseidon2 import compress, hash_rows
from steadfast.verifier.proof_format import (FORMAT_VERSION, MAGIC, P, Commitments, FriProof,
                                             Proof, TableProof, encode_commitments, encode_fri,
                                             encode_section)
from steadfast.verifier.protocol import TableShape, fri_layer_heights
from steadfast.verifier.shapes import check_commitments_shape
from steadfast.verifier.table import TableState, table_check_key, verify_table
from steadfast.verifier.transcript import Transcript

HEADER = "<HHBBBBHBBBBHI"          # version .. logup_nonce (after the magic)
SEC0 = 4 + struct.calcsize(HEADER)  # offset of the first table's section_len


# ------------------------------------------------------------------ synthetic proofs

def _u(*shape):
    return np.zeros(shape, np.uint32)


def _table(log_n=3, aux=True, d=3, **over):
    """A well-formed (not valid) section: main width 2, 2 aux EF columns (if ``aux``),
    one quotient part."""
    kw = dict(log_n=log_n, public_values=_u(2), terminal=_u(4 if aux else 0),
              ood_main=_u(2, 4), ood_main_next=_u(0, 4), ood_aux=_u(8 if aux else 0, 4),
              ood_aux_next=_u(8 if aux else 0, 4), ood_parts=_u(4, 4), zeta_nonce=1,
              deep_nonce=2, main_rows=_u(d, 2), aux_rows=_u(d, 8) if aux else _u(0, 0),
              parts_rows=_u(d, 4))
    kw.update(over)
    return TableProof(**kw)


def _synthetic(tables=None, params=None, **over):
    """A well-formed (not valid) format-6 proof: by default one table of log_n 3 with aux,
    log_blowup 2 and cap 2^2 (every cap [4, 8])."""
    tables = [_table()] if tables is None else tables
    params = params or Params(num_queries=3, log_cap=2)
    com = dict(main_cap=_u(4, 8), aux_cap=_u(4, 8), parts_cap=_u(4, 8), main_nodes=_u(5, 8),
               aux_nodes=_u(5, 8), parts_nodes=_u(5, 8))
    fri = dict(caps=[_u(4, 8)], fold_nonces=np.array([7], np.uint32), final_poly=_u(4, 4),
               pow_nonce=9, values=[_u(3, 4)], nodes=[_u(2, 8)])
    tab = {}
    for k, v in over.items():
        (fri if k in fri else com if k in com else tab)[k] = v
    for k, v in tab.items():
        setattr(tables[0], k, v)
    return Proof(params, tables, FriProof(**fri), commits=Commitments(**com))


def _mixed_params():
    """Two tables, heights 5 (aux) and 4 (no aux) at log_blowup 2, log_cap 5: the main /
    parts caps have 2^min(5, 4) = 16 rows, the aux cap (table 0 alone) 2^5 = 32."""
    return [_table(3, aux=True), _table(2, aux=False)], Params(num_queries=3, log_cap=5)


def _mixed(**over):
    tables, params = _mixed_params()
    kw = dict(main_cap=_u(16, 8), aux_cap=_u(32, 8), parts_cap=_u(16, 8))
    kw.update(over)
    return _synthetic(tables, params, **kw)


def test_version_is_6():
    assert FORMAT_VERSION == 6


def test_synthetic_round_trip():
    raw = encode(_synthetic())
    d = decode(raw)
    assert encode(d) == raw
    assert d.fri.pow_nonce == 9 and d.tables[0].deep_nonce == 2
    assert d.tables[0].raw and raw.count(d.tables[0].raw) == 1
    assert d.commits.main_cap.shape == (4, 8) and d.commits.aux_nodes.shape == (5, 8)


def test_synthetic_layout():
    """header, the sections (section_len + section), the commitments section, the FRI
    section -- nothing else (docs/protocol.md section 5, format 6)."""
    p = _mixed()
    raw = encode(p)
    assert raw[:4] == MAGIC
    assert struct.unpack_from(HEADER, raw, 4)[0] == 6
    at = SEC0
    for t in p.tables:
        sec = encode_section(t)
        assert struct.unpack_from("<I", raw, at)[0] == len(sec)
        assert raw[at + 4:at + 4 + len(sec)] == sec
        at += 4 + len(sec)
    com = encode_commitments(p.commits)
    assert raw[at:at + len(com)] == com
    assert raw[at + len(com):] == encode_fri(p.fri)
    d = decode(raw)
    assert [t.has_aux for t in d.tables] == [True, False]
    assert d.commits.aux_cap.shape == (32, 8) and d.commits.main_cap.shape == (16, 8)


def test_synthetic_version_5_is_refused():
    raw = bytearray(encode(_synthetic()))
    for v in (5, 4, 3, 0, 7):
        b = bytearray(raw)
        struct.pack_into("<H", b, 4, v)
        with pytest.raises(ShapeError, match=f"unsupported proof version {v} "
                                             r"\(this verifier reads 6\)"):
            decode(bytes(b))


def test_synthetic_json():
    doc = json.loads(to_json(encode(_mixed())))
    assert doc["version"] == 6
    assert len(doc["commits"]["main_cap"]) == 16 and len(doc["commits"]["aux_cap"]) == 32
    assert len(doc["commits"]["parts_nodes"]) == 5
    t = doc["tables"][1]
    assert "main_cap" not in t and "main_nodes" not in t and t["terminal"] == []


def test_no_aux_anywhere():
    """No table has aux: aux_cap and aux_nodes are [0, 8]."""
    p = _synthetic([_table(aux=False)], aux_cap=_u(0, 8), aux_nodes=_u(0, 8))
    d = decode(encode(p))
    assert d.commits.aux_cap.shape == (0, 8) and d.commits.aux_nodes.shape == (0, 8)


@pytest.mark.parametrize("over,msg", [
    # the commitments section
    (dict(main_cap=_u(2, 8)), "main_cap"),                 # cap 2^min(2, 5) = 4 rows
    (dict(main_cap=_u(8, 8)), "main_cap"),
    (dict(parts_cap=_u(4, 4)), "parts_cap"),
    (dict(aux_cap=_u(0, 8)), "aux_cap"),                   # a table has aux: the cap is due
    (dict(aux_cap=_u(2, 8)), "aux_cap"),
    (dict(main_nodes=_u(5, 3)), "main_nodes"),             # node arrays are [*, 8]
    (dict(aux_nodes=_u(5, 3)), "aux_nodes"),
    (dict(parts_nodes=_u(5, 9)), "parts_nodes"),
    # a table section
    (dict(terminal=_u(3)), "terminal"),
    (dict(terminal=_u(0)), "aux_rows"),                    # rows without aux
    (dict(parts_rows=_u(2, 4)), "parts_rows"),             # one row count per section
    (dict(main_rows=_u(4, 2), aux_rows=_u(4, 8), parts_rows=_u(4, 4)), "opened rows"),
    (dict(ood_main=_u(2, 3)), "ood_main"),
    (dict(log_n=0), "log_n"),
    (dict(log_n=25), "log_n"),
    # the FRI section
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


@pytest.mark.parametrize("over,msg", [
    (dict(aux_cap=_u(4, 8)), "no table has aux"),          # aux_cap without any aux table
    (dict(aux_nodes=_u(1, 8)), "aux_nodes"),               # nodes without an aux tree
    (dict(main_cap=_u(8, 8)), "main_cap"),
    (dict(main_nodes=_u(5, 3)), "main_nodes"),
])
def test_decode_checks_commitments_without_aux(over, msg):
    kw = dict(aux_cap=_u(0, 8), aux_nodes=_u(0, 8))
    kw.update(over)
    raw = encode(_synthetic([_table(aux=False)], **kw))
    with pytest.raises(ShapeError, match=msg):
        decode(raw)


@pytest.mark.parametrize("over,msg", [
    (dict(main_cap=_u(32, 8)), "main_cap"),     # c = min(log_cap, min h_t) = 4, not 5
    (dict(parts_cap=_u(32, 8)), "parts_cap"),
    (dict(aux_cap=_u(16, 8)), "aux_cap"),       # the aux tree is table 0's alone: c' = 5
])
def test_mixed_cap_heights(over, msg):
    decode(encode(_mixed()))                    # the right shapes pass
    with pytest.raises(ShapeError, match=msg):
        decode(encode(_mixed(**over)))


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
    p = _synthetic()
    p.commits = None
    with pytest.raises(ValueError, match="commitments section"):
        encode(p)


@pytest.mark.parametrize("cut", [0, 3, 4, 10, 19, 20, 21, 100, -5, -1])
def test_synthetic_truncations_raise_shape_error(cut):
    with pytest.raises(ShapeError):
        decode(encode(_mixed())[:cut])


def _shape(name, log_n, aux_cols, log_blowup=2, w=2, parts=1, nxt=False):
    return TableShape(name, log_n, log_blowup, w, 0, aux_cols, parts, 0, nxt, False)


def test_check_commitments_shape_against_the_airs():
    tables, params = _mixed_params()
    shapes = [_shape("a", 3, 2), _shape("b", 2, 0)]
    ok = _mixed().commits
    check_commitments_shape(ok, shapes, params)
    with pytest.raises(ShapeError, match="aux_cap"):        # the AIRs say: no aux tree
        check_commitments_shape(ok, [_shape("a", 3, 0), _shape("b", 2, 0)], params)
    with pytest.raises(ShapeError, match="aux_cap"):        # aux tree of table 1 alone: c' 4
        check_commitments_shape(ok, [_shape("a", 3, 0), _shape("b", 2, 2)], params)
    with pytest.raises(ShapeError, match="commitments"):
        check_commitments_shape(None, shapes, params)


# ------------------------------------------------------------------ the fork and its key

def _commits(aux_rows=4, seed=0):
    rng = np.random.default_rng(seed)
    r = lambda n: rng.integers(0, P, (n, 8)).astype(np.uint32)   # noqa: E731
    return Commitments(main_cap=r(4), aux_cap=r(aux_rows), parts_cap=r(4), main_nodes=r(0),
                       aux_nodes=r(0), parts_nodes=r(0))


def test_verify_table_absorbs_the_global_caps():
    """The fork absorbs the commitments section's aux cap (tables with interactions) and
    parts cap, not anything of its section; composition=False skips only the check at z."""
    params = Params(num_queries=3, log_cap=2, deep_pow_bits=0, commit_pow_bits=0)
    air = ex.fibonacci_air()
    com = _commits()
    sh = _shape("fib", 3, 0, w=air.main_width, parts=air.num_parts,
                nxt=air.uses_next_main)
    tp = _table(aux=False, ood_main=_u(air.main_width, 4),
                ood_main_next=_u(air.main_width if air.uses_next_main else 0, 4),
                ood_parts=_u(4 * air.num_parts, 4))
    fork = Transcript().fork(0)
    verify_table(fork, air, sh, tp, params, {}, com, composition=False)
    labels = [(op, lab) for op, lab, _ in fork.log]
    assert ("absorb", "aux_cap") not in labels
    assert ("absorb", "parts_cap") in labels
    assert dict((lab, n) for op, lab, n in fork.log if op == "absorb")["parts_cap"] == 4 * 8
    # with interactions: aux_cap (the global one) then the terminal, before alpha
    sh_aux = _shape("fib", 3, 2, w=air.main_width, parts=air.num_parts,
                    nxt=air.uses_next_main)
    fork = Transcript().fork(0)
    verify_table(fork, air, sh_aux, tp, params, {}, com, composition=False)
    labels = [lab for _, lab, _ in fork.log]
    assert labels[1:5] == ["aux_cap", "logup_terminal", "alpha", "parts_cap"]
    # the digest depends on the caps
    d1 = verify_table(Transcript().fork(0), air, sh_aux, tp, params, {}, com,
                      composition=False).digest
    com2 = _commits(seed=1)
    d2 = verify_table(Transcript().fork(0), air, sh_aux, tp, params, {}, com2,
                      composition=False).digest
    assert d1 != d2


def test_table_check_key_covers_the_caps():
    params = Params(num_queries=3, log_cap=2)
    air = ex.fibonacci_air()
    fork = Transcript().fork(0)
    com = _commits()
    key = table_check_key(fork, air, b"section", params, {}, com)
    assert key == table_check_key(fork, air, b"section", params, {}, _commits())
    for name in ("aux_cap", "parts_cap"):
        other = _commits()
        cap = getattr(other, name).copy()
        cap[0, 0] ^= 1
        setattr(other, name, cap)
        assert table_check_key(fork, air, b"section", params, {}, other) != key
    assert table_check_key(fork, air, b"section", params, {}, _commits(aux_rows=0)) != key
    assert table_check_key(fork, air, b"sectioN", params, {}, com) != key


# ------------------------------------------------------------------ the join's openings

def _mixed_tree(mats, log_cap):
    """Reference mixed-height tree (/work/tools/mmcs_spec.md "The mixed tree"): returns
    (cap, heights, levels)."""
    leaves = [hash_rows(m) for m in mats]
    hs = [int(m.shape[0]).bit_length() - 1 for m in mats]
    H = max(hs)
    level = None
    for t, h in enumerate(hs):
        if h == H:
            level = leaves[t] if level is None else compress(level, leaves[t])
    levels = [level]
    for lv in range(1, H + 1):
        level = compress(level[0::2], level[1::2])
        for t, h in enumerate(hs):
            if h == H - lv:
                level = compress(level, leaves[t])
        levels.append(level)
    c = min(log_cap, min(hs))
    return levels[H - c], hs, levels


def _mixed_nodes(levels, top, H, c):
    s = leaf_set(top)
    out = []
    for lv in range(H - c):
        have = set(int(j) for j in s)
        for j in s:
            if int(j) ^ 1 not in have:
                out.append(levels[lv][int(j) ^ 1])
        s = np.unique(s >> 1)
    return np.asarray(out, np.uint32).reshape(-1, 8)


class _FixedQueries(Transcript):
    def __init__(self, queries):
        super().__init__()
        self.q = np.asarray(queries, np.int64)

    def sample_bits(self, label, bits, count):
        assert count == self.q.size
        return self.q.copy()


def _join_case(seed=3):
    """Three tables, LDE heights 4 (aux), 3 (aux) and 5 (no aux) at log_blowup 1, log_cap
    1; the aux tree's top height 4 < h_max 5.  Sections with random rows opened at the
    queries, the three trees' caps and multiproofs, FRI counts right (values garbage)."""
    rng = np.random.default_rng(seed)
    params = Params(log_blowup=1, num_queries=6, pow_bits=0, log_final_poly_len=0,
                    logup_pow_bits=0, deep_pow_bits=0, commit_pow_bits=0, log_fri_arity=1,
                    log_cap=1)
    shapes = [_shape("a", 3, 1, 1, w=3), _shape("b", 2, 2, 1, w=2, nxt=True),
              _shape("c", 4, 0, 1, w=1)]
    h_max = max(sh.log_lde for sh in shapes)
    queries = rng.integers(0, 1 << h_max, params.num_queries)
    mats = {k: [] for k in ("main", "aux", "parts")}
    tables = []
    rf = lambda *s: rng.integers(0, P, s).astype(np.uint32)   # noqa: E731
    for sh in shapes:
        N = 1 << sh.log_lde
        full = {"main": rf(N, sh.main_width), "aux": rf(N, sh.aux_width),
                "parts": rf(N, sh.parts_width)}
        idx = leaf_set(queries >> (h_max - sh.log_lde))
        for k in mats:
            if k != "aux" or sh.aux_cols:
                mats[k].append(full[k])
        aux = sh.aux_cols > 0
        tables.append(TableProof(
            log_n=sh.log_n, public_values=_u(0), terminal=rf(4) if aux else _u(0),
            ood_main=rf(sh.main_width, 4),
            ood_main_next=rf(sh.main_width if sh.uses_next_main else 0, 4),
            ood_aux=rf(sh.aux_width, 4), ood_aux_next=rf(sh.aux_width, 4),
            ood_parts=rf(sh.parts_width, 4), zeta_nonce=0, deep_nonce=0,
            main_rows=full["main"][idx], aux_rows=full["aux"][idx] if aux else _u(0, 0),
            parts_rows=full["parts"][idx]))
    com = {}
    for k, ms in mats.items():
        cap, hs, levels = _mixed_tree(ms, params.log_cap)
        H, c = max(hs), min(params.log_cap, min(hs))
        com[f"{k}_cap"] = cap
        com[f"{k}_nodes"] = _mixed_nodes(levels, queries >> (h_max - H), H, c)
    commits = Commitments(**com)
    heights = fri_layer_heights(params, [sh.log_n for sh in shapes])
    at = {h: leaf_set(queries >> (h_max - h)) for h in heights}
    r = len(heights) - 1
    fri = FriProof(
        caps=[_u(1 << cap_height(heights[i + 1], params.log_cap), 8) for i in range(r)],
        fold_nonces=_u(r), final_poly=_u(1 << (heights[-1] - params.log_blowup), 4),
        pow_nonce=0,
        values=[_u(at[heights[i + 1]].size * (1 << (heights[i] - heights[i + 1]))
                   - at[heights[i]].size, 4) for i in range(r)],
        nodes=[_u(multiproof_size(at[heights[i + 1]], heights[i + 1], params.log_cap), 8)
               for i in range(r)])
    states = [TableState(z=rng.integers(0, P, 4).astype(np.uint64),
                         lam=rng.integers(0, P, 4).astype(np.uint64), digest=[0] * 8)
              for _ in shapes]
    return params, shapes, tables, states, fri, commits, queries


def _join(case):
    params, shapes, tables, states, fri, commits, queries = case
    verify_join(_FixedQueries(queries), params, shapes, tables, states, fri, commits)


def test_join_accepts_right_openings():
    """Right openings pass the three commitments; the garbage FRI values then fail at the
    first FRI layer (or the final polynomial), never at a commitment."""
    with pytest.raises((MerkleError, FriError)) as e:
        _join(_join_case())
    assert "commitment" not in str(e.value)


@pytest.mark.parametrize("kind,t", [("main", 0), ("main", 2), ("aux", 1), ("parts", 2),
                                    ("parts", 1)])
def test_join_rejects_a_wrong_row(kind, t):
    case = _join_case()
    tp = case[2][t]
    rows = getattr(tp, f"{kind}_rows").copy()
    rows[-1, 0] = (int(rows[-1, 0]) + 1) % P
    setattr(tp, f"{kind}_rows", rows)
    with pytest.raises(MerkleError, match=f"{kind} commitment"):
        _join(case)


@pytest.mark.parametrize("kind", ["main", "aux", "parts"])
def test_join_rejects_a_wrong_node_or_cap(kind):
    case = _join_case()
    com = case[5]
    nodes = getattr(com, f"{kind}_nodes").copy()
    nodes[0, 3] = (int(nodes[0, 3]) + 1) % P
    setattr(com, f"{kind}_nodes", nodes)
    with pytest.raises(MerkleError, match=f"{kind} commitment"):
        _join(case)
    case = _join_case()
    com = case[5]
    cap = getattr(com, f"{kind}_cap").copy()
    cap[:, 0] = (cap[:, 0].astype(np.int64) + 1) % P
    setattr(com, f"{kind}_cap", cap)
    with pytest.raises(MerkleError, match=f"{kind} commitment"):
        _join(case)


@pytest.mark.parametrize("kind", ["main", "aux", "parts"])
def test_join_counts_nodes_before_hashing(kind):
    case = _join_case()
    com = case[5]
    nodes = getattr(com, f"{kind}_nodes")
    setattr(com, f"{kind}_nodes", np.concatenate([nodes, nodes[:1]]))
    with pytest.raises(ShapeError, match=f"{kind}_nodes count"):
        _join(case)


def test_join_counts_rows():
    case = _join_case()
    tp = case[2][1]
    tp.main_rows = tp.main_rows[:-1]
    with pytest.raises(ShapeError, match="opened rows"):
        _join(case)


# ------------------------------------------------------------------ proofs from the prover

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
    assert (version, reserved) == (FORMAT_VERSION, 0) and FORMAT_VERSION == 6
    assert (lb, pw, lf, nq, nt) == (1, 1, 2, 3, 1)
    assert (lpw, dpw, cpw) == (16, 14, 8)                  # the grinding defaults
    assert (lar, lcap) == (Params().log_fri_arity, Params().log_cap)
    assert SEC0 == 24
    d = decode(proof)
    assert logup_nonce == d.logup_nonce
    section = struct.unpack_from("<I", proof, SEC0)[0]
    assert proof[SEC0 + 4] == 3                            # log_n of the only table
    # the commitments section follows the last table, then the FRI section
    # (docs/protocol.md §5)
    com_at = SEC0 + 4 + section
    com = encode_commitments(d.commits)
    assert proof[com_at:com_at + len(com)] == com
    assert d.fri.num_layers == 1                           # log_n 3 + 1 -> h_final 3
    assert proof[com_at + len(com):] == encode_fri(d.fri)
    # one table: the main tree is its main tree (cap 2^min(log_cap, 4) rows)
    assert d.commits.main_cap.shape == (1 << min(Params().log_cap, 4), 8)
    assert d.commits.aux_cap.shape == (0, 8) and d.commits.aux_nodes.shape == (0, 8)


def test_older_versions_get_a_clear_error(proof):
    for v in (5, 4, 3, 2, 1, 0, 7):
        b = bytearray(proof)
        struct.pack_into("<H", b, 4, v)
        with pytest.raises(ShapeError, match=f"unsupported proof version {v} "
                                             r"\(this verifier reads 6\)"):
            decode(bytes(b))


def test_json_rendering(proof):
    doc = json.loads(to_json(proof))
    assert doc["magic"] == "STFK" and doc["params"]["num_queries"] == 3
    t = doc["tables"][0]
    assert t["log_n"] == 3 and 1 <= len(t["main_rows"]) <= 3 and len(t["main_rows"][0]) == 2
    assert len(doc["commits"]["main_cap"]) == 1 << Params().log_cap
    assert len(doc["commits"]["main_cap"][0]) == 8
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


def test_non_canonical_commitment_is_rejected(proof):
    p = decode(proof)
    raw = encode(p)
    pos = raw.index(p.commits.main_cap.astype("<u4").tobytes())
    bad = bytearray(raw)
    struct.pack_into("<I", bad, pos, P)
    with pytest.raises(ShapeError, match="main_cap holds a value >= p"):
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
