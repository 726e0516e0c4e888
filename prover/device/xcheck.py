"""XCHECK: the verifier's composition check inside the prover, and its post-mortem.

With ``PROVER_GPU_XCHECK=1``, after R3 of every table the prover checks what the verifier
will check at z: the constraints evaluated from the opened values, folded with alpha,
equal Z_H(z) * sum_i z^(i n) q_i(z).  It costs one EF evaluation of the constraints per
table.  After the join (proof format 3: one FRI for all tables), before any buffer is
released, the verifier checks the whole finished proof (:func:`check_proof`); a final
polynomial the join refused is reported by :func:`join_failure`.  On a failure it writes a
post-mortem (JSON) and fails the proof (:class:`XcheckFailure`; the CLI exits with
status 4 and writes no proof file).

The post-mortem answers three questions:

1. **Which stage diverged** from a host recompute of the same table with the same
   challenges: ``lde`` (main LDE), ``aux`` (LogUp trace LDE), ``constraints`` (Q on the
   quotient domain), ``decomposition`` (the parts' coefficients), ``ood`` (opened values),
   the first in that order that differs.
2. **The corruption's shape** in that buffer: differing domain rows (count, first, last)
   and whether the whole buffer or a sparse subset differs.
3. **The verdict**: every resident buffer carries an integrity tag taken when its stage
   produced it.  A buffer that no longer matches its tag was corrupted while resident:
   rerunning the device chain on those same resident inputs reproduces the mismatch --
   ``corrupted resident input``.  If every resident input is intact, the device chain is
   rerun (fresh buffers, same inputs and challenges): a clean rerun means a ``transient
   race``; a rerun that mismatches again means a ``persistent device fault``.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ...air import field as F
from steadfast.errors import SteadfastError
from ...kernels.backend import DeviceArray
from ...kernels.kernel_cache import atomic_write
from ...verifier import encode, verify
from ...verifier.composition import composition_check
from ...verifier.errors import CompositionError, VerificationError
from ...verifier.protocol import SHIFT, deep_groups

from .join import JOIN
from .locks import NULL_LOCK, R2_LOCK
from .engines import decompose
from .integrity import lde_matches_leaves, tree_consistent  # noqa: F401  (re-exported)
from ..core.stages import HostStages


class XcheckFailure(SteadfastError, RuntimeError):
    """The in-prover composition check failed; ``postmortem`` is the report's path."""

    def __init__(self, message: str, postmortem: str | None, report: dict):
        super().__init__(message)
        self.postmortem = postmortem
        self.report = report


def composition_ok(air, shape, ood: dict, terminal, pv, challenges, alpha, z) -> bool:
    """The verifier's composition check on opened values (True when it holds)."""
    empty4 = np.zeros((0, 4), np.uint32)
    tp = SimpleNamespace(
        ood_main=ood[("main", False)], ood_main_next=ood.get(("main", True), empty4),
        ood_aux=ood.get(("aux", False), empty4), ood_aux_next=ood.get(("aux", True), empty4),
        ood_parts=ood[("parts", False)],
        terminal=terminal if terminal is not None else np.zeros(0, np.uint32))
    try:
        composition_check(air, shape, tp, pv, challenges, alpha, z)
        return True
    except CompositionError:
        return False


def corruption_shape(a: np.ndarray, b: np.ndarray, axis: int) -> dict:
    """Differing rows along the domain axis: count, first, last, whole-buffer or sparse."""
    a = np.moveaxis(np.asarray(a), axis, 0).reshape(np.shape(a)[axis], -1)
    b = np.moveaxis(np.asarray(b), axis, 0).reshape(np.shape(b)[axis], -1)
    if a.shape != b.shape:
        return {"count": int(a.shape[0]), "first": 0, "last": int(a.shape[0]) - 1,
                "rows": int(a.shape[0]), "kind": "shape-mismatch"}
    rows = np.nonzero((a != b).any(axis=1))[0]
    n = a.shape[0]
    if rows.size == 0:
        return {"count": 0, "rows": int(n), "kind": "none"}
    if rows.size >= 0.9 * n:
        kind = "whole-buffer"
    elif rows.size == 1:
        kind = "single-row"
    else:
        kind = "contiguous" if rows[-1] - rows[0] + 1 == rows.size else "sparse"
    return {"count": int(rows.size), "first": int(rows[0]), "last": int(rows[-1]), "rows": int(n),
            "kind": kind}


