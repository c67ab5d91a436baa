"""Exceptions raised by the qloom package.

Every error of the native library (``qloom::Error``) arrives as the subclass
of :class:`QloomError` for its kind, with the facts the library gives:

* ``kind``    -- the ``qloom::ErrorKind`` as an identifier: ``invalid_input``,
  ``not_found``, ``unsupported``, ``usage``, ``io``, ``internal``
* ``file``    -- the file, directory or other source at fault, or ``None``
* ``field``   -- the tensor, JSON field or option inside it, or ``None``
* ``message`` -- what is wrong; ``remedy`` -- what to do (or ``None``)

:func:`qloom.quantize_via_prompt` returns the assessment of every run that
could record one (failures included: its ``verdict`` and ``outcome``); a run
that could not record one (``workspace_unwritable``, ``sdk_runtime_error``)
raises :class:`OutcomeError`, whose ``outcome_id`` is seed 000's outcome id.
"""

__all__ = [
    "QloomError",
    "InvalidInputError",
    "NotFoundError",
    "UnsupportedError",
    "UsageError",
    "QloomIOError",
    "InternalError",
    "OutcomeError",
]


class QloomError(Exception):
    """Base class of every error qloom raises."""

    kind = None

    def __init__(self, message, *, kind=None, file=None, field=None, remedy=None, detail=None):
        super().__init__(detail or message)
        if kind is not None:
            self.kind = kind
        self.message = message
        self.file = file or None
        self.field = field or None
        self.remedy = remedy or None


class InvalidInputError(QloomError, ValueError):
    """A malformed file or value (truncated, bad JSON, unknown dtype...)."""

    kind = "invalid_input"


class NotFoundError(QloomError, LookupError):
    """A file, tensor or directory that must exist does not."""

    kind = "not_found"


class UnsupportedError(QloomError):
    """Well-formed, but outside what qloom handles."""

    kind = "unsupported"


class UsageError(QloomError, ValueError):
    """Wrong API arguments."""

    kind = "usage"


class QloomIOError(QloomError, OSError):
    """The environment failed (disk full, permission, fsync)."""

    kind = "io"


class InternalError(QloomError):
    """A bug in qloom."""

    kind = "internal"


class OutcomeError(QloomError):
    """quantize_via_prompt stopped before it could write an assessment."""

    kind = "outcome"

    def __init__(self, message, *, outcome_id, verdict=None, exit_code=None, summary=None):
        super().__init__(message)
        self.outcome_id = outcome_id
        self.verdict = verdict
        self.exit_code = exit_code
        self.summary = summary


_BY_KIND = {
    cls.kind: cls
    for cls in (InvalidInputError, NotFoundError, UnsupportedError, UsageError, QloomIOError, InternalError)
}


def _from_core(kind, file, item, message, remedy, what):
    """Called by qloom._core to build the exception of a qloom::Error."""
    cls = _BY_KIND.get(kind, InternalError)
    return cls(message, kind=kind, file=file, field=item, remedy=remedy, detail=what)
