"""Which JAX trace is current, and dropped-update detection.

``_traces``: trace tokens (the trace a Module or Variable was made in, checked before a
mutation) and ``current_trace``. ``_lost_updates``: marking Variables whose update a plain
JAX transformation dropped, and raising ``LostUpdateError`` where the stale object is used.
Imports only ``graph._errors``: every other room of the graph engine builds on it.
"""
