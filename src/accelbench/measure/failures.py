"""What a failed measurement is recorded as: one status word and one line of detail.

A failure at one point of a sweep (out of memory, an unsupported dtype, any exception) becomes that
point's row; the sweep goes on.
"""

from __future__ import annotations


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one short line (type and message) for a row's ``status_detail``."""
    text = " ".join(str(exc).split()) or repr(exc)
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message (a failed trial's ``status_detail``)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


# "status_not_supported": cuBLAS/hipBLAS(Lt) refusing a type or layout on this device, e.g. hipBLASLt's
# "HIPBLAS_STATUS_NOT_SUPPORTED" for an fp8 product an architecture has no kernel for.
UNSUPPORTED_MARKERS = ("not implemented for", "not supported", "unsupported", "status_not_supported")


def failure_status(exc: BaseException, backend=None) -> str:
    """``oom``, ``unsupported`` or ``error`` for an exception raised while measuring.

    ``backend`` (an ``accelbench.backends.Backend``) decides what counts as out of memory on its devices;
    without one, MemoryError and the usual allocator messages do."""
    if backend is not None and backend.is_oom(exc):
        return "oom"
    msg = str(exc).lower()
    if (
        isinstance(exc, MemoryError)
        or "out of memory" in msg
        or "can't allocate memory" in msg
        or "failed to allocate" in msg
    ):
        return "oom"
    if isinstance(exc, NotImplementedError) or any(m in msg for m in UNSUPPORTED_MARKERS):
        return "unsupported"
    return "error"
