"""Webhook signing secrets: made by the app, shown once, stored encrypted (Fernet, from the
maintained ``cryptography`` library) with a key derived from SECRET_KEY; and the signature."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

#: Separates this key from every other use of SECRET_KEY.
_KEY_CONTEXT = b"anonymizer webhook secrets v1"


def _fernet() -> Fernet:
    key = hmac.new(settings.SECRET_KEY.encode(), _KEY_CONTEXT, hashlib.sha256).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def decrypt(stored: str) -> str:
    """The secret; ValueError when it cannot be read (SECRET_KEY changed since)."""
    try:
        return _fernet().decrypt(stored.encode()).decode()
    except InvalidToken:
        raise ValueError(
            "The webhook's secret cannot be decrypted (SECRET_KEY changed?): make a new one."
        ) from None


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Anonymizer-Signature`` header: HMAC-SHA256 over ``timestamp.body``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()
