"""Counter-based random numbers: every draw a pure function of (stream key, partition, event counter).

This is the algorithm a ``seed`` stands for; it is pinned, and a change to it is a change of what a
seed means (say so in the release notes).

**Streams.** A stream is Philox4x64-10 (``numpy.random.Philox``: numpy keeps every bit generator's
output stable across releases) keyed by ``[stream key, subtask_index]``. The stream key is the first
8 bytes (little endian) of ``blake2b("<seed>/<column>/<purpose>")``, so columns, purposes (the value,
its null mask, its length…) and partitions draw from independent streams. Event ``c`` of a partition
owns words ``[c·w, (c+1)·w)`` of its stream, ``w`` fixed per stream: a batch starting at event ``c``
advances the generator by ``c·w // 4`` blocks and drops ``c·w % 4`` words. No transform below ever
draws a variable number of words, so no value depends on batch boundaries, restarts or the machine.

**Transforms** of one 64-bit word ``x`` (vectorised; IEEE-754 double arithmetic):

- `uniform`: ``(x >> 11) · 2⁻⁵³`` in [0, 1); `open_uniform`: ``((x >> 11) + 0.5) · 2⁻⁵³`` in (0, 1);
- `integers` in ``[lo, hi]``: ``lo + ⌊uniform · span⌋`` when the span is at most 2⁵³, else
  ``lo + x mod span`` (bias below span / 2⁶⁴);
- `normal`: Acklam's rational approximation of the inverse normal CDF (relative error < 1.15e-9) at
  `open_uniform`; `exponential`: ``−mean · ln(1 − uniform)``;
- `Zipf` ranks: the first ``min(N, 256)`` ranks by their exact cumulative weights, the rest by
  inverting the midpoint integral of ``t⁻ˢ`` (each rank r > 256 carries ``∫ t⁻ˢ dt`` over
  ``[r − ½, r + ½]``, within 1e-5 of ``r⁻ˢ``);
- `choice` with weights: the first index whose cumulative weight share exceeds `uniform`.

**Logarithms and exponentials** (`log`, `exp`; ``xʸ`` is ``exp(y · log x)``) are fdlibm's formulas
(``e_log.c``, ``e_exp.c``: argument reduction by a power of two or a multiple of ln 2, then a fixed
polynomial; < 1 ulp) evaluated with basic IEEE-754 operations only (``+ − × ÷``, exact scaling by powers
of two, rounding to an integer), never numpy's or the C library's ``log``/``exp``/``pow``: those differ
by an ulp between CPUs (numpy dispatches SIMD implementations by CPU features) and between releases.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

__all__ = ["stream_key", "words", "words_at", "uniform", "open_uniform", "integers", "normal", "exponential", "zipf",
           "choice", "Table", "log", "exp"]

_SHIFT = np.uint64(11)
_TWO_M53 = 2.0 ** -53


def stream_key(seed: int, column: str, purpose: str) -> int:
    """The 64-bit key of one stream: `column` is the lower-cased column name, `purpose` what it draws."""
    digest = hashlib.blake2b(f"{seed}/{column}/{purpose}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def words(key: int, subtask: int, first: int, count: int, per_event: int = 1) -> np.ndarray:
    """The words of events ``[first, first + count)`` of one stream: uint64, shape (count,) or (count, per_event)."""
    start = first * per_event
    generator = np.random.Philox(key=np.array([key, subtask], dtype=np.uint64))
    generator.advance(start // 4)
    raw = generator.random_raw(count * per_event + start % 4)[start % 4:]
    return raw if per_event == 1 else raw.reshape(count, per_event)


_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def words_at(key: int, numbers: np.ndarray, per_event: int = 1) -> np.ndarray:
    """Words of arbitrary (not consecutive) event numbers: shape (len(numbers), per_event), uint64.

    Word ``j`` of event ``c`` is output ``c·per_event + j`` (0-based) of SplitMix64 seeded with `key`:
    ``mix(key + (c·per_event + j + 1)·γ)`` with γ = 0x9E3779B97F4A7C15 and Stafford's mix13 finaliser,
    in wrapping 64-bit arithmetic. A pure function of (key, c, j), computed for any set of events at the
    cost of those events alone (`words` draws a consecutive range; a strided subset would cost the range).
    """
    index = numbers.astype(np.uint64)[:, None] * np.uint64(per_event)
    index = index + (np.arange(per_event, dtype=np.uint64) + np.uint64(1))
    z = index * _GAMMA
    z += np.uint64(key)
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def uniform(x: np.ndarray) -> np.ndarray:
    """Doubles in [0, 1) from the top 53 bits."""
    out = (x >> _SHIFT).astype(np.float64)
    out *= _TWO_M53
    return out


def open_uniform(x: np.ndarray) -> np.ndarray:
    """Doubles in (0, 1): never 0 or 1, for transforms with a logarithm."""
    out = (x >> _SHIFT).astype(np.float64)
    out += 0.5
    out *= _TWO_M53
    return out


def integers(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Integers in ``[lo, hi]`` (int64; ``lo ≤ hi``, both within int64)."""
    span = hi - lo + 1
    if span <= 2 ** 53:
        out = np.floor(uniform(x) * span).astype(np.int64)
        np.minimum(out, span - 1, out=out)
    elif span >= 2 ** 64:
        return x.view(np.int64).copy()
    else:
        out = (x % np.uint64(span)).astype(np.int64)  # wraps for offsets ≥ 2⁶³, undone by the addition below
    out += np.int64(lo)  # int64 arithmetic wraps: lo + (x mod span) lands in [lo, hi] even past 2⁶³
    return out


