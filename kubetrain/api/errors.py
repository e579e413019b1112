"""How bad job input is reported: a `FieldError` per problem, all of them carried by one `InvalidJobError`.

A user who sends a broken job must learn, in one pass, every field that is wrong and what to write instead;
so validation collects errors instead of stopping at the first, and no error leaks library internals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["FieldError", "InvalidJobError"]


@dataclass(frozen=True)
class FieldError:
    """One problem in a job: where (`spec.tfReplicaSpecs.Worker.replicas`), what is wrong, how to fix it."""

    path: str
    message: str
    fix: str = ""
    document: int | None = None
    """1-based position of the YAML document the error is in, when the input had several."""

    def __str__(self) -> str:
        where = self.path or "(document)"
        if self.document is not None:
            where = f"document {self.document}: {where}"
        return f"{where}: {self.message}" + (f"; {self.fix}" if self.fix else "")

    def in_document(self, document: int) -> FieldError:
        """The same error, marked as coming from YAML document number `document` (1-based)."""
        return FieldError(path=self.path, message=self.message, fix=self.fix, document=document)


class InvalidJobError(ValueError):
    """A job (or a YAML file of jobs) is invalid. `errors` holds every problem; `str()` shows one per line."""

    def __init__(self, errors: Iterable[FieldError], *, subject: str = "") -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.subject = subject
        super().__init__(self.render())

    def render(self) -> str:
        """A readable report: one line for one error, else a heading and a `path: message; fix` line each."""
        heading = f"{self.subject} is invalid" if self.subject else "invalid job"
        count = len(self.errors)
        if count == 1:
            only = self.errors[0]
            if not only.path and only.document is None:  # about the whole input: `job.yaml: not UTF-8 text`
                return f"{self.subject or 'the job'}: {only.message}" + (f"; {only.fix}" if only.fix else "")
            return f"{heading}: {only}"
        lines: Sequence[str] = [f"  {error}" for error in self.errors]
        noun = "error" if count == 1 else "errors"
        return "\n".join([f"{heading} ({count} {noun}):", *lines])

    def __str__(self) -> str:
        return self.render()
