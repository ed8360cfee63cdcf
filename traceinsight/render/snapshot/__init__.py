"""The memory snapshot report in each output format, from one view of it (``view.py``)."""
