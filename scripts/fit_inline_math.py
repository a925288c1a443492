#!/usr/bin/env python3
"""Fits the coefficients of the LLVM emitter's inline f32 exp and erf (src/codegen/llvm/inline_math.cpp).

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


def fit_erf(iters=60):
    x = chebyshev_grid(0, ERF_LIMIT, 40001)
    x = x[x > 1e-4]
    t, f = x * x, erf(x) / x
    q_prev = np.ones_like(t)
    w = np.full(len(t), 1.0 / len(t))
    for _ in range(iters):
        # P(t) - f (Q(t) - 1) = f, weighted by 1 / (f Q_prev): relative error of P / Q.
        design = np.concatenate([np.stack([t**k for k in range(6)], 1),
                                 np.stack([-f * t**k for k in range(1, 6)], 1)], 1)
        sw = np.sqrt(w) / (f * q_prev)
        c, *_ = np.linalg.lstsq(design * sw[:, None], f * sw, rcond=None)
        p, q = c[:6], np.concatenate([[1.0], c[6:]])
        q_prev = np.polyval(q[::-1], t)
        err = np.abs(np.polyval(p[::-1], t) / q_prev - f) / f
        w = w * err
        w /= w.sum()
    return [f32(v) for v in p], [f32(v) for v in q]


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


if __name__ == "__main__":
    main()
