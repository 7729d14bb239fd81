"""What a composed sentence or table line says, read as values: the numbers and the library names in it, in order.
Tests of the package's wording assert on these (and on the decision a function returns), so that a rewording does
not fail a test while a wrong number, name or order does."""

import re

from playbook_utils.decoders import BACKENDS

_LIBRARY = re.compile(rf"\b({'|'.join(BACKENDS)})\b")
_NUMBER = re.compile(r"(?<!\w)\d[\d,]*(?:\.\d+)?")  # not inside a name ('h264', 'uniform16', 'mp4')


def numbers(text: str) -> list[str]:
    """The numbers `text` names, in order, thousands separators dropped: '1,150 vs 0.68x (h264)' -> ['1150', '0.68']."""
    return [n.rstrip(",").replace(",", "") for n in _NUMBER.findall(text)]


def quoted(text: str) -> list[str]:
    """The numbers a line quotes, in order, as written (signs, thousands, decimals and % kept; none inside a name
    such as x16 or h264)."""
    return re.findall(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*%?", text)


def libraries(text: str) -> list[str]:
    """The decoding libraries `text` names, in order, each as often as named."""
    return _LIBRARY.findall(text)


def sizes(text: str) -> list[tuple[int, int]]:
    """The WxH frame sizes `text` names, in order."""
    return [(int(w), int(h)) for w, h in re.findall(r"(?<!\w)(\d+)x(\d+)(?!\d)", text)]
