"""``traceinsight mcp``: the analyses as tools a coding assistant calls, over the Model
Context Protocol (the ``mcp`` extra). Only the CLI imports this package.

- ``roots.py``: which files a client may open (the roots given at start).
- ``sqlguard.py``: read-only SQL that cannot reach files.
- ``store.py``: what is loaded (traces, jobs, snapshots), by path and mtime, under a memory cap.
- ``shape.py``: answers cut to a size cap, with a continuation.
- ``answers.py``: each tool's answer from the public API and the JSON report.
- ``tools.py``: the tools, resources and prompt with their descriptions; ``server.py`` runs them.
"""
