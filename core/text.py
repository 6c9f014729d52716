"""What PostgreSQL can store: text without NUL, valid UTF-8, JSON of a sane depth.

PostgreSQL's text and jsonb refuse NUL, and a lone surrogate (which json.loads
accepts from `\\ud800`) cannot be encoded as UTF-8: either reaching a statement is a
500. Input is checked with these before it is written or compared.
"""

from __future__ import annotations

MAX_JSON_DEPTH = 32  # deeper than any body the shop or a provider sends


def storable(text: str) -> bool:
    """True when PostgreSQL can take the string (no NUL, no lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_json(value: object, *, depth: int = 0) -> bool:
    """True when every key and string of a parsed JSON value is storable and it nests at most
    MAX_JSON_DEPTH deep (iterative callers need no recursion limit of their own)."""
    stack: list[tuple[object, int]] = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if level > MAX_JSON_DEPTH:
            return False
        if isinstance(item, str):
            if not storable(item):
                return False
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not storable(str(key)):
                    return False
                stack.append((inner, level + 1))
        elif isinstance(item, list):
            stack.extend((inner, level + 1) for inner in item)
    return True
