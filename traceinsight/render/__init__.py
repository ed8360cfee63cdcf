"""Presentation: terminal, JSON, Markdown, HTML and Perfetto output of traceinsight's results.

Nothing is imported here, so that a light module of this package (the format registry the CLI
reads for its help) does not pull in the views. The package root hands the analysis layer's
display hooks a loader that imports ``render/notebook.py`` and registers its functions
(``Result._repr_html_`` and friends use them).
"""
