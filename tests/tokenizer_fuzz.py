"""A differential fuzz corpus for tokenizers: texts that probe every Unicode category.

The corpus is generated (seeded, no files): for each general category of
Unicode (control and format characters, every kind of space and line
separator, combining marks, letters of many scripts, CJK, emoji, symbols,
private use, unassigned code points), sentences that mix such characters
with ordinary words, plus long words, long runs without spaces, mixed
scripts and the special-token strings of every family. Lone surrogates
(Cs) cannot be encoded as UTF-8 and are refused by `check_texts`, so they
appear only escaped (as the text `\\ud800`).

Example:
```python
from tokenizer_fuzz import fuzz_corpus

texts = fuzz_corpus()  # about 2,000 texts, the same on every run
```
"""

import random
import sys
import unicodedata

CATEGORIES = "Cc Cf Co Cn Zs Zl Zp Mn Mc Me Lu Ll Lt Lm Lo Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So".split()
WORDS = "The weather is nice today a man plays guitar café naïve résumé Straße ΣΊΣΥΦΟΣ İstanbul".split()
SCRIPTS = (
    "Ελληνικά",
    "Русский язык",
    "עברית",
    "العربية",
    "हिन्दी",
    "ไทย",
    "한국어",
    "日本語のテキスト",
    "中文句子",
    "ᚠᛇᚻ",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
)
EMOJI = ("😀", "👍🏽", "👨‍👩‍👧", "🇺🇸", "❤️", "🥰", "🫠", "1️⃣")
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "<s>", "</s>", "<mask>", "<pad>", "<unk>")


def characters_by_category(max_code_point=sys.maxunicode):
    """`{category: [characters]}` for every code point except surrogates."""
    table = {c: [] for c in CATEGORIES}
    for code in range(max_code_point + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        category = unicodedata.category(chr(code))
        if category in table:
            table[category].append(chr(code))
    return table


def fuzz_corpus(per_category=40, seed=0):
    """The corpus: a list of `str`, the same for a given `seed`.

    Args:
        per_category: int. Texts built around each Unicode category.
        seed: int. The random seed.
    """
    rng = random.Random(seed)
    table = characters_by_category()
    texts = []
    for category in CATEGORIES:
        chars = table[category]
        # Every character of the small categories once, a sample of the large ones.
        singles = chars if len(chars) <= 64 else rng.sample(chars, 64)
        texts += [f"The weather is{ch}nice today." for ch in singles]
        for _ in range(per_category):
            words = rng.sample(WORDS, 4)
            picks = rng.choices(chars, k=rng.randint(1, 4))
            pieces = words + picks
            rng.shuffle(pieces)
            glue = rng.choice(["", " ", "  "])
            texts.append(glue.join(pieces))
    # Combining marks on letters, stacked.
    marks = table["Mn"] + table["Mc"] + table["Me"]
    texts += ["".join(c + "".join(rng.choices(marks, k=rng.randint(1, 3))) for c in "naive cafe") for _ in range(40)]
    texts += [unicodedata.normalize(form, "Ça va? Ærøskøbing, ﬁne ½ ² Ⅻ ﹏") for form in ("NFC", "NFD", "NFKC", "NFKD")]
    texts += list(SCRIPTS) + [" ".join(rng.sample(SCRIPTS, 3)) for _ in range(20)]
    texts += list(EMOJI) + ["".join(rng.choices(EMOJI, k=6)) + " ok" for _ in range(20)]
    # Long words and long runs without spaces (cut by truncation, not by the tokenizer).
    texts += ["a" * n for n in (99, 100, 101, 200)] + ["é" * n for n in (60, 99, 100, 101)]
    texts += ["supercalifragilistic" * 30, "ab" * 2_000, "x" * 20_000, "日本" * 500, "🙂" * 300]
    texts += ["word " * 600, "x" * 5_000 + " tail", "a-b" * 400, "." * 1_000]
    # Whitespace only, empty, escaped surrogates, the special tokens inside text.
    texts += ["", " ", "\t\n\r", "\u00a0", "\u3000\u2028\u2029", "\\ud800 escaped", "\x00start", "end\x00"]
    texts += [f"before {t} after" for t in SPECIAL_TOKENS] + [" ".join(SPECIAL_TOKENS)]
    texts += ["The weather is\u00adnice", "zero\u200bwidth", "bidi\u202eevil", "bom\ufeffhere", "\ufffdrepl"]
    return texts
