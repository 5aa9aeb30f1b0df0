"""Sharing a session safely (docs/share.md): sanitised, self-checking HTML and Markdown files.

``view`` reads what to show, ``sanitize`` removes what must not leave the machine, ``html_page``
and ``markdown_page`` lay it out, ``seal`` embeds and checks the proof, and ``export`` ties them.
"""
