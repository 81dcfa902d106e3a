"""Notices to a webhook when someone must act (issue 48): TOOLBRIDGE_NOTIFY_URL. Its face: the names below."""

from app.notify.webhook import Notice, Notifier

__all__ = ["Notice", "Notifier"]
