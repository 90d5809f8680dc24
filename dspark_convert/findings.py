"""``Finding``: one loader-rule violation or warning (``check``'s unit of output), at the ground floor so that the
variants' converter and loader code and ``check`` itself can all say what is wrong without importing each other.
``dspark_convert.check.Finding`` is the same class (the public name).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar


class JsonRow:
    """The base of a dataclass that is one entry of a ``--json`` output: :meth:`to_dict` gives its fields by name
    (nested dataclasses as dicts, :func:`dataclasses.asdict`)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Finding(JsonRow):
    """One rule violation (``level`` error) or a note on something that loads but misbehaves (warning)."""

    level: str
    subject: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.message} [{self.rule}]"
