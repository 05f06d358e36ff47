from django.http import HttpRequest


def is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))
