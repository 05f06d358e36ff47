from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "releases"
    verbose_name = "Releases"

    def ready(self) -> None:
        # The features register their kinds of request (``requests.kinds``) and their
        # background work with the sweeper (``background.recovery``). Imported here, once the
        # models are loaded: a module-level import would run before the app registry is ready.
        # ``core.sessions`` records each sign-in's time (a signal receiver).
        from releases.core import sessions as _sessions  # noqa: F401
        from releases.datasets import recovery as _datasets_recovery  # noqa: F401
        from releases.events import recovery as _events_recovery  # noqa: F401
        from releases.requests import extract as _extract  # noqa: F401
        from releases.requests import recovery as _requests_recovery  # noqa: F401
        from releases.review import recovery as _review_recovery  # noqa: F401
        from releases.statistics import kinds as _statistics_kind  # noqa: F401
