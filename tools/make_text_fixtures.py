#!/usr/bin/env python3
"""Writes tests/data/text_fixtures.json: what Python says about attnviz's text inputs.

attnviz lower-cases and normalises with ICU (core/text/unicode.cpp, core/text/text.cpp); the C++
tests (tests/base/test_unicode.cpp) compare it with every entry written here:

  lower               sample sentences in many scripts and Python's str.lower()
  lower_single        every code point that str.lower() changes, with its lower case
  sigma_*             Final_Sigma context classes of every code point, seen through
                      str.lower() itself (ranges of code points)
  nfc                 unicodedata.normalize('NFC', s)
  preprocess          d2l's preprocess(), restated below, of the NFC form of each input
                      (attnviz normalises NFC first; on NFC input the two are the same)
  graphemes           hand-written (the standard library has no grapheme segmentation):
                      expected extended grapheme clusters (UAX #29) of NFC text
  corpora             d2l's whole-file preprocessing and tokenisation of the test corpora
                      tests/data/eng-rus.tsv and eng-ell.tsv: token -> count per side

Run with the Python whose Unicode version is recorded (3.11: Unicode 14.0):
    python3 tools/make_text_fixtures.py          # from the repository root
Only the standard library is used; d2l is restated here, not imported.
"""
import collections
import json
import pathlib
import sys
import unicodedata

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "text_fixtures.json"
CORPORA = ["eng-rus.tsv", "eng-ell.tsv"]


# --- d2l (d2l.ai, MTFraEng in chapter 10.5), restated ------------------------------

def d2l_preprocess(text):
    """MTFraEng._preprocess: note it reads text[i - 1] from the string before lower()."""
    text = text.replace('\u202f', ' ').replace('\xa0', ' ')
    no_space = lambda char, prev_char: char in ',.!?' and prev_char != ' '
    out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char
           for i, char in enumerate(text.lower())]
    return ''.join(out)


def d2l_tokenize(text):
    """MTFraEng._tokenize without the '<eos>' it appends."""
    src, tgt = [], []
    for line in text.split('\n'):
        parts = line.split('\t')
        if len(parts) == 2:
            src.append([t for t in parts[0].split(' ') if t])
            tgt.append([t for t in parts[1].split(' ') if t])
    return src, tgt


# --- inputs -------------------------------------------------------------------------

LOWER = [
    "Hello, World!", "ÉTÉ À ÇA", "ŒUVRE ÎLE ÔTE ÛË Ÿ", "ŁÓDŹ Ž",
    "STRASSE ẞ ß", "İstanbul İZMİR IĞDIR ı", "Iİ",
    "Привет, МИР! Ёлка ЁЖ", "КИЇВ ЄВРОПА Ґ", "ЂУРЂЕВ Љ Њ Џ", "ӁӐӒ Ԛ",
    "ΟΔΥΣΣΕΥΣ", "Σ", "ΑΣ", "ΑΣ.", "ΟΔΟΣ.ΑΛΛΑ", "ΑΣ'Α", "Σ'ΑΓΑΠΩ", "ΑΣ\u0345",
    "Α\u0345Σ", "ΑʰΣ", "ΑΣʰ", "ΑΣʰΑ", "1Σ", "ΑΣ1", "Σ Σ", "ΑΣ-", "ΑΣΑ", "ΌΣΟΣ ΣΟΣ",
    "ΑΣ\u0301", "'Σ'", "ΣΑΣ ΤΟΥΣ.", "ΑΣ\u00ad", "Α\u200dΣ", "ΆΈΉΊΌΎΏ ΪΫ ΐΰ",
    "ԱՐԱՄ Ե", "ᲯᲐᲠᲯᲘᲐ", "ᏣᎳᎩ Ꭰ", "𐐀𐐁𐐂", "𐒰𐒱", "𞤀𞤁", "𑢠", "𖹀", "𐕰𐕱",
    "ǄǅǆǇǈ", "ⅫⅤ", "ⒶⒷ", "ＡＢＣ", "K Å Ω", "ȺȾ", "ⰀⰁ", "ⲀⲂ",
    "ΆΝΝΑ", "中文 日本語 한국어", "العربية", "עברית", "हिन्दी", "😀👍🏽🇫🇷",
    "A\u0301B\u0308", "E\u0301TE\u0301",
]

NFC = [
    "abc", "e\u0301", "A\u030a", "\u212b", "\u2126", "\u1100\u1161\u11a8", "\u037e",
    "\u0387", "e\u0302\u0301", "A\u0323\u0307", "\u1e0b\u0323", "\u0958", "\u0340",
    "ÉTÉ", "E\u0301TE\u0301", "Ο\u0301ΣΟΣ", "\ufb01", "한국어",
]