def _ood_points(shape, z):
    zf = np.asarray(z, np.uint64).reshape(4, 1)
    z_next = F.ef_mul_base(zf, F.root_of_unity(shape.log_n)).reshape(4)
    return np.asarray(z, np.uint64), z_next


def _host_recompute(stages, st, i, ch, alpha, z):
    """The table's R1..R3 on the host with the proof's own challenges."""
    hs = HostStages()
    air, shape, pv = st.airs[i], st.shapes[i], st.public_values[i]
    main = hs.main_commit(st.traces[i], shape)
    prep = hs.prep_lde(air, shape)
    aux = terminal = None
    if shape.aux_cols:
        aux_np, terminal = hs.aux_build(air, shape, st.traces[i], pv, ch.challenges)
        aux = hs.aux_commit(aux_np, shape)
    q = hs.quotient(air, shape, main, prep, aux, pv, ch.challenges, alpha, terminal)
    blocks = decompose(q, shape)
    parts = SimpleNamespace(coeffs=blocks)
    zn, z_next = _ood_points(shape, z)
    mats = {"main": main, "aux": aux, "parts": parts}
    ood = {(m, nx): hs.ood(mats[m], z_next if nx else zn) for m, nx in deep_groups(shape)}
    return {"main": main, "aux": aux, "q": q, "blocks": blocks, "ood": ood, "terminal": terminal}


def _device_view(stages, h):
    if h is None:
        return None
    return np.array(stages.engine.download_view(h.device())) if h.on_device else h.host()


def _rerun_device_chain(stages, st, i, ch, alpha, z, resident: bool):
    """Rerun R1..R3 of table i on the device with the same challenges; returns the
    opened values.  ``resident``: reuse the resident LDE buffers (the suspected inputs)
    instead of recomputing them from the uploaded trace."""
    eng, mem = stages.engine, stages.mem
    air, shape, pv = st.airs[i], st.shapes[i], st.public_values[i]
    out = stages.table(shape.name).outputs
    temps = []

    def commit(evals_T_dev, tag):
        c, l, nd, root = eng.lde_commit(mem, evals_T_dev, shape, tag)
        temps.extend([c, l, nd])
        return SimpleNamespace(lde_h=SimpleNamespace(device=lambda l=l: l), coeffs_dev=c)

    # no fault fires during the rerun -- on this thread only (the other tables keep their
    # faults: issue #28.6)
    with stages.no_injection(), stages.submission_lock():
        try:
            if resident:
                main = SimpleNamespace(lde_h=out["main"].lde_h, coeffs_dev=out["main"].coeffs_h.device())
            else:
                main = commit(out["trace"].device(), f"{shape.name}/rerun_main")
            aux = terminal = None
            if shape.aux_cols:
                if resident and "aux" in out:
                    aux = SimpleNamespace(lde_h=out["aux"].lde_h, coeffs_dev=out["aux"].coeffs_h.device())
                    terminal = None
                trace = np.ascontiguousarray(eng.download_view(out["trace"].device()).T)
                aux_res, terminal = eng.aux_build(stages, air, shape, trace, pv, ch.challenges,
                                                  trace_dev=out["trace"].device())
                if isinstance(aux_res, DeviceArray):
                    up = aux_res
                else:
                    up = mem.to_device(np.ascontiguousarray(aux_res.T), tag=f"{shape.name}/rerun_aux")
                temps.append(up)
                if aux is None:
                    aux = commit(up, f"{shape.name}/rerun_aux")
            prep = HostStages.prep_lde(stages, air, shape)
            # the rerun's R2 window takes the R2 lock like every device R2 (issue #28.7): with
            # serialisation on, a race cannot reappear in the rerun and pass for a persistent
            # fault
            r2_lock = R2_LOCK if stages.serialize_r2 else NULL_LOCK
            with r2_lock:
                q_d, blocks_d = eng.quotient_decompose(stages, air, shape, main, prep, aux, pv,
                                                       ch.challenges, alpha, terminal)
            temps.extend([q_d, blocks_d])
            zn, z_next = _ood_points(shape, z)
            mats = {"main": main.coeffs_dev, "aux": aux.coeffs_dev if aux else None, "parts": blocks_d}
            ood = {(m, nx): eng.ood(mats[m], z_next if nx else zn) for m, nx in deep_groups(shape)}
            return ood, terminal
        finally:
            for t in temps:
                mem.free(t)


