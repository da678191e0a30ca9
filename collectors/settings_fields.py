"""What every settings section is made of: the `section` decorator and the shared field types.

A section is a frozen pydantic dataclass that refuses keys it does not declare; its int and float
fields refuse booleans (pydantic would take TOML's `true` as 1). The range types (`Seconds`,
`Ratio`, `PUE`, `Names`, ...) are the ones several layers' sections use: joulehouse.warehouse,
joulehouse.models and joulehouse.reports declare their sections with them, through
collectors.settings, which re-exports them beside the node's sections and the loader. A location
setting (`Location`, `LocationOrNone`) carries a RelativeToFile marker: the loader makes its
relative path the settings file's folder's. Types only the node's sections use live beside them in
collectors.settings.
"""

from __future__ import annotations

import os
import typing
from pathlib import Path
from types import UnionType
from typing import Annotated, Any

import pydantic
from pydantic import BeforeValidator, ConfigDict, Field
from pydantic_settings import NoDecode


def section(cls: type) -> type:
    """A settings section: a frozen pydantic dataclass whose fields are checked on construction
    (`dataclasses.replace` checks again) and which refuses keys it does not declare. Its numbers
    refuse booleans: pydantic's lax mode took TOML's `interval_s = true` as 1 s. Done here once for
    every section's int and float fields (strict types would refuse the environment's text "5")."""
    hints = typing.get_type_hints(cls, include_extras=True)  # text under `from __future__ import annotations`
    cls.__annotations__ = {name: _refusing_booleans(hints[name]) for name in cls.__annotations__}
    return pydantic.dataclasses.dataclass(frozen=True, config=ConfigDict(extra="forbid"))(cls)


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"input should be a number, not the boolean {str(value).lower()}")
    return value


def _refusing_booleans(hint: Any) -> Any:
    """`hint` with each int and float in it (under Annotated, in a tuple or a union) refusing a bool."""
    if hint is int or hint is float:
        return Annotated[hint, BeforeValidator(_not_a_boolean)]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        inner = _refusing_booleans(args[0])
        return hint if inner is args[0] else Annotated[(inner, *hint.__metadata__)]
    if origin not in (tuple, typing.Union, UnionType):
        return hint
    new = tuple(a if a is Ellipsis else _refusing_booleans(a) for a in args)
    if all(n is a for n, a in zip(new, args)):
        return hint
    return tuple[new] if origin is tuple else typing.Union[new]


class RelativeToFile:
    """Marks a setting naming a local file or folder (or a URL, left as it is): a relative path
    read from a settings file is the file's folder's (`--config /etc/joulehouse/site.toml` with
    [lake] path = "lake" is /etc/joulehouse/lake, wherever the command runs); from the environment,
    a flag or code, the working directory's, as in a shell. With a `separator`, the setting is a
    list of entries "KEY<separator>PATH" (or "PATH")."""

    def __init__(self, separator: str = "") -> None:
        self.separator = separator

    def resolve(self, value: Any, folder: Path) -> Any:
        """`value` with each relative path in it made `folder`'s; anything else as it is (the field's
        own check says what is wrong with it)."""
        if not self.separator:
            return self._entry(value, folder)
        try:
            entries = _listed(value)  # a TOML list, or text as the environment gives it
        except ValueError:
            return value
        return [self._entry(v, folder) for v in entries] if isinstance(entries, (list, tuple)) else value

    def _entry(self, value: Any, folder: Path) -> Any:
        if not isinstance(value, str):
            return value
        key, sep, path = value.partition(self.separator) if self.separator else ("", "", value)
        key, path = (key, path.strip()) if sep else ("", value.strip())
        if not path or "://" in path or os.path.isabs(path):
            return value  # "" is none; a URL or an absolute path is meant as written
        if path.startswith("~"):  # the user's home, as a shell reads it (it was <folder>/~/lake)
            return f"{key}{sep}{os.path.expanduser(path)}"
        return f"{key}{sep}{folder / path}"


Location = Annotated[str, Field(min_length=1), RelativeToFile()]
LocationOrNone = Annotated[str, RelativeToFile()]  # "" for none


def relative_to_file(field: Any) -> RelativeToFile | None:
    """The RelativeToFile marker of a section's field (its FieldInfo), if it names a file or folder."""
    return next((m for m in field.metadata if isinstance(m, RelativeToFile)), None)


def _listed(value: Any) -> Any:
    """A list from the environment: comma-separated text (or a JSON list); TOML lists pass as they are."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return pydantic.TypeAdapter(list).validate_json(text)
        return [v.strip() for v in text.split(",") if v.strip()]
    return value


Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Seconds = Positive  # a duration or interval: more than 0 s and finite
Ratio = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
MAX_PUE = 10  # no facility spends 10x its IT power
PUE = Annotated[float, Field(ge=1, le=MAX_PUE, allow_inf_nan=False)]  # facility / IT power: never below 1
Count = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Text = Annotated[str, Field(min_length=1)]
Names = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_listed)]
NonNegativeList = Annotated[tuple[NonNegative, ...], NoDecode, BeforeValidator(_listed)]
