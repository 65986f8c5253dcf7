"""One exception type for every user-facing error.

The CLI prints ``error: <message>`` on one line and exits with status 2; notebooks and
library callers get an ordinary ``ValueError`` subclass they can catch.
"""
from __future__ import annotations


class QrlibError(ValueError):
    """A bad input (unknown dataset, malformed profile, empty query list, ...).

    The message is one line that names what was wrong and what is accepted.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
