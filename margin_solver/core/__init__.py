"""What every part stands on: validation, results, files, the model's numerics (kernel), data.

Modules: ``validation`` (input checks), ``results`` (the result base and status
vocabulary), ``fileio`` (safe output files), ``blas`` and ``progress`` (threads, bars),
``kernel`` (softmax, outputs, margins, gradients; the token Gram form), ``data`` (the
paper's distribution, :class:`Dataset`), ``ooc``, ``ondisk`` and ``generate`` (tokens on disk).
"""
