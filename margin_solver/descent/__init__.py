"""P_R from one start: alternating v-steps with projected p-steps.

Modules: ``alternating`` (the descent and its forms, dense and kernel), ``sqp`` (the
support-aware sequential-QP step).
"""
