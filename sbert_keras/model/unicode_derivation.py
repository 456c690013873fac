"""Derives the character tables of `unicode_tables` from the installed `tokenizers`, and writes that module.

Hugging Face's `tokenizers` (Rust) classifies characters with its own,
older Unicode tables ("other" and punctuation categories, combining marks,
NFD) and with the Rust standard library's (white space, lowercasing).
Python's `unicodedata`, RE2's `\\p{...}` classes and ICU (tf.text) each have
another Unicode version, so none of them reproduces it exactly. The tables
are therefore read from `tokenizers` itself: every code point is passed
through `BertNormalizer` (one option at a time) and `BertPreTokenizer`,
many code points per call, each between separators that no option changes.

Run `python -m sbert_keras.model.unicode_derivation` after upgrading
`tokenizers` to rewrite `sbert_keras/model/unicode_tables.py`;
`tests/model/test_wordpiece.py` checks that the shipped tables equal what
the installed `tokenizers` gives.

Example:
```python
tables = derive_tables()
tables["chinese"][:2]  # [(0x3400, 0x4DBF), (0x4E00, 0x9FFF)]
```
"""

import os
import sys

import numpy as np
import tokenizers
from tokenizers import normalizers
from tokenizers import pre_tokenizers

from sbert_keras.model.unicode_classes import HANGUL_FIRST
from sbert_keras.model.unicode_classes import HANGUL_LAST
from sbert_keras.model.unicode_classes import RANGE_TABLES
from sbert_keras.model.unicode_classes import encode_map
from sbert_keras.model.unicode_classes import encode_ranges
from sbert_keras.utils.atomic_io import replace_atomically

# A character that no `BertNormalizer` option changes (not a control, space,
# CJK character, mark or letter) and that NFD never reorders across.
SEPARATOR = "|"
LINE_WIDTH = 120


def code_points():
    """Every Unicode scalar value (no surrogates), as characters."""
    return [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]


def normalized_per_character(options):
    """`{character: normalized text}` of a `BertNormalizer` with `options`, for every code point it changes."""
    normalizer = normalizers.BertNormalizer(
        **{"clean_text": False, "handle_chinese_chars": False, "strip_accents": False, "lowercase": False, **options}
    )
    chars = [c for c in code_points() if c != SEPARATOR]
    pieces = normalizer.normalize_str(SEPARATOR + SEPARATOR.join(chars) + SEPARATOR).split(SEPARATOR)[1:-1]
    if len(pieces) != len(chars):
        raise RuntimeError(f"BertNormalizer({options}) changed the separator {SEPARATOR!r}; choose another.")
    changed = {c: text for c, text in zip(chars, pieces) if c != text}
    if normalizer.normalize_str(SEPARATOR) != SEPARATOR:
        changed[SEPARATOR] = normalizer.normalize_str(SEPARATOR)
    return changed


def ranges(code_points_):
    """Sorted code points as inclusive `(first, last)` ranges."""
    found = []
    for code in sorted(code_points_):
        if found and found[-1][1] == code - 1:
            found[-1][1] = code
        else:
            found.append([code, code])
    return [tuple(pair) for pair in found]


def pre_tokenizer_classes():
    """`(white space, punctuation)` code points of `BertPreTokenizer`.

    Each character sits between two `a`s: white space leaves `a`, `a`;
    punctuation gives `a`, the character, `a`; any other character stays
    inside one word.
    """
    chars = code_points()
    words = pre_tokenizers.BertPreTokenizer().pre_tokenize_str("a" + "a".join(chars) + "a")
    covered = np.zeros(2 * len(chars) + 1, np.bool_)
    punctuation = []
    for _, (start, end) in words:
        covered[start:end] = True
        if end - start == 1 and start % 2:
            punctuation.append(ord(chars[start // 2]))
    white = [ord(chars[i]) for i in np.flatnonzero(~covered[1::2])]
    return white, punctuation


def derive_tables():
    """Every table of `unicode_tables`, from the installed `tokenizers`.

    Returns:
        dict: range tables (lists of `(first, last)`) under the names of
        `unicode_classes.RANGE_TABLES`, and `decomposed` and `lowercase`
        (`{code point: tuple of code points}`).
    """
    clean = normalized_per_character({"clean_text": True})
    chinese = normalized_per_character({"handle_chinese_chars": True})
    strip = normalized_per_character({"strip_accents": True})
    lower = normalized_per_character({"lowercase": True})
    white, punctuation = pre_tokenizer_classes()
    unexpected = [c for c, text in clean.items() if text not in ("", " ")]
    unexpected += [c for c, text in chinese.items() if text != f" {c} "]
    if unexpected:
        raise RuntimeError(f"unexpected BertNormalizer outputs for {[hex(ord(c)) for c in unexpected[:10]]}")
    hangul = range(HANGUL_FIRST, HANGUL_LAST + 1)
    return {
        "deleted": ranges(ord(c) for c, text in clean.items() if text == ""),
        "spaces": ranges(ord(c) for c, text in clean.items() if text == " " and c != " "),
        "chinese": ranges(ord(c) for c in chinese),
        "marks": ranges(ord(c) for c, text in strip.items() if text == ""),
        "whitespace": ranges(white),
        "punctuation": ranges(punctuation),
        "decomposed": {ord(c): tuple(map(ord, text)) for c, text in strip.items() if text and ord(c) not in hangul},
        "lowercase": {ord(c): tuple(map(ord, text)) for c, text in lower.items()},
        "hangul": {ord(c): tuple(map(ord, text)) for c, text in strip.items() if ord(c) in hangul},
    }


def _wrapped(name, encoded):
    """`NAME = ("...", ...)` with lines of at most `LINE_WIDTH` characters, cut at spaces."""
    lines, line = [], ""
    for token in encoded.split(" "):
        if line and len(line) + 1 + len(token) > LINE_WIDTH - 8:
            lines.append(line + " ")
            line = token
        else:
            line = f"{line} {token}" if line else token
    lines.append(line)
    if len(lines) == 1 and len(name) + len(line) + 5 <= LINE_WIDTH:
        return f'{name} = "{line}"\n'  # as `ruff format` writes a short one
    return f"{name} = (\n" + "".join(f'    "{text}"\n' for text in lines) + ")\n"


def render_module(tables):
    """The source of `unicode_tables.py` for `tables` (as `derive_tables` returns them)."""
    header = (
        '"""Character tables of Hugging Face\'s `BertNormalizer` and `BertPreTokenizer` (generated, do not edit).\n\n'
        "Written by `python -m sbert_keras.model.unicode_derivation` from `tokenizers`\n"
        f"{tokenizers.__version__}; read by `unicode_classes`, which explains the format.\n"
        '"""\n\n'
        f'TOKENIZERS_VERSION = "{tokenizers.__version__}"\n\n'
    )
    parts = [_wrapped(name.upper(), encode_ranges(tables[name])) for name in RANGE_TABLES]
    parts += [_wrapped(name.upper(), encode_map(tables[name])) for name in ("decomposed", "lowercase")]
    return header + "\n".join(parts)


def main():
    """Rewrites `unicode_tables.py` beside this module from the installed `tokenizers`."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_tables.py")
    source = render_module(derive_tables())

    def write(temp):
        with open(temp, "w", encoding="utf-8") as file:
            file.write(source)

    print(replace_atomically(write, path, ".py"))


if __name__ == "__main__":
    main()
