"""What the detectors read: the :class:`~.context.FindingContext` (the trace and the results it
already has) and the evidence helpers it and the detectors share."""
