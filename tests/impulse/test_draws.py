"""`impulse.draws`' logarithm and exponential: fdlibm's formulas in basic IEEE-754 operations, so a seed's
normal, exponential and Zipf values are the same bits on every machine (numpy's own log/exp/pow dispatch
SIMD code by CPU and differ by an ulp between machines and releases)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from impulse import draws
from impulse.draws import _C, _D, _INV_LN2, _LG, _LN2_HI, _LN2_LO, _P, _P_LOW  # the pinned constants


def fdlibm_log(x: float) -> float:
    """e_log.c's formula, one Python float at a time (each + − × ÷ correctly rounded, as IEEE-754 says)."""
    m, k = math.frexp(x)
    if m < math.sqrt(0.5):
        m, k = m * 2.0, k - 1
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6]))) + w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


def fdlibm_exp(x: float) -> float:
    """e_exp.c's formula, one Python float at a time."""
    k = round(x * _INV_LN2)
    hi = x - k * _LN2_HI
    lo = k * _LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (_P[0] + t * (_P[1] + t * (_P[2] + t * (_P[3] + t * _P[4]))))
    return math.ldexp(1.0 - ((lo - (r * c) / (2.0 - c)) - hi), k)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.view(np.int64) - b.view(np.int64))


@pytest.fixture(scope="module")
def log_inputs() -> np.ndarray:
    rng = np.random.default_rng(11)
    edges = [1.0, 2.0, 0.5, math.sqrt(0.5), np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0), 2.0 ** -54, 1e-300,
             5e-324, 1.7e308, 2.0 ** 40 + 0.5]
    return np.concatenate([rng.random(100_000), draws.open_uniform(draws.words(1, 0, 0, 100_000)),
                           np.exp(rng.uniform(-700.0, 700.0, 100_000)), 1.0 + rng.uniform(-1e-6, 1e-6, 50_000),
                           edges])


@pytest.fixture(scope="module")
def exp_inputs() -> np.ndarray:
    rng = np.random.default_rng(12)
    return np.concatenate([rng.uniform(-700.0, 700.0, 100_000), rng.uniform(-1.0, 1.0, 50_000),
                           [0.0, 1e-300, -1e-300, 709.0, -700.0]])


def test_log_is_within_one_ulp_of_the_c_library(log_inputs):
    got = draws.log(log_inputs)
    want = np.array([math.log(v) for v in log_inputs])
    assert ulps(got, want).max() <= 1


def test_exp_is_within_one_ulp_of_the_c_library_and_saturates(exp_inputs):
    got = draws.exp(exp_inputs)
    want = np.array([math.exp(v) for v in exp_inputs])
    assert ulps(got, want).max() <= 1
    assert list(draws.exp(np.array([710.0, 1e6, -746.0, -1e6]))) == [math.inf, math.inf, 0.0, 0.0]


def test_log_and_exp_are_the_pinned_formula_bit_for_bit(log_inputs, exp_inputs):
    """The vectorised functions equal fdlibm's formula evaluated one value at a time in Python floats: only
    correctly rounded operations, so no CPU-dependent function (numpy's or the C library's) is involved."""
    assert draws.log(log_inputs).tolist() == [fdlibm_log(v) for v in log_inputs.tolist()]
    assert draws.exp(exp_inputs).tolist() == [fdlibm_exp(v) for v in exp_inputs.tolist()]


def test_the_transforms_use_the_pinned_functions():
    """exponential, the normal's tails and Zipf's inverse are computed from `draws.log`/`draws.exp`: with
    those replaced, their values change (and only the tails of the normal do)."""
    x = draws.words(draws.stream_key(0, "c", "value"), 0, 0, 200_000)
    u = draws.uniform(x)
    assert draws.exponential(x, 2.0).tolist() == [0.0 - 2.0 * fdlibm_log(1.0 - v) for v in u.tolist()]
    p = draws.open_uniform(x)
    tails = np.abs(p - 0.5) > 0.5 - _P_LOW
    z = draws.normal(x)
    for v, got in zip(p[tails].tolist(), z[tails].tolist()):
        t = math.sqrt(-2.0 * fdlibm_log(1.0 - v if v > 0.5 else v))
        c = (((((_C[0] * t + _C[1]) * t + _C[2]) * t + _C[3]) * t + _C[4]) * t + _C[5])
        d = ((((_D[0] * t + _D[1]) * t + _D[2]) * t + _D[3]) * t + 1.0)
        assert got == (-(c / d) if v > 0.5 else c / d)
    zipf = draws.Zipf(1_000_000, 1.1)
    v = u * zipf.total
    tail = v >= zipf.head_mass
    want = [math.floor(fdlibm_exp(fdlibm_log((1.0 - 1.1) * (zipf.tail_from + (y - zipf.head_mass))) / (1.0 - 1.1)) + 0.5) - 1
            for y in v[tail].tolist()]
    assert zipf.ranks(x)[tail].tolist() == [min(max(r, 0), 999_999) for r in want]
