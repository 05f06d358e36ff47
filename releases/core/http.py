"""What every feature's views share about the request itself."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def is_htmx(request: HttpRequest) -> bool:
    """Was the request made by htmx (an ``HX-Request`` header)? It then gets a fragment."""
    return bool(getattr(request, "htmx", False))


def error_page(request: HttpRequest, message: str, status: int, back: str = "") -> HttpResponse:
    """The page that says why something cannot be served, with a link back."""
    return render(request, "releases/error.html", {"message": message, "back": back}, status=status)
