"""The support-aware step of the P_R descent: one sequential-QP model of phi around p.

phi(p) = 1/2 ||v*(p)||^2 is the value of an SVM whose features z_i(p) = X_i^T softmax(X_i p)
depend on p. A Newton step at a fixed support (tried and removed: docs/decisions.md, "Newton
steps removed") is wrong as soon as a sample enters or leaves the support, which on lifted
digit patches happens at nearly every step. The model here keeps all n margin constraints,
linearised in (v, p) around the current pair, and the exact second derivatives of the
Lagrangian (docs/theory.md, "Support-aware SQP step"):

    minimise over (v, dp)   1/2 ||v||^2 + (v - v0)^T C dp + 1/2 dp^T P dp
                            + mu/2 (||p + dp||^2 - ||p||^2) + 1/(2t) ||dp||^2
    subject to              y_i (z_i^T v + (D_i u_i)^T X_i dp) >= 1   for every i,
                            -<p, dp> >= -(R^2 - ||p||^2) / 2           (the ball, linearised)

with D_i = diag(s_i) - s_i s_i^T, u_i = X_i v0, e_i = alpha_i y_i the current multipliers,
C = -sum_i e_i X_i^T D_i X_i and P = -sum_i e_i X_i^T (F_i D_i) X_i (F_i = diag(u_i - f_i)
- s_i u_i^T) the Lagrangian's cross and p-p blocks, mu the ball's multiplier and t > 0 the
proximal (trust-region) parameter. Any sample may become active or inactive in the QP, so the
step models the support changing; at a fixed support its reduced Hessian is phi's.

Everything lives in token coefficients (v = X^T a, dp = X^T dc, inner products through the
token Gram matrix H), so a step costs O((nT)^2 n) plus the factorisation of an m x m matrix,
m = |support| T, whatever d is. The QP is solved through its dual, a least-distance problem
(:func:`margin_solver.svm.vstep._ldp`) with n + 1 rows, after eliminating (v, dp) with the block
inverse of the Hessian; the Schur complement ``S = Z + I / t`` (Z = P - C C + mu I, of rank
<= m beyond mu I) is inverted by the push-through identity on the support tokens.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lu_factor, lu_solve

from margin_solver.core.validation import InvalidInputError
from margin_solver.svm.vstep import _ldp, _VStepData, symmetric_eigh

__all__ = ["SQPModel", "block_diagonal", "score_blocks", "support_tokens"]


def block_diagonal(blocks: np.ndarray) -> np.ndarray:
    """The (kT x kT) matrix with the (T x T) ``blocks`` (shape (k, T, T)) on its diagonal."""
    k, T, _ = blocks.shape
    out = np.zeros((k, T, k, T))
    out[np.arange(k), :, np.arange(k), :] = blocks
    return out.reshape(k * T, k * T)


def support_tokens(support: np.ndarray, T: int) -> np.ndarray:
    """Flat indices (in the nT token order) of the tokens of the samples in ``support``."""
    return (np.flatnonzero(support)[:, None] * T + np.arange(T)).reshape(-1)


def score_blocks(s: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample blocks of phi's second derivatives in the scores, shape (k, T, T) each:
    the softmax Jacobian ``D_i = diag(s_i) - s_i s_i^T`` and ``F_i = diag(u_i - f_i) -
    s_i u_i^T`` (``f_i = s_i^T u_i``), for attentions ``s`` and token values ``u``."""
    eye = np.eye(s.shape[1])
    f = np.sum(s * u, axis=1, keepdims=True)
    D = s[:, :, None] * eye - s[:, :, None] * s[:, None, :]
    F = (u - f)[:, :, None] * eye - s[:, :, None] * u[:, None, :]
    return D, F


