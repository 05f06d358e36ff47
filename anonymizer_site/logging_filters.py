"""Logging filters named in settings.LOGGING."""

from __future__ import annotations

import logging


class ClientErrorsWithoutTraceback(logging.Filter):
    """A 4xx (a refused permission, a missing page) is the client's doing, not a fault:
    keep the one-line log entry and drop the stack trace Django attaches to it."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