def cross_check(stages, st, i, r1, ch, aux, r2, r3, cfg) -> None:
    """Run the composition check for table i; on a mismatch write the post-mortem and raise."""
    air, shape, pv = st.airs[i], st.shapes[i], st.public_values[i]
    if composition_ok(air, shape, r3.values, aux.terminal, pv, ch.challenges, r2.alpha, r3.z):
        return
    t0 = time.perf_counter()
    name = shape.name
    stages.timeline.instant("xcheck:mismatch", name, cat="xcheck")
    report = {**_report_head(stages, name, "composition at z (R3)"),
              "r2_window_overlapped": any(stages.r2_windows.overlapped(w)
                                          for w in stages.r2_windows.windows if w.table == name)}
    host = _host_recompute(stages, st, i, ch, r2.alpha, r3.z)
    out = stages.table(name).outputs
    comparisons = []
    if "main" in out:
        comparisons.append(("lde", _device_view(stages, out["main"].lde_h), host["main"].lde, 1))
    if shape.aux_cols and "aux" in out:
        comparisons.append(("aux", _device_view(stages, out["aux"].lde_h), host["aux"].lde, 1))
    if "quotient" in out:
        comparisons.append(("constraints", _device_view(stages, out["quotient"]), host["q"], 1))
        comparisons.append(("decomposition", _device_view(stages, out["parts_coeffs"]),
                            host["blocks"], 1))
    ood_dev = np.concatenate([r3.values[k] for k in deep_groups(shape)])
    ood_host = np.concatenate([host["ood"][k] for k in deep_groups(shape)])
    comparisons.append(("ood", ood_dev, ood_host, 0))
    stage_reports = {}
    diverged = None
    for stage, dev, ref, axis in comparisons:
        shp = corruption_shape(dev, ref, axis)
        stage_reports[stage] = {"matches_host": shp["count"] == 0, "differing_rows": shp}
        if diverged is None and shp["count"]:
            diverged = stage
    report["diverged_stage"] = diverged or "none (outputs match the host; check inputs)"
    report["stages"] = stage_reports
    bad = stages.integrity(name)
    report["resident_inputs_corrupted"] = [h.stage for h in bad]
    try:
        ood2, term2 = _rerun_device_chain(stages, st, i, ch, r2.alpha, r3.z, resident=bool(bad))
        clean = composition_ok(air, shape, ood2, term2 if term2 is not None else aux.terminal, pv,
                               ch.challenges, r2.alpha, r3.z)
        report["rerun"] = {"on": "resident inputs" if bad else "fresh buffers from the uploaded trace",
                           "clean": bool(clean)}
    except Exception as exc:        # a rerun that cannot run still leaves a verdict
        clean = None
        report["rerun"] = {"error": f"{type(exc).__name__}: {exc}"}
    if bad:
        verdict = "corrupted resident input"
    elif clean:
        verdict = "transient race"
    elif clean is None:
        verdict = "unknown (rerun failed)"
    else:
        verdict = "persistent device fault"
    report["verdict"] = verdict
    report["recovery"] = _recovery(stages, name, cfg, "the table's chain recomputed on the host (the "
                                   "whole proof, when one of its committed matrices is "
                                   "not the trace's)")
    report["postmortem_s"] = round(time.perf_counter() - t0, 3)
    path = write_postmortem(report, cfg.postmortem_dir)
    stages.timeline.instant("xcheck:verdict", name, cat="xcheck", verdict=verdict)
    raise XcheckFailure(f"XCHECK: table {name}: device composition mismatch "
                        f"(diverged at {report['diverged_stage']}; verdict: {verdict}); "
                        f"post-mortem: {path}", path, report)


