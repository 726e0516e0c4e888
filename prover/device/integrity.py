"""Integrity of resident buffers (XCHECK's post-mortem): which of a table's device buffers
changed after the stage that produced them.

Only the smaller buffers carry an integrity tag (a checksum taken at production by
:meth:`prover.device.stages.DeviceStages._seal`: coefficients, the quotient and its parts,
FRI layers; the aux trace is released after its commit).  The largest are checked here,
on a failure only, against what they must agree with:

* the uploaded trace against the prover's host input;
* a Merkle tree against itself (its inner nodes rebuilt from its leaves:
  :func:`tree_consistent`);
* an LDE against its (self-consistent) tree's leaves, rehashed from the LDE
  (:func:`lde_matches_leaves`).  The tree was built from the LDE as it was produced, so an
  LDE that no longer hashes to its leaves changed while resident.  A *wrong* LDE committed
  as produced (a transient fault in the stage) still matches its tree, and is not
  reported.
"""
from __future__ import annotations

import numpy as np

from ...kernels.backend import DeviceOOM, as_device_oom
from ...kernels.hostlib import checksum_words
from ...kernels.merkle import MerkleTree, commit

from ..core.stages import _bitrev_rows


def changed_handles(st, engine) -> list:
    """The handles of the table state ``st`` (prover.device.residency.TableState) whose
    device copy no longer agrees with what its stage produced (see the module docstring).
    The caller holds the backend's submission lock (checksum kernels are launches too)."""
    bad = []
    lde_of = {}                         # prefix -> the latest LDE (made before its tree)
    for h in st.handles:
        if h.stage.endswith("_lde"):
            lde_of[h.stage[:-len("_lde")]] = h
        if not h.on_device:
            continue
        tag = st.tags.get(id(h))
        if tag is not None:
            if checksum_anyway(engine, h) != tag:
                bad.append(h)
        elif h.stage in st.host_inputs:
            ref = np.asarray(st.host_inputs[h.stage])
            if not np.array_equal(np.asarray(engine.download_view(h.device())), ref.T):
                bad.append(h)
        elif h.stage.endswith("_tree"):
            nodes = np.asarray(engine.download_view(h.device()))
            if not tree_consistent(nodes):
                bad.append(h)
            else:
                lde = lde_of.get(h.stage[:-len("_tree")])
                if lde is not None and lde.on_device and not lde_matches_leaves(
                        np.asarray(engine.download_view(lde.device())), nodes):
                    bad.append(lde)
    return bad


def checksum_anyway(engine, h) -> tuple:
    """A post-mortem's integrity tag of a resident buffer: reduced on the device, or
    (when the device has no room for the reduction's partials) on a downloaded copy
    -- the same pair; a post-mortem must not fail for a transient device condition."""
    try:
        return engine.checksum(h.device())
    except Exception as raw:
        if not isinstance(raw, DeviceOOM) and as_device_oom(raw) is None:
            raise
        return checksum_words(np.asarray(engine.download_view(h.device())))


def tree_consistent(nodes: np.ndarray) -> bool:
    """A flat Merkle node array (leaves first, root last) whose inner nodes all equal
    the compression of their children."""
    n = (nodes.shape[0] + 1) // 2
    try:
        rebuilt = MerkleTree.from_digests(np.ascontiguousarray(nodes[:n])).nodes
    except ValueError:                  # a leaf that is not a field element (poison)
        return False
    return bool(np.array_equal(rebuilt, nodes))


def lde_matches_leaves(lde_T: np.ndarray, nodes: np.ndarray) -> bool:
    """The leaves of a tree (flat nodes, leaves first) equal the digests of the LDE's
    committed rows (natural columns (c, N) -> bit-reversed rows)."""
    n = lde_T.shape[1]
    if (nodes.shape[0] + 1) // 2 != n:
        return False
    try:
        leaves = commit(_bitrev_rows(lde_T)).nodes[:n]
    except ValueError:                  # an element that is not a field element (poison)
        return False
    return bool(np.array_equal(leaves, nodes[:n]))


__all__ = ["changed_handles", "checksum_anyway", "tree_consistent", "lde_matches_leaves"]
