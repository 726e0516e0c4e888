"""The slotted tables' shapes, pinned: (table, LogUp degree cap, k slots) -> (main width,
committed cells per row), what :func:`rv32.tables._slot_shape` would otherwise build an
AIR for.  Choosing a table's slots (``choose_slots``) and reading them back from a proof's
widths (``slots_from_widths``) ask for every k of a table's menu; building those AIRs only
to read two numbers cost a warm ``prove`` / ``verify`` of a small block about 0.1-0.2 s.

tests/test_rv32_airs.py::test_pinned_slot_shapes rebuilds every entry and fails when a
chip's AIR changes without this table (regenerate with
``python -m steadfast.rv32.slot_shapes``); a shape missing here is built as before.
"""
from __future__ import annotations

SHAPES = {
    ('alu', 3, 1): (34, 82),
    ('alu', 3, 2): (68, 152),
    ('alu', 3, 3): (102, 226),
    ('alu', 3, 4): (136, 296),
    ('bitwise', 3, 1): (37, 85),
    ('bitwise', 3, 2): (74, 158),
    ('bitwise', 3, 3): (111, 235),
    ('bitwise', 3, 4): (148, 308),
    ('shift', 3, 1): (52, 108),
    ('shift', 3, 2): (104, 208),
    ('shift', 3, 3): (156, 308),
    ('shift', 3, 4): (208, 408),
    ('branch', 3, 1): (31, 71),
    ('branch', 3, 2): (62, 134),
    ('branch', 3, 3): (93, 197),
    ('branch', 3, 4): (124, 260),
    ('load', 3, 1): (38, 86),
    ('load', 3, 2): (76, 164),
    ('load', 3, 3): (114, 242),
    ('load', 3, 4): (152, 320),
    ('store', 3, 1): (37, 85),
    ('store', 3, 2): (74, 162),
    ('store', 3, 3): (111, 239),
    ('store', 3, 4): (148, 316),
    ('jump', 3, 1): (25, 61),
    ('jump', 3, 2): (50, 114),
    ('jump', 3, 3): (75, 167),
    ('jump', 3, 4): (100, 220),
    ('mul', 3, 1): (52, 124),
    ('mul', 3, 2): (104, 240),
    ('mul', 3, 3): (156, 356),
    ('mul', 3, 4): (208, 472),
    ('div', 3, 1): (71, 155),
    ('div', 3, 2): (142, 302),
    ('div', 3, 3): (213, 449),
    ('div', 3, 4): (284, 596),
    ('poseidon2', 3, 1): (299, 311),
    ('poseidon2', 3, 2): (598, 610),
    ('poseidon2', 3, 3): (897, 913),
    ('alu', 5, 1): (34, 70),
    ('alu', 5, 2): (68, 124),
    ('alu', 5, 3): (102, 178),
    ('alu', 5, 4): (136, 228),
    ('bitwise', 5, 1): (37, 73),
    ('bitwise', 5, 2): (74, 130),
    ('bitwise', 5, 3): (111, 187),
    ('bitwise', 5, 4): (148, 240),
    ('shift', 5, 1): (52, 92),
    ('shift', 5, 2): (104, 168),
    ('shift', 5, 3): (156, 244),
    ('shift', 5, 4): (208, 320),
    ('branch', 5, 1): (31, 63),
    ('branch', 5, 2): (62, 110),
    ('branch', 5, 3): (93, 157),
    ('branch', 5, 4): (124, 204),
    ('load', 5, 1): (38, 74),
    ('load', 5, 2): (76, 132),
    ('load', 5, 3): (114, 190),
    ('load', 5, 4): (152, 248),
    ('store', 5, 1): (37, 73),
    ('store', 5, 2): (74, 130),
    ('store', 5, 3): (111, 187),
    ('store', 5, 4): (148, 244),
    ('jump', 5, 1): (25, 57),
    ('jump', 5, 2): (50, 94),
    ('jump', 5, 3): (75, 135),
    ('jump', 5, 4): (100, 172),
    ('mul', 5, 1): (52, 100),
    ('mul', 5, 2): (104, 184),
    ('mul', 5, 3): (156, 268),
    ('mul', 5, 4): (208, 352),
    ('div', 5, 1): (71, 127),
    ('div', 5, 2): (142, 234),
    ('div', 5, 3): (213, 345),
    ('div', 5, 4): (284, 452),
    ('poseidon2', 5, 1): (299, 311),
    ('poseidon2', 5, 2): (598, 610),
    ('poseidon2', 5, 3): (897, 913),
}


def measured() -> dict:
    """Every slotted table's shape at both LogUp caps, from its AIR (the test's side)."""
    from . import tables as T
    out = {}
    for lb in (1, 2):
        cap = T.logup_degree_cap(lb)
        for name in T.SLOTTED:
            for k in T.slot_menu(name):
                air = T.static_air(name, lb, k)
                out[(name, cap, k)] = (air.main_width, T.cells_per_row(air))
    return out


if __name__ == "__main__":          # pragma: no cover - regenerates the table above
    for key, v in measured().items():
        print(f"    {key!r}: {v!r},")
