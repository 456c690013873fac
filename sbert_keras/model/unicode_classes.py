"""Hugging Face's BERT character classes and mappings, read from `unicode_tables`, as the graph uses them.

`tokenizers`' `BertNormalizer` and `BertPreTokenizer` classify characters
with their own Unicode tables (see `unicode_derivation`, which writes
`unicode_tables` from the installed `tokenizers`). This module reads those
tables and turns them into what `wordpiece` applies in the TensorFlow
graph: RE2 character classes (`regex_class`) for the classes, and one
per-character mapping (`char_map`) for accent stripping and lowercasing.

Why one per-character mapping: `BertNormalizer` strips accents as NFD
followed by dropping the marks of category Mn, then lowercases with Rust's
`char::to_lowercase`, one character at a time. Decomposing, dropping and
lowercasing a character never depend on its neighbours, so their
composition is a table from one code point to zero or more code points.
The one part of NFD that looks at neighbours, the canonical reordering of
combining marks, only matters for the marks that stripping keeps (spacing
marks with a combining class, such as the musical symbols U+1D165..U+1D172),
and only when two of them of different classes follow each other out of
order; the table keeps such a pair in its written order.

Table format: a range table is space-separated hexadecimal `first-last` (or
`code`) items; a mapping is space-separated items `<key step><value>`, the
key step (hexadecimal) counted from the previous key (from 0 for the first),
and the value either `+d`/`-d` (one code point, the key plus or minus d) or
`=a.b.c` (the code points a, b, c; nothing after `=` deletes). Hangul
syllables decompose by Unicode's arithmetic rule (`hangul_decomposition`),
which `unicode_derivation` checks against `tokenizers` for every syllable.

Example:
```python
char_map(strip_accents=True, lowercase=True)[ord("É")]  # (ord("e"),)
regex_class(tables()["chinese"])[:18]  # "[\\x{3400}-\\x{4dbf}"
```
"""

import functools

import numpy as np

from sbert_keras.model import unicode_tables

RANGE_TABLES = ("deleted", "spaces", "chinese", "marks", "whitespace", "punctuation")
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def encode_ranges(pairs):
    """`[(first, last), ...]` as the text of a range table."""
    return " ".join(f"{a:x}" if a == b else f"{a:x}-{b:x}" for a, b in pairs)


def decode_ranges(text):
    """The text of a range table as `[(first, last), ...]`."""
    pairs = []
    for item in text.split():
        first, _, last = item.partition("-")
        pairs.append((int(first, 16), int(last or first, 16)))
    return pairs


def encode_map(mapping):
    """`{code point: tuple of code points}` as the text of a mapping."""
    items, previous = [], 0
    for key in sorted(mapping):
        values = mapping[key]
        if len(values) == 1:
            delta = values[0] - key
            value = f"{'+' if delta >= 0 else '-'}{abs(delta):x}"
        else:
            value = "=" + ".".join(f"{v:x}" for v in values)
        items.append(f"{key - previous:x}{value}")
        previous = key
    return " ".join(items)


def decode_map(text):
    """The text of a mapping as `{code point: tuple of code points}`."""
    mapping, key = {}, 0
    for item in text.split():
        cut = next(i for i, c in enumerate(item) if c in "+-=")
        key += int(item[:cut], 16)
        value = item[cut + 1 :]
        if item[cut] == "=":
            mapping[key] = tuple(int(v, 16) for v in value.split(".") if v)
        else:
            mapping[key] = (key + int(value, 16) * (1 if item[cut] == "+" else -1),)
    return mapping


