#!/usr/bin/env python3
"""Fits the coefficients of the LLVM emitter's inline f32 exp, erf, tanh and log
(src/codegen/llvm/inline_math.cpp; log1p is log's).

Usage: python3 scripts/fit_inline_math.py   (needs numpy and scipy: .venv-torch has them)

Prints each coefficient as an f32 (the value inline_math.cpp writes) and the largest error of
the f32 evaluation, with fused multiply-adds as the emitter uses them (llvm.fmuladd on a host
with FMA; a host without FMA rounds twice, a fraction of an ULP more), against the function
in f64 over a dense grid.

exp: e^x = 2^k e^r, k = rint(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (Cody-Waite: ln 2 split
in two so that k * ln2_hi is exact); e^r = 1 + r + r^2 q(r), q a degree-4 polynomial fitted
for the least maximum relative error of e^r (Lawson's iteratively reweighted least squares).

erf: erf(x) = x P(x^2) / Q(x^2) for |x| <= 4, P and Q of degree 5, Q(0) = 1, fitted for the
least maximum relative error (Loeb's linearization, reweighted as above); |x| > 4 gives +-1, as
erf(4) = 1 - 1.5e-8 rounds to 1 in f32.

tanh: tanh(x) = x P(x^2) / Q(x^2) for |x| <= 9, P and Q of degree 4, fitted as erf's; |x| > 9
gives +-1 (tanh(9.01) rounds to 1 in f32).

log: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(m) = f + f^2 q(f), f = m - 1, q of degree 7 fitted
for the least maximum relative error of log1p(f), plus e ln 2 in the two parts of exp's.
"""
import numpy as np
from scipy.special import erf

ERF_LIMIT = 4.0


def lawson(design, target, weight, iters):
    """Coefficients c minimizing max |(design c - target) * weight| (reweighted least squares)."""
    w = np.full(len(target), 1.0 / len(target))
    for _ in range(iters):
        sw = np.sqrt(w) * weight
        c, *_ = np.linalg.lstsq(design * sw[:, None], target * sw, rcond=None)
        err = np.abs((design @ c - target) * weight)
        w = w * err
        w /= w.sum()
    return c


def chebyshev_grid(lo, hi, n):
    return np.cos(np.linspace(0, np.pi, n)) * (hi - lo) / 2 + (hi + lo) / 2


def f32(v):
    return np.float32(v)


def fma_horner(coeffs, t):
    """Horner's rule in f32 with a single rounding per step (a fused multiply-add)."""
    acc = np.full(t.shape, f32(coeffs[-1]), dtype=np.float32)
    t64 = t.astype(np.float64)
    for c in reversed(coeffs[:-1]):
        acc = (acc.astype(np.float64) * t64 + np.float64(f32(c))).astype(np.float32)
    return acc


def fma(a, b, c):
    return (a.astype(np.float64) * np.float64(b) + np.float64(c)).astype(np.float32)


def ulps(got, ref):
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))


def fit_exp():
    r = chebyshev_grid(-np.log(2) / 2, np.log(2) / 2, 20001)
    r = r[np.abs(r) > 1e-6]
    design = np.stack([r ** (k + 2) for k in range(5)], 1)
    return [f32(c) for c in lawson(design, np.expm1(r) - r, np.exp(-r), 200)]


LN2_HI = f32(0.693145751953125)  # 12 significant bits: k * LN2_HI is exact for |k| < 2^12
LN2_LO = f32(np.log(2) - 0.693145751953125)
SHIFTER = f32(1.5 * 2**23)


def exp32(x, q):
    x = np.clip(x, f32(-104.0), f32(89.0))
    t = fma(x, f32(1 / np.log(2)), SHIFTER)
    k = (t - SHIFTER).astype(np.float32)
    r = fma(k, -LN2_HI, x)
    r = fma(k, -LN2_LO, r)
    s = fma(r * r, 1.0, 0.0)  # r * r rounded
    p = (fma(s, fma_horner(q, r), r) + f32(1)).astype(np.float32)
    return np.ldexp(p.astype(np.float64), k.astype(np.int64)).astype(np.float32)


def fit_odd_rational(fn, limit, degree, iters):
    """P, Q (Q(0) = 1) of degree `degree` with x P(x^2) / Q(x^2) ~ fn(x) on (0, limit], for the
    least maximum relative error (Loeb's linearization, reweighted as lawson's)."""
    x = chebyshev_grid(0, limit, 40001)
    x = x[x > 1e-4]
    t, f = x * x, fn(x) / x
    q_prev = np.ones_like(t)
    w = np.full(len(t), 1.0 / len(t))
    n = degree + 1
    for _ in range(iters):
        # P(t) - f (Q(t) - 1) = f, weighted by 1 / (f Q_prev): relative error of P / Q.
        design = np.concatenate([np.stack([t**k for k in range(n)], 1),
                                 np.stack([-f * t**k for k in range(1, n)], 1)], 1)
        sw = np.sqrt(w) / (f * q_prev)
        c, *_ = np.linalg.lstsq(design * sw[:, None], f * sw, rcond=None)
        p, q = c[:n], np.concatenate([[1.0], c[n:]])
        q_prev = np.polyval(q[::-1], t)
        err = np.abs(np.polyval(p[::-1], t) / q_prev - f) / f
        w = w * err
        w /= w.sum()
    return [f32(v) for v in p], [f32(v) for v in q]


