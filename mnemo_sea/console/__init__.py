"""The console: the archive's sessions, evidence, memory, task states, audit trail and curation
report as web pages for people, read-only.

Server-rendered (Jinja2 templates, a little plain JavaScript, every asset packaged, no build
step), so it works offline. The same pages are `mnemo-sea ui` (a console of its own on
127.0.0.1) and `/ui` of `mnemo-sea serve`; both answer only a caller who presented an API key
(or `ui`'s launch link), and every page reads through the facade as that principal: another
tenant's record is missing, whatever the URL names.
"""
