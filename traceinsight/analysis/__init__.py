"""Pure analyses over a :class:`~traceinsight.trace.model.Trace`, each returning a typed result."""
