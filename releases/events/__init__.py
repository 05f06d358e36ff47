"""Webhooks and notifications: who is told when a release request changes state."""
