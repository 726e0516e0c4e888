"""Which tables the device stages accept: each recovery site's dispatch check (kernel
limits) and the device-only gate.

A device stage whose check fails declines with ``DeviceOOM`` and the table recovers on
the host (prover.device.recovery); :func:`device_gate` is the conjunction of every check and the
table's estimated bytes against the budget, so a table the gate admits to device-only
mode is accepted by every dispatch.
"""
from __future__ import annotations

#: what each site's device dispatch requires of a table's shape
MAX_DEVICE_LOG_LDE = 27            # twiddle tables / the field's two-adicity
DISPATCH_CHECKS = {
    "r1.main": lambda s: 1 <= s.log_n and s.log_lde <= MAX_DEVICE_LOG_LDE and s.main_width >= 1,
    "r1.aux": lambda s: s.aux_cols == 0 or s.aux_width >= 4,
    "r2": lambda s: s.log_n <= s.log_quotient <= s.log_lde,
    "r2.tree": lambda s: 1 <= s.num_parts <= (1 << s.log_blowup),
    "r3": lambda s: s.log_n >= 1,
    "r4.deep": lambda s: s.log_lde <= MAX_DEVICE_LOG_LDE,
    "r4.fri": lambda s: s.log_lde <= MAX_DEVICE_LOG_LDE,       # the join's fold kernel
    "r4.open": lambda s: s.log_lde <= 62,
}


def dispatch_ok(site: str, shape) -> bool:
    return bool(DISPATCH_CHECKS[site](shape))


def declined_sites(shape) -> frozenset:
    """The sites whose device dispatch does not accept this table (found once per table by
    :meth:`prover.device.stages.DeviceStages._run`)."""
    return frozenset(site for site, ok in DISPATCH_CHECKS.items() if not ok(shape))


def device_gate(shape, budget: int | None, estimate: int) -> bool:
    """Device-only mode (no host copies) for this table: every dispatch accepts it and its
    estimated device bytes fit the budget."""
    return all(dispatch_ok(site, shape) for site in DISPATCH_CHECKS) and \
        (budget is None or estimate <= budget)


__all__ = ["MAX_DEVICE_LOG_LDE", "DISPATCH_CHECKS", "dispatch_ok", "declined_sites",
           "device_gate"]