def join_failure(stages, st, err, cfg) -> None:
    """XCHECK post-mortem of a device result the join's own check refused (e.g. a final
    polynomial of too high a degree: a wrong DQ, F or fold upstream); raises
    :class:`XcheckFailure`."""
    names = [s.name for s in st.shapes]
    bad = [f"{n}/{h.stage}" for n in names + [JOIN] for h in stages.integrity(n)]
    report = {**_report_head(stages, "join", f"self-verification of R4 ({err.check}: {err})"),
              "diverged_stage": f"r4 ({err.check})",
              "resident_inputs_corrupted": bad,
              "verdict": "corrupted resident input" if bad else "transient race",
              "recovery": _recovery(stages, JOIN, cfg, "the proof finished on the host")}
    path = write_postmortem(report, cfg.postmortem_dir)
    stages.timeline.instant("xcheck:verdict", "join", cat="xcheck", verdict=report["verdict"])
    raise XcheckFailure(f"XCHECK: the join refused a device result ({err}); verdict: "
                        f"{report['verdict']}; post-mortem: {path}", path, report) from err


def check_proof(stages, st, ch, forks, proof, cfg) -> None:
    """XCHECK for R4 (proof format 3), after the join and before any resident buffer is
    released: the verifier's checks of the whole finished proof (every section's
    openings and DEEP values at the queries, the one FRI, every multiproof, proofs of
    work), on its encoded bytes.  The composition at z of every table was checked after
    its R3 (:func:`cross_check`) on these same opened values.

    On a rejection the tables' trees and the join's layers are still resident, so the
    post-mortem tells a buffer corrupted while resident (``corrupted resident input``)
    from a wrong R4 result (``transient race``); the proof fails.  The post-mortem is
    filed under the table the verifier names, else under the join."""
    try:
        verify(encode(proof), st.airs, [list(pv) for pv in st.public_values],
               min_security_bits=0)
        return
    except VerificationError as exc:
        err = exc
    t0 = time.perf_counter()
    names = [s.name for s in st.shapes]
    named = getattr(err, "table", None)
    name = next((n for n, a in zip(names, st.airs) if named in (n, a.name)), "join")
    bad = [f"{n}/{h.stage}" for n in names + [JOIN] for h in stages.integrity(n)]
    check = f"self-verification of R4 ({type(err).__name__}: {err})"
    report = {**_report_head(stages, name, check),
              "diverged_stage": "r4 (" + {"FriError": "deep/fri", "MerkleError": "openings"}.get(
                  type(err).__name__, type(err).__name__) + ")",
              "resident_inputs_corrupted": bad,
              "verdict": "corrupted resident input" if bad else "transient race",
              "recovery": _recovery(stages, JOIN, cfg, "the proof finished on the host")}
    report["postmortem_s"] = round(time.perf_counter() - t0, 3)
    path = write_postmortem(report, cfg.postmortem_dir)
    stages.timeline.instant("xcheck:verdict", name, cat="xcheck", verdict=report["verdict"])
    raise XcheckFailure(f"XCHECK: the finished proof does not verify at table {name} ({err}); "
                        f"verdict: {report['verdict']}; post-mortem: {path}", path, report)


def _recovery(stages, name: str, cfg, action: str) -> str:
    """What the prover does after this post-mortem (docs/diagnostics.md, ``recovery``)."""
    if not getattr(cfg, "recover_corruption", False):
        return "none: the proof stops (PROVER_ABORT_ON_CORRUPTION=1, or the pipeline's default)"
    if name != JOIN and getattr(stages.table(name), "recomputed", False):
        return "none: the table was already recomputed on the host in this proof; the proof stops"
    return action