# fdlibm's e_log.c and e_exp.c constants.
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
       1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)
_INV_LN2 = 1.44269504088896338700e+00
_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
      -1.65339022054652515390e-06, 4.13813679705723846039e-08)
_SQRT_HALF = 0.7071067811865476
_EXP_MAX, _EXP_MIN = 7.09782712893383973096e+02, -7.45133219101941108420e+02


_BLOCK = 16_384  # values per step of `log` and `exp`: their ~20 temporaries stay in the CPU cache


def _blockwise(function, x) -> np.ndarray:
    x = np.array(x, dtype=np.float64, ndmin=1)
    if len(x) <= _BLOCK:
        return function(x)
    out = np.empty_like(x)
    for lo in range(0, len(x), _BLOCK):
        out[lo:lo + _BLOCK] = function(x[lo:lo + _BLOCK])
    return out


def log(x: np.ndarray) -> np.ndarray:
    """Natural logarithm of positive finite doubles, the same bits on every machine (module docstring)."""
    return _blockwise(_log, x)


def exp(x: np.ndarray) -> np.ndarray:
    """e to the power of finite doubles, the same bits on every machine (module docstring); 0 below
    −745.13, inf above 709.78."""
    return _blockwise(_exp, x)


def _log(x: np.ndarray) -> np.ndarray:
    f, k = np.frexp(x)  # x = m · 2^k, m in [0.5, 1)
    low = f < _SQRT_HALF
    f += f * low  # doubled below √½: m in [√½, √2)
    dk = k.astype(np.float64)
    dk -= low
    f -= 1.0  # f = m - 1, exact
    s = f + 2.0
    np.divide(f, s, out=s)
    z = s * s
    w = z * z
    r = _horner(_LG[6:3:-2], w, _LG[2])  # ((L7 w + L5) w + L3)
    r *= w
    r += _LG[0]
    r *= z
    t = _horner(_LG[5:2:-2], w, _LG[1])  # (L6 w + L4) w + L2
    t *= w
    r += t
    hfsq = f * f
    hfsq *= 0.5
    r += hfsq
    r *= s
    t = dk * _LN2_LO
    r += t  # s · (hfsq + R) + k · ln2_lo
    np.subtract(hfsq, r, out=r)
    r -= f
    dk *= _LN2_HI
    dk -= r
    return dk


def _exp(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, _EXP_MIN - 1.0, _EXP_MAX + 1.0)
    k = x * _INV_LN2
    np.rint(k, out=k)
    hi = k * _LN2_HI
    np.subtract(x, hi, out=hi)  # exact: k · ln2_hi has at most 43 significant bits
    lo = k * _LN2_LO
    r = hi - lo
    t = r * r
    c = _horner(_P[::-1], t)
    c *= t
    np.subtract(r, c, out=c)  # c = r - t·P(t)
    y = r * c
    c -= 2.0
    np.divide(y, c, out=y)  # -(r·c / (2 - c))
    y += lo  # lo - r·c / (2 - c)
    y -= hi
    np.subtract(1.0, y, out=y)
    with np.errstate(over="ignore"):
        out = np.ldexp(y, k.astype(np.int32))
    out[x > _EXP_MAX] = np.inf
    out[x < _EXP_MIN] = 0.0
    return out


# Acklam's inverse normal CDF coefficients.
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
      4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
_P_LOW = 0.02425


def _horner(coefficients: tuple[float, ...], x: np.ndarray, last: float | None = None) -> np.ndarray:
    out = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        out *= x
        out += c
    if last is not None:
        out *= x
        out += last
    return out


