"""margin_solver: min-norm / max-margin interpolators of single-head softmax attention.

The model is f(X; v, p) = v^T X^T softmax(X p) (Magen et al., *Benign Overfitting in
Single-Head Attention*, arXiv:2410.07746).
"""

__version__ = "0.1.0"