def _report_head(stages, name: str, check: str) -> dict:
    """The fields every post-mortem starts with (docs/diagnostics.md)."""
    return {"table": name, "backend": stages.name, "proof_epoch": stages.mem.epoch,
            "check": check, "faults": os.environ.get("PROVER_FAULTS", ""),
            "serialize_r2": stages.serialize_r2}


# What a post-mortem belongs to beyond its check's own fields: the prover sets the proof's
# parameters while it proves, the CLI the block file, its sha256 and the device's name.
POSTMORTEM_CONTEXT: dict = {}


POSTMORTEM_ENV = "PROVER_POSTMORTEM_DIR"


def postmortem_dir(directory: str | os.PathLike[str] | None = None) -> str:
    """Where post-mortems go: ``directory`` (``ProverConfig.postmortem_dir``,
    ``--postmortem-dir``) if given, else ``$PROVER_POSTMORTEM_DIR`` if set and non-empty,
    else ``$XDG_STATE_HOME/steadfast/postmortems`` (``~/.local/state/steadfast/postmortems``
    when ``XDG_STATE_HOME`` is unset or empty).  Nothing is created here."""
    if directory is not None and os.fspath(directory) != "":
        return os.path.expanduser(os.fspath(directory))
    env = os.environ.get(POSTMORTEM_ENV, "").strip()
    if env:
        return os.path.expanduser(env)
    base = (os.environ.get("XDG_STATE_HOME", "").strip()
            or os.path.join(os.path.expanduser("~"), ".local", "state"))
    return os.path.join(base, "steadfast", "postmortems")


def _write_json(directory: str, name: str, full: dict) -> str:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name)
    atomic_write(Path(path), json.dumps(full, indent=2).encode())    # never a torn file
    return path


def write_postmortem(report: dict, directory: str | os.PathLike[str] | None = None) -> str | None:
    """Write ``report`` as JSON, with the package version, a timestamp and
    :data:`POSTMORTEM_CONTEXT` (the report's own fields win); atomically (a temporary
    file renamed into place): a reader never sees half a post-mortem.

    The directory is :func:`postmortem_dir` of ``directory`` (config > env > default),
    created (0700) on first write.  If it cannot be created or written, a warning names it
    and the error and the post-mortem goes to the temporary directory
    (:func:`tempfile.gettempdir`) instead; only if that fails too is it lost, with an
    error logged (and ``None`` returned) -- a post-mortem never crashes the proof.  Each
    post-mortem written is logged once at WARNING (logger ``steadfast.prover``) with its
    path."""
    import logging
    import tempfile
    from steadfast import __version__
    log = logging.getLogger("steadfast.prover")
    full = {"steadfast_version": __version__, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    full.update(POSTMORTEM_CONTEXT)
    full.update(report)
    # a block's tables are named tx{i}/...: the file name keeps only safe characters
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(report["table"]))
    name = f"steadfast-postmortem-{safe}-{os.getpid()}-{int(time.time() * 1000)}.json"
    target = postmortem_dir(directory)
    try:
        path = _write_json(target, name, full)
    except (OSError, TypeError, ValueError) as exc:
        fallback = tempfile.gettempdir()
        log.warning("post-mortem directory %s is not usable (%s: %s); writing to %s instead",
                    target, type(exc).__name__, exc, fallback)
        try:
            path = _write_json(fallback, name, full)
        except (OSError, TypeError, ValueError) as exc2:
            log.error("post-mortem lost: could not write %s in %s (%s) nor in %s (%s)",
                      name, target, exc, fallback, exc2)
            return None
    log.warning("post-mortem written: %s", path)
    return path


__all__ = ["XcheckFailure", "postmortem_dir", "write_postmortem", "cross_check", "check_proof",
           "join_failure", "composition_ok", "corruption_shape", "lde_matches_leaves", "tree_consistent", "SHIFT"]
