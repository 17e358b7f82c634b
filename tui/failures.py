"""What a failed computation says on screen: one line, and the app keeps running.

The screens' workers catch every exception of their computation and post this text
back (a worker's uncaught exception would end the app): a SpecError is a refusal the user
can act on and speaks for itself; anything else is a bug, named by its type.
"""

from __future__ import annotations

from rooftui.core.errors import SpecError


def failure_text(error: Exception) -> str:
    """`error` in one line: a SpecError's message, else "Type: message"."""
    lines = str(error).strip().splitlines()
    message = lines[0] if lines else ""
    if isinstance(error, SpecError):
        return message
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
