"""encore.compare_modes: what eager execution, traced replay, retracing and bucketing cost on
your own training step and data (the C++ call is ``encore::compare_modes``, train/compare.h).

    report = encore.compare_modes(model=model, loss=nn.binary_crossentropy, optimizer=adam,
                                  data=(x, y), modes=["eager", "traced"], steps=30)
    print(report.table())        # report.to_dict(), report.to_json(), report.plot("modes.png")

From the command line, on a script that defines the model and the data::

    python -m encore.compare my_model.py [--modes eager,traced,...] [--steps 30]
                                         [--buckets 64,128] [--json out.json] [--plot out.png]

The script is run (not as ``__main__``) and must define ``data`` and either ``step`` or
``model``, ``loss`` and ``optimizer``; it may define ``predict``, ``modes``, ``lengths``,
``length``, ``length_axis``, ``length_args`` and ``buckets`` (the keyword arguments of
:func:`compare_modes` of the same names; command-line options win).

The code lives in ``encore._compare``: ``import encore`` does not import this module, so that
``python -m encore.compare`` runs it without runpy's warning that it was imported already.
"""

import sys

from ._compare import MODES, Report, compare_modes, main

__all__ = ["MODES", "Report", "compare_modes", "main"]

if __name__ == "__main__":
    sys.exit(main())
