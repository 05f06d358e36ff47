"""The HTTP API under ``/api/v1/`` (django-ninja) and the personal access tokens it is used with.

It sits where the pages' views sit: each endpoint parses, calls the same selector or service
(and form) as the page that does the same thing, and answers JSON; refusals come as
``application/problem+json`` with the pages' sentences. See docs/api.md.
"""
