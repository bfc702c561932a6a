"""Which JAX trace is current, and dropped-update detection.

``_traces``: trace tokens (the trace a Module or Variable was made in, checked before a
mutation) and ``current_trace``. ``_lost_updates``: marking Variables whose update a plain
JAX transformation dropped, and raising ``LostUpdateError`` where the stale object is used.
``_frames``: whose code a Python frame runs (JAX's, Equinox's, a call wrapper's, this
package's or the user's), told by the resolved folders of the imported packages.
Imports only ``graph._errors``: every other room of the graph engine builds on it.
"""
