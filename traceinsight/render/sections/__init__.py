"""Each section's own views (terminal, Markdown, HTML figures), registered in ``render/views.py``
when its module is imported."""
