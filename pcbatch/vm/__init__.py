"""pcbatch.vm: the machines that run a lowered program over a batch.

Layers, each importing only those above it (``tests/unit/test_import_graph.py``
checks that there is no cycle):

- ``policy`` (which block runs next), ``inputs`` (batch size, broadcasting),
  ``failures`` (step limits, stack overflows in the user's terms);
- ``machine``: the eager machine, written against the backend Protocol
  (`pcbatch.backends.base`) alone; ``refill``: its lanes refilled as threads finish;
- ``compact`` (blocks on buckets of gathered lanes) and ``staged_refill``, then
  ``staged``: the whole run traced into one loop, for the compiled backends;
- ``dispatch``: the one place that chooses eager or staged, plain or refill;
- ``runner``: signature, compilation cache, then ``dispatch`` (or ``stackless``).

Beside them, ``reference`` (one example at a time: what a program means) and
``stackless`` (recursion inherited from Python).
"""
