"""galois' GF(p^4) = F_p[X]/(X^4 - 11) as the tests' independent reference for the extension
field, with conversions from and to our coefficient lists (c0..c3, low degree first)."""
import galois

from steadfast.kernels import field

P = field.P
GF = galois.GF(P)
_GF4 = []


def irreducible_poly():
    """X^4 - 11 over F_p, coefficients highest degree first."""
    return galois.Poly([1, 0, 0, 0, (-field.EXT_W) % P], field=GF)


def gf4():
    """The field (built on first use: a few seconds)."""
    if not _GF4:
        _GF4.append(galois.GF(P ** 4, irreducible_poly=irreducible_poly(), verify=False))
    return _GF4[0]


def to_gf4(c):
    # galois' integer representation is base p, highest coefficient first
    c = [int(x) for x in c]
    return gf4()(c[0] + c[1] * P + c[2] * P ** 2 + c[3] * P ** 3)


def from_gf4(x):
    v = int(x)
    return [(v // P ** i) % P for i in range(4)]