def normal(x: np.ndarray, mean: float = 0.0, stddev: float = 1.0) -> np.ndarray:
    """Normal deviates by the inverse CDF: one word per value, no rejection."""
    p = open_uniform(x)
    q = p - 0.5
    r = q * q
    z = _horner(_A, r) * q / _horner(_B, r, 1.0)
    tails = np.abs(q) > 0.5 - _P_LOW
    if tails.any():
        pt = p[tails]
        upper = pt > 0.5
        t = np.sqrt(-2.0 * log(np.where(upper, 1.0 - pt, pt)))  # 1 - pt exact: pt > ½
        zt = _horner(_C, t) / _horner(_D, t, 1.0)
        z[tails] = np.where(upper, -zt, zt)
    if stddev != 1.0:
        z *= stddev
    if mean:
        z += mean
    return z


def exponential(x: np.ndarray, mean: float) -> np.ndarray:
    """Exponential deviates with the given mean (> 0)."""
    out = log(1.0 - uniform(x))  # 1 - u exact: u is a multiple of 2⁻⁵³
    out *= -mean
    out += 0.0  # -0.0 (u = 0) → 0.0
    return out


class Table:
    """``index(v)`` = how many entries of an ascending `cumulative` are ≤ v (``np.searchsorted(…, 'right')``),
    by a guide table: `v` picks one of ``16 × len`` equal buckets, which holds a known start index and at
    most `steps` entry boundaries. A few array passes instead of a binary search per value (what numpy's
    searchsorted costs even over 5 entries: bench/README.md, "Figures behind the code")."""

    def __init__(self, cumulative: np.ndarray) -> None:
        self.cumulative = np.asarray(cumulative, dtype=np.float64)
        self.total = float(self.cumulative[-1])
        self.buckets = max(64, 16 * len(self.cumulative))
        self.scale = self.buckets / self.total
        # one more bucket than needed: v · scale may round up to `buckets` for v just below the total
        edges = np.arange(self.buckets + 1, dtype=np.float64) / self.scale
        self.guide = np.searchsorted(self.cumulative, edges, side="right").astype(np.int64)
        self.steps = int(np.diff(self.guide).max()) + 1
        # padded[k] = cumulative[k - 1], with -inf before the first and +inf after the last entry
        self.padded = np.concatenate([[-np.inf], self.cumulative, [np.inf]])

    def index(self, v: np.ndarray) -> np.ndarray:
        k = self.guide[(v * self.scale).astype(np.int64)]
        k -= self.padded[k] > v  # a bucket edge that rounded past v
        for _ in range(self.steps):
            k += self.padded[k + 1] <= v
        return k


_HEAD = 256


class Zipf:
    """Ranks 0..N-1 where rank k has probability ∝ 1 / (k+1)^s (s ≥ 0); see the module docstring."""

    def __init__(self, cardinality: int, exponent: float) -> None:
        self.n, self.s = cardinality, exponent
        head = exp(-exponent * log(np.arange(1, min(cardinality, _HEAD) + 1, dtype=np.float64)))
        self.head = Table(np.cumsum(head))
        self.head_mass = self.head.total
        self.tail_from = self._integral(len(head) + 0.5)
        tail = self._integral(cardinality + 0.5) - self.tail_from if cardinality > _HEAD else 0.0
        self.total = self.head_mass + tail

    def _integral(self, t: float) -> float:
        """An antiderivative of t^-s."""
        ln = log(t)
        return float(ln[0] if self.s == 1.0 else exp((1.0 - self.s) * ln)[0] / (1.0 - self.s))

    def _inverse(self, y: np.ndarray) -> np.ndarray:
        return exp(y) if self.s == 1.0 else exp(log((1.0 - self.s) * y) / (1.0 - self.s))

    def ranks(self, x: np.ndarray) -> np.ndarray:
        """0-based ranks (int64) for the words `x`."""
        v = uniform(x) * self.total
        out = self.head.index(np.minimum(v, np.nextafter(self.head_mass, 0.0)))  # tail rows are replaced below
        tail = v >= self.head_mass
        if tail.any():
            t = self._inverse(self.tail_from + (v[tail] - self.head_mass))
            out[tail] = np.floor(t + 0.5).astype(np.int64) - 1
        np.clip(out, 0, self.n - 1, out=out)
        return out


@lru_cache(maxsize=64)
def zipf(cardinality: int, exponent: float) -> Zipf:
    """A cached `Zipf` (its head table is built once per Python process)."""
    return Zipf(cardinality, exponent)


@lru_cache(maxsize=256)
def _weights_table(weights: tuple[float, ...]) -> Table:
    cumulative = np.cumsum(weights, dtype=np.float64)
    return Table(cumulative / cumulative[-1])


def choice(x: np.ndarray, weights: tuple[float, ...] | None, count: int) -> np.ndarray:
    """Indices in ``[0, count)``: uniform, or with probability ∝ `weights` (the first index whose
    cumulative share exceeds `uniform`)."""
    if weights is None:
        return integers(x, 0, count - 1)
    return _weights_table(tuple(weights)).index(uniform(x))