PREPROCESS = [
    "Go.", "Hi!", "I'm OK, thanks.", "Who?!", "Really ?", ".Hello", "Wait...",
    "Vraiment\u202f?", "Oui\u00a0!", "ÉTÉ À ÇA", "×ß", "",
    "Привет, мир!", "ПРИВЕТ!", "Ёлка?", "ΟΔΥΣΣΕΥΣ!", "ΟΔΟΣ.ΑΛΛΑ", "Σ'ΑΓΑΠΩ.",
    "Είναι Σ;", "Ο ΔΡΟΜΟΣ.", "ΣΑΣ, ΤΟΥΣ!",
    # 'İ' lowers to two characters: d2l then reads the previous character one place
    # further on, so already-spaced punctuation after it gets a second space.
    "İ.", "İstanbul, Türkiye", "İ ?", "Go İ , ok .",
    # NFD input: attnviz normalises to NFC first (the expectation is d2l of the NFC form).
    "E\u0301TE\u0301 !", "Cafe\u0301, s'il vous plai\u0302t.", "\u037e", "ΤΙ ΚΑΝΕΙΣ\u037e",
    "Straße. STRASSE.", "ᏣᎳᎩ, 𐐀!", "Ｈｅｌｌｏ，ｗｏｒｌｄ！",
]

# Two or more 'İ': d2l indexes past the end of its text and raises IndexError.
D2L_RAISES = ["İİ.", "İzmir, İstanbul."]

# Hand-written: Python's standard library has no grapheme segmentation. Expected
# extended grapheme clusters (UAX #29) of the NFC form of each input.
GRAPHEMES = [
    ["ab c", ["a", "b", " ", "c"]],
    ["été", ["é", "t", "é"]],
    ["e\u0301t", ["é", "t"]],                                  # NFC composes first
    ["q\u0307\u0323x", ["q\u0323\u0307", "x"]],                # no precomposed form: one cluster, reordered by NFC
    ["i\u0307stanbul", ["i\u0307", "s", "t", "a", "n", "b", "u", "l"]],  # 'İ'.lower()
    ["€𝄞x", ["€", "𝄞", "x"]],
    ["👨\u200d👩\u200d👧!", ["👨\u200d👩\u200d👧", "!"]],     # emoji ZWJ sequence
    ["👍🏽👍", ["👍🏽", "👍"]],                                  # emoji modifier
    ["🇫🇷🇩🇪", ["🇫🇷", "🇩🇪"]],                                  # regional indicator pairs
    ["a\r\nb", ["a", "\r\n", "b"]],
    ["कि", ["कि"]],                                              # consonant + vowel sign
    ["\u1100\u1161\u11a8", ["각"]],                              # Hangul jamo compose under NFC
    ["x\u200dy", ["x\u200d", "y"]],                              # ZWJ extends, but joins no letters
    ["Привет", ["П", "р", "и", "в", "е", "т"]],
]


def ranges(code_points):
    out = []
    for c in code_points:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def main():
    all_cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    fixtures = {
        "generator": "tools/make_text_fixtures.py",
        "python": sys.version.split()[0],
        "unicode": unicodedata.unidata_version,
        "lower": [{"input": s, "lower": s.lower()} for s in LOWER],
        "lower_single": [[c, chr(c).lower()] for c in all_cps if chr(c).lower() != chr(c)],
        # ("Α" + c + "Σ").lower() ends in final 'ς' iff c is cased or case-ignorable.
        "sigma_cased_or_ignorable": ranges(
            [c for c in all_cps if ("Α" + chr(c) + "Σ").lower()[-1] == "ς"]),
        # ("ΑΣ" + c).lower() keeps 'σ' iff c is cased and not case-ignorable.
        "sigma_cased_not_ignorable": ranges(
            [c for c in all_cps if ("ΑΣ" + chr(c)).lower()[1] == "σ"]),
        "nfc": [{"input": s, "nfc": unicodedata.normalize("NFC", s)} for s in NFC],
        "preprocess": [{"input": s, "expected": d2l_preprocess(unicodedata.normalize("NFC", s))}
                       for s in PREPROCESS],
        "d2l_raises": D2L_RAISES,
        "graphemes": [{"input": s, "clusters": c} for s, c in GRAPHEMES],
        "corpora": {},
    }
    for s in D2L_RAISES:
        try:
            d2l_preprocess(s)
            sys.exit(f"expected d2l's preprocess to raise on {s!r}")
        except IndexError:
            pass
    for s, clusters in GRAPHEMES:  # the hand-written clusters must at least add up
        assert "".join(clusters) == unicodedata.normalize("NFC", s), s
    for name in CORPORA:
        text = (ROOT / "tests" / "data" / name).read_text(encoding="utf-8")
        assert unicodedata.is_normalized("NFC", text), f"{name} must be NFC (d2l does not normalise)"
        src, tgt = d2l_tokenize(d2l_preprocess(text))  # d2l preprocesses the whole file at once
        fixtures["corpora"][name] = {
            "pairs": len(src),
            "src": dict(sorted(collections.Counter(t for s in src for t in s).items())),
            "tgt": dict(sorted(collections.Counter(t for s in tgt for t in s).items())),
        }
    OUT.write_text(json.dumps(fixtures, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(fixtures['lower_single'])} lower-case mappings, "
          f"{len(PREPROCESS)} preprocess cases, {len(CORPORA)} corpora (Python {fixtures['python']}, "
          f"Unicode {fixtures['unicode']})")


if __name__ == "__main__":
    main()
