"""Finding and reading spec files: shipped ones by name, any file by path.

Shipped specs live in the `rooftui.specs` package (`specs/` in the source tree):
`gpus/`, `models/`, `profiles/`, `workloads/`, `systems/`. A name is a file stem there;
anything with a path separator or a `.toml`/`.json` suffix is read as a path.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from rooftui.core import limits
from rooftui.core.errors import SpecError

KINDS = ("gpus", "models", "profiles", "workloads", "systems")


def shipped_dir(kind: str) -> Path:
    # The specs are installed as plain files (a wheel or an editable install), so the
    # package's folder is theirs: importlib.resources would cost 10-13 ms of every start.
    import rooftui.specs

    return Path(rooftui.specs.__file__).parent / kind


def shipped_names(kind: str) -> list[str]:
    folder = shipped_dir(kind)
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def looks_like_path(name: str) -> bool:
    return "/" in name or "\\" in name or name.endswith((".toml", ".json"))


def resolve(kind: str, name_or_path: str) -> Path:
    """The file a spec name or path refers to; a clear error with suggestions if none."""
    name_or_path = str(name_or_path)
    path = Path(name_or_path).expanduser()
    if looks_like_path(name_or_path):
        if path.is_dir():
            return _model_folder(kind, path)
        if not path.is_file():
            raise SpecError(f"{kind[:-1]} spec file not found: {name_or_path}")
        return path
    shipped = shipped_dir(kind) / f"{name_or_path}.toml"
    if shipped.is_file():
        return shipped
    if path.is_dir():  # a bare folder name that names no shipped spec
        return _model_folder(kind, path)
    names = shipped_names(kind)
    import difflib  # only a mistyped name needs it: not imported on every start

    close = difflib.get_close_matches(name_or_path, names, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise SpecError(
        f"unknown {kind[:-1]} {name_or_path!r}{hint} "
        f"(`sweep specs list {kind}` shows all; a path to a file works too)"
    )


def _model_folder(kind: str, folder: Path) -> Path:
    """A Hugging Face model folder stands for the config.json it holds."""
    config = folder / "config.json"
    if kind != "models":
        raise SpecError(f"{folder} is a folder, not a {kind[:-1]} spec file")
    if not config.is_file():
        raise SpecError(f"{folder} is a folder without a config.json (a Hugging Face model "
                        "folder holds one)")
    return config


def read_document(path: Path) -> dict[str, Any]:
    """Parse a TOML or JSON file; syntax errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot read: {error}") from None
    if path.suffix == ".json":
        import json  # only a config.json needs it: not imported on every start

        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise SpecError(
                f"{path}: line {error.lineno}, column {error.colno}: invalid JSON: {error.msg}"
            ) from None
        except (ValueError, RecursionError) as error:  # a 5,000-digit integer, deep nesting
            raise SpecError(f"{path}: invalid JSON: {error}") from None
    else:
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as error:  # TOMLDecodeError is a ValueError
            raise SpecError(f"{path}: invalid TOML: {error}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a table of keys at the top level")
    return data


def number(
    data: dict[str, Any],
    key: str,
    where: str,
    *,
    default: float | None = None,
    bound: str | None = None,
    minimum: float | None = None,
    strict: bool = False,
    integer: bool = False,
) -> float:
    """Read a numeric key, naming the file and key when it is missing, not a finite number,
    or out of range. The range is `limits.BOUNDS[bound]` (by default the entry named like
    the key, if any), else [`minimum`, 10^15]; `minimum` given replaces the entry's lower
    end, `strict` opens it, `integer` asks for a whole number."""
    if key not in data or data[key] is None:
        if default is None:
            raise SpecError(f"{where}: missing key {key!r}")
        return default
    entry = limits.BOUNDS.get(bound or key)
    if entry is None:
        entry = replace(limits.BOUNDS["spec_number"], minimum=minimum or 0.0, min_open=strict)
    elif minimum is not None:
        entry = replace(entry, minimum=minimum, min_open=strict)
    if integer and not entry.integer:
        entry = replace(entry, integer=True)
    return float(entry.check(data[key], f"key {key!r}", where))


def flag(data: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SpecError(f"{where}: key {key!r} must be true or false, got {value!r}")
    return value


def check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            import difflib

            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{where}: unknown key {key!r}{hint}")