def hangul_decomposition(code):
    """The canonical decomposition of a Hangul syllable (Unicode 3.12): leading, vowel and optional trailing jamo."""
    index = code - HANGUL_FIRST
    trailing = index % 28
    jamo = (0x1100 + index // 588, 0x1161 + (index % 588) // 28)
    return jamo + ((0x11A7 + trailing,) if trailing else ())


@functools.cache
def tables():
    """The shipped tables: range tables, `decomposed` (Hangul included) and `lowercase`.

    Returns:
        dict of lists of `(first, last)` and dicts `{code point: tuple}`.
    """
    found = {name: decode_ranges(getattr(unicode_tables, name.upper())) for name in RANGE_TABLES}
    decomposed = decode_map(unicode_tables.DECOMPOSED)
    decomposed.update({c: hangul_decomposition(c) for c in range(HANGUL_FIRST, HANGUL_LAST + 1)})
    found["decomposed"] = decomposed
    found["lowercase"] = decode_map(unicode_tables.LOWERCASE)
    return found


@functools.cache
def char_map(strip_accents, lowercase):
    """The per-character mapping of `BertNormalizer`'s accent stripping, then lowercasing.

    Args:
        strip_accents: bool. NFD, then drop the marks (`marks`).
        lowercase: bool. Rust's `char::to_lowercase` (`lowercase`).

    Returns:
        dict `{code point: tuple of code points}` of every character that
        changes (an empty tuple: the character is dropped).
    """
    lower = tables()["lowercase"] if lowercase else {}
    if not strip_accents:
        return dict(lower)
    mapping = {code: () for first, last in tables()["marks"] for code in range(first, last + 1)}
    mapping.update(tables()["decomposed"])
    for code in lower:
        mapping.setdefault(code, (code,))
    return {
        code: composed
        for code, values in mapping.items()
        if (composed := tuple(c for v in values for c in lower.get(v, (v,)))) != (code,)
    }


@functools.cache
def char_map_arrays(strip_accents, lowercase):
    """`char_map` as NumPy arrays for the graph.

    ASCII characters map to one character each (`A`-`Z` to `a`-`z` when
    lowercasing), so they take a 128-entry table; the others a sorted key
    table with the start and length of each value in one array of code points.

    Returns:
        `(ascii, keys, starts, lengths, values)`: int32 `[128]`, int32 `[n]`,
        int64 `[n]`, int64 `[n]` and int32 `[sum(lengths) + 1]` (one unused
        code point at the end, so that a start of 0 is always in range).
    """
    mapping = char_map(strip_accents, lowercase)
    ascii_table = np.arange(128, dtype=np.int32)
    for code in [c for c in mapping if c < 128]:
        if len(mapping[code]) != 1:
            raise ValueError(f"U+{code:04X} maps to {len(mapping[code])} characters; ASCII must map to one.")
        ascii_table[code] = mapping[code][0]
    keys = sorted(c for c in mapping if c >= 128)
    lengths = np.array([len(mapping[key]) for key in keys], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if keys else np.zeros(0, np.int64)
    values = np.array([c for key in keys for c in mapping[key]] + [0], np.int32)
    return ascii_table, np.array(keys, np.int32), starts, lengths, values


@functools.cache
def white_space_after_cleaning(strip_accents, lowercase):
    """Whether white space other than the space can follow `clean_text` and `char_map`.

    `clean_text` turns every white space character into a space (or deletes
    it); `char_map` could bring one back only by mapping a character that
    `clean_text` leaves to white space (`BertPreTokenizer`'s).
    """
    white = {code for first, last in tables()["whitespace"] for code in range(first, last + 1)}
    cleaned = {
        code for name in ("deleted", "spaces") for first, last in tables()[name] for code in range(first, last + 1)
    }
    mapping = char_map(strip_accents, lowercase)
    return any(code in white for key, values in mapping.items() if key not in cleaned for code in values)


def regex_class(pairs):
    """An RE2 character class matching one character of the ranges `pairs`."""
    return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in pairs) + "]"


@functools.cache
def patterns():
    """RE2 classes of the range tables, by name (`deleted`, `spaces`, `chinese`, `whitespace`, `punctuation`)."""
    return {name: regex_class(tables()[name]) for name in RANGE_TABLES}
