"""Thin views: parse the request, call a service, render a page or an htmx partial."""
