"""The v-step at fixed attention: the hard-margin SVM without bias, and hard token selections.

Modules: ``vstep`` (LDP, ECOS, Clarabel engines and their certificates), ``conic`` (the
cvxpy engines, imported when one runs), ``selection`` (selected-token SVMs, the
attention-SVM that realises a selection).
"""
