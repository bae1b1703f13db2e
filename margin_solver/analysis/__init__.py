"""Reading fitted models and data: metrics, side-by-side comparison, heads, estimates.

Modules: ``metrics`` (errors against observed and clean labels, attention on the signal
token), ``compare`` (two fitted models), ``heads`` (metrics of H heads), ``solutions`` (a
fitted (v, p) from a result, mapping or file), ``estimation`` (signal, noise, SNR and eta of
data of unknown origin).
"""