class SQPModel:
    """The QP model of phi at one point; :meth:`step` solves it for a proximal parameter t.

    Parameters
    ----------
    H : ndarray of shape (nT, nT)
        Token Gram matrix.
    y : ndarray of shape (n,)
        Labels in {-1, +1}.
    attention : ndarray of shape (n, T)
        softmax(X_i p).
    a : ndarray of shape (n, T)
        Token coefficients of v*(p) (v = X^T a).
    alpha : ndarray of shape (n,)
        The v-step's multipliers at p.
    c : ndarray of shape (n, T)
        Token coefficients of p.
    R : float
        Ball radius.
    mu : float
        Multiplier of the ball constraint (0 inside the ball).
    """

    def __init__(
        self,
        H: np.ndarray,
        y: np.ndarray,
        attention: np.ndarray,
        a: np.ndarray,
        alpha: np.ndarray,
        c: np.ndarray,
        R: float,
        mu: float,
    ):
        n, T = attention.shape
        self.H, self.n, self.T, self.mu = H, n, T, mu
        s = attention
        self.a = a.reshape(-1)
        self.c = c.reshape(-1)
        u = (H @ self.a).reshape(n, T)
        f = np.sum(s * u, axis=1, keepdims=True)
        beta = s * (u - f)  # D_i u_i: how the margin of sample i moves with its scores
        e = alpha * y
        support = alpha > 0
        self.tokens = support_tokens(support, T)
        es = e[support]
        D, F = score_blocks(s[support], u[support])
        # block-diagonal (support tokens) parts of C and P, kept as (k, T, T) blocks
        self.N_blocks = -es[:, None, None] * D
        Pb = -es[:, None, None] * (F @ D)
        self.Ps_blocks = (Pb + Pb.transpose(0, 2, 1)) / 2
        k = len(es)
        H_ss = H[np.ix_(self.tokens, self.tokens)]
        self.H_ss = H_ss
        # Z - mu I = L_S^T W L_S (H = L L^T), W = P_s - N H_SS N on the support tokens; its
        # negative eigenvalues are dropped, so the QP is convex for every t > 0 and t is set
        # by the ratio test alone (docs/theory.md, "Support-aware SQP step", measured)
        NHN = np.einsum(
            "itu,iujv,jvw->itjw",
            self.N_blocks,
            H_ss.reshape(k, T, k, T),
            self.N_blocks,
            optimize=True,
        ).reshape(k * T, k * T)
        self.W = _psd_part(block_diagonal(self.Ps_blocks) - NHN)
        # constraint rows (coefficient vectors, block i for sample i): w-part y_i s_i and
        # dp-part y_i D_i u_i; the last row is the ball's, -c in the dp-part
        self.Gw = np.zeros((n * T, n + 1))
        self.Gq = np.zeros((n * T, n + 1))
        rows = np.arange(n)[:, None] * T + np.arange(T)
        self.Gw[rows, np.arange(n)[:, None]] = y[:, None] * s
        self.Gq[rows, np.arange(n)[:, None]] = y[:, None] * beta
        self.Gq[:, n] = -self.c
        self.Hc = H @ self.c
        cc = float(self.c @ self.Hc)
        self.h = np.ones(n + 1)
        # on the sphere the retraction keeps ||p|| = R: to first order no outward move
        self.h[n] = 0.0 if mu > 0 else -max(R**2 - cc, 0.0) / 2
        # linear term of the dp-part: -C^T v0 + mu p (coefficients)
        self.m_q = -self._apply_N(H @ self.a) + mu * self.c
        # H times the block-sparse rows: O((nT)^2), not O((nT)^2 n)
        H3 = H.reshape(n * T, n, T)
        self.HGw = np.zeros((n * T, n + 1))
        self.HGq = np.zeros((n * T, n + 1))
        self.HGw[:, :n] = np.einsum("ait,it->ai", H3, y[:, None] * s)
        self.HGq[:, :n] = np.einsum("ait,it->ai", H3, y[:, None] * beta)
        self.HGq[:, n] = -self.Hc

    def _apply_blocks(self, blocks: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Coefficients of ``B x`` for B block-diagonal on the support tokens (blocks of shape
        (k, T, T)); x of shape (nT,) or (nT, j)."""
        out = np.zeros_like(x)
        xs = x[self.tokens]
        out[self.tokens] = (blocks @ xs.reshape(len(blocks), self.T, -1)).reshape(xs.shape)
        return out

    def _apply_N(self, x: np.ndarray) -> np.ndarray:
        """Coefficients of ``N x`` (N nonzero on the support tokens only)."""
        return self._apply_blocks(self.N_blocks, x)

    def step(self, t: float) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Solve the QP for proximal parameter ``t``.

        Returns
        -------
        (a_new, dc, value) or None
            Token coefficients of the model's v and of the p change (shape (nT,)), and the
            model's value (phi's prediction at p + dp); None when its dual fails.
        """
        gamma = self.mu + 1.0 / t
        H, tokens = self.H, self.tokens
        lu = lu_factor(gamma * np.eye(len(tokens)) + self.H_ss @ self.W) if len(tokens) else None

        def s_inv(x: np.ndarray) -> np.ndarray:
            # (gamma I + L_S^T W L_S)^{-1} by push-through, in coefficients
            out = x.copy()
            if lu is not None:
                out[tokens] -= self.W @ lu_solve(lu, (H @ x)[tokens])
            return out / gamma

        def m_inv(xw: np.ndarray, xq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # block inverse of [[I, C], [C, S + C C]] through its Schur complement S
            zq = s_inv(xq - self._apply_N(H @ xw))
            return xw - self._apply_N(H @ zq), zq

        k = self.n + 1
        both_w, both_q = m_inv(
            np.hstack([self.Gw, np.zeros((len(self.c), 1))]),
            np.hstack([self.Gq, self.m_q[:, None]]),
        )
        Iw, Iq, mw, mq = both_w[:, :k], both_q[:, :k], both_w[:, k], both_q[:, k]
        K = self.HGw.T @ Iw + self.HGq.T @ Iq
        K = (K + K.T) / 2
        h = self.h + self.HGw.T @ mw + self.HGq.T @ mq
        dual = _dual_ldp(K, h)
        if dual is None:
            return None
        w = Iw @ dual - mw
        q = Iq @ dual - mq
        Hq = H @ q
        cross = (w - self.a) @ (H @ self._apply_N(Hq))
        Pq = self._apply_blocks(self.Ps_blocks, Hq)
        value = (
            0.5 * float(w @ (H @ w))
            + cross
            + 0.5 * float(Hq @ Pq)
            + 0.5 * self.mu * float(2 * q @ self.Hc + q @ Hq)
        )
        return w, q, value


def _dual_ldp(K: np.ndarray, h: np.ndarray) -> np.ndarray | None:
    """Dual of ``min 1/2 x^T x s.t. B x >= h`` for ``K = B B^T``, by Lawson-Hanson LDP on the
    v-step's clipped eigen-factor of K (:attr:`margin_solver.svm.vstep._VStepData.factor`)."""
    try:
        factor = _VStepData.trusted(K, np.ones(len(h))).factor
    except InvalidInputError:
        # K is positive semidefinite by construction; rounding that breaks this is a
        # failed model, and the caller shrinks t
        return None
    _, alpha = _ldp(factor.G, h)
    return None if alpha is None else alpha / factor.scale


def _psd_part(W: np.ndarray) -> np.ndarray:
    """W with its negative eigenvalues set to zero (W symmetric up to round-off)."""
    if W.size == 0:
        return W
    lam, V = symmetric_eigh((W + W.T) / 2)
    return (V * np.clip(lam, 0.0, None)) @ V.T