def fit_erf():
    return fit_odd_rational(erf, ERF_LIMIT, 5, 60)


TANH_LIMIT = 9.0


def fit_tanh():
    return fit_odd_rational(np.tanh, TANH_LIMIT, 4, 80)


def tanh32(x, p, q):
    xc = np.clip(x, f32(-TANH_LIMIT), f32(TANH_LIMIT))
    t = (xc * xc).astype(np.float32)
    y = (xc * (fma_horner(p, t) / fma_horner(q, t)).astype(np.float32)).astype(np.float32)
    y = np.clip(y, f32(-1), f32(1))
    return np.where(x > TANH_LIMIT, f32(1), np.where(x < -TANH_LIMIT, f32(-1), y))


LOG_LO, LOG_HI = np.sqrt(0.5) - 1, np.sqrt(2) - 1


def fit_log():
    f = chebyshev_grid(LOG_LO, LOG_HI, 40001)
    f = f[np.abs(f) > 1e-6]
    design = np.stack([f ** (k + 2) for k in range(8)], 1)
    return [f32(c) for c in lawson(design, np.log1p(f) - f, 1 / np.abs(np.log1p(f)), 200)]


def log32(x, q):
    """For x > 0 finite, as the emitter computes it (subnormals scaled by 2^23 first)."""
    sub = x < f32(1.17549435e-38)
    xs = np.where(sub, (x.astype(np.float64) * 2**23).astype(np.float32), x)
    bits = xs.view(np.int32).astype(np.int64)
    e = (bits - 0x3F3504F3) >> 23
    m = (bits - (e << 23)).astype(np.int32).view(np.float32)
    e = (e - np.where(sub, 23, 0)).astype(np.float32)
    f = (m - f32(1)).astype(np.float32)
    y = fma((f * f).astype(np.float32), fma_horner(q, f), f)
    y = fma(e, LN2_LO, y)
    return fma(e, LN2_HI, y)


def log1p32(x, q):
    """For x > -1 finite, as the emitter computes it."""
    u = (f32(1) + x).astype(np.float32)
    lost = (x - (u - f32(1)).astype(np.float32)).astype(np.float32)
    inverse = np.where(u < f32(2), (f32(2) - u).astype(np.float32), f32(0)).astype(np.float32)
    y = fma(lost, inverse, log32(u, q))
    return np.where(u == f32(1), x, y)


def erf32(x, p, q):
    xc = np.clip(x, f32(-ERF_LIMIT), f32(ERF_LIMIT))
    t = (xc * xc).astype(np.float32)
    y = (xc * (fma_horner(p, t) / fma_horner(q, t)).astype(np.float32)).astype(np.float32)
    return np.clip(y, f32(-1), f32(1))


def main():
    q = fit_exp()
    x = np.linspace(-87.3, 88.7, 4000001).astype(np.float32)
    u = ulps(exp32(x, q), np.exp(x.astype(np.float64)))
    print("exp: q(r) =", ", ".join(f"{float(c)!r}f" for c in q))
    print(f"  max error {u.max():.2f} ULP at x = {x[u.argmax()]!r} (normal results)")
    p, qq = fit_erf()
    x = np.concatenate([np.linspace(-5, 5, 4000001),
                        10.0 ** np.linspace(-30, 0, 200001)]).astype(np.float32)
    ref = erf(x.astype(np.float64))
    got = erf32(x, p, qq)
    u = ulps(got, ref)
    print("erf: P(t) =", ", ".join(f"{float(c)!r}f" for c in p))
    print("     Q(t) =", ", ".join(f"{float(c)!r}f" for c in qq))
    print(f"  max error {u.max():.2f} ULP at x = {x[u.argmax()]!r}, "
          f"max absolute error {np.abs(got - ref).max():.3g}")
    p, qq = fit_tanh()
    x = np.concatenate([np.linspace(-12, 12, 4000001),
                        10.0 ** np.linspace(-30, 0, 200001)]).astype(np.float32)
    u = ulps(tanh32(x, p, qq), np.tanh(x.astype(np.float64)))
    print("tanh: P(t) =", ", ".join(f"{float(c)!r}f" for c in p))
    print("      Q(t) =", ", ".join(f"{float(c)!r}f" for c in qq))
    print(f"  max error {u.max():.2f} ULP at x = {x[u.argmax()]!r}")
    q = fit_log()
    x = np.concatenate([10.0 ** np.linspace(-44, 38, 2000001),
                        np.linspace(0.5, 2, 2000001)]).astype(np.float32)
    x = x[x > 0]
    u = ulps(log32(x, q), np.log(x.astype(np.float64)))
    print("log: q(f) =", ", ".join(f"{float(c)!r}f" for c in q))
    print(f"  max error {u.max():.2f} ULP at x = {x[u.argmax()]!r} (x > 0 finite)")
    x = np.concatenate([-(10.0 ** np.linspace(-40, -1e-7, 1000001)),
                        10.0 ** np.linspace(-40, 30, 2000001),
                        np.linspace(-0.99, 3, 2000001)]).astype(np.float32)
    x = x[x > -1]
    u = ulps(log1p32(x, q), np.log1p(x.astype(np.float64)))
    print(f"log1p: max error {u.max():.2f} ULP at x = {x[u.argmax()]!r} (x > -1 finite)")


if __name__ == "__main__":
    main()
