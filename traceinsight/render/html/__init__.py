"""HTML output: the page's building blocks (``page``, ``figures``, ``styles``), the report page
(``report``), its timeline and counter plots. Nothing is imported here: a section view that
imports ``html.page`` must not pull in the report page, which looks every view up."""
