"""How close an answer is to the expected one: chrF, BLEU, ROUGE-L and exact match, for Chinese and English.

- chrF (Popović 2015) and BLEU are sacreBLEU's own (`sacrebleu.metrics.CHRF`, `BLEU`), computed exactly as its
  `sentence_score` does, on 0..1 instead of 0..100: chrF on character 1..6-grams (whitespace removed), precision
  and recall averaged over the orders that both texts are long enough for, then an F-score with beta = 2 (recall
  counts twice: an answer that says everything expected plus a little more beats one that stops half-way);
  sentence BLEU with effective order, tokenized with sacreBLEU's Chinese tokenizer (`zh`: every CJK character a
  token, the rest as `13a`) when the reference has Chinese characters, else `13a`. `Measures` calls sacreBLEU's
  per-segment steps itself so that a reference shared by several answers (base and tuned) is read once; a test
  proves its numbers equal `sentence_score`'s.
- ROUGE-L: the longest common subsequence of the two token sequences as an F1 of its precision (over the answer)
  and recall (over the reference). Tokens are CJK characters one by one and words (letter and digit runs)
  elsewhere, the usual practice for Chinese ROUGE. `rouge-score` does not fit: its tokenizer drops every
  non-ASCII character, so any Chinese answer would score 0. The LCS is rapidfuzz's (`LCSseq`, compiled).
- Exact match after normalising: the same text once width, case, punctuation and whitespace are set aside.

Texts are normalized first: Unicode NFKC (full-width ASCII and punctuation become their half-width forms: "？"
and "?" are the same answer), case-folded, whitespace collapsed. sacreBLEU and rapidfuzz are imported when
first used (docs/verify.md explains the measures and how to read them).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

CHRF_ORDER = 6
CHRF_BETA = 2
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_HAS_CJK = re.compile(f"[{_CJK}]")
_TOKEN = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def has_chinese(text: str) -> bool:
    return _HAS_CJK.search(text) is not None


@lru_cache(maxsize=1)
def _punctuation_and_space():
    import regex  # sacreBLEU's own dependency: Unicode classes such as \p{P}

    return regex.compile(r"[\p{P}\s]+")


def exact_text(text: str) -> str:
    """What exact match compares: the normalized text without punctuation and without whitespace."""
    return _punctuation_and_space().sub("", normalize(text))


def tokens(text: str) -> list[str]:
    """ROUGE-L's tokens of a normalized text: each CJK character, each run of letters or digits."""
    return _TOKEN.findall(text)


def lcs_length(a, b) -> int:
    """Length of the longest common subsequence of two strings or token lists (rapidfuzz, compiled)."""
    from rapidfuzz.distance import LCSseq

    return int(LCSseq.similarity(a, b))


def _f1(common: int, hyp_len: int, ref_len: int) -> float:
    if common == 0:
        return 0.0
    p, r = common / hyp_len, common / ref_len
    return 2 * p * r / (p + r)


@dataclass(frozen=True)
class AnswerScores:
    chrf: float  # 0..1
    bleu: float  # 0..1
    rouge_l: float  # 0..1
    exact: bool

    def as_dict(self) -> dict:
        return {"chrf": self.chrf, "bleu": self.bleu, "rouge_l": self.rouge_l, "exact": self.exact}


@dataclass
class _Reference:
    text: str  # normalized
    tokens: list[str]
    exact: str
    chrf_info: dict
    bleu_info: dict
    chinese: bool


class Measures:
    """Every measure of answers against references; each reference is read once (`score` many answers against
    the same reference text reads it from a cache of the last `cache_size` references)."""

    def __init__(self, cache_size: int = 4096) -> None:
        from sacrebleu.metrics import BLEU, CHRF

        self._chrf_metric = CHRF(char_order=CHRF_ORDER, word_order=0, beta=CHRF_BETA)
        self._bleu_metric = {True: BLEU(tokenize="zh", effective_order=True), False: BLEU(effective_order=True)}
        self._reference = lru_cache(maxsize=cache_size)(self._read_reference)

    def _read_reference(self, reference: str) -> _Reference:
        text = normalize(reference)
        chinese = has_chinese(text)
        bleu = self._bleu_metric[chinese]
        return _Reference(text, tokens(text), exact_text(reference), self._chrf_metric._extract_reference_info([text]),
                          bleu._extract_reference_info([bleu._preprocess_segment(text)]), chinese)

    def _chrf(self, hyp: str, ref: _Reference) -> float:
        if not hyp or not ref.text:
            return 1.0 if hyp == ref.text else 0.0
        return self._chrf_metric._compute_f_score(self._chrf_metric._compute_segment_statistics(hyp, ref.chrf_info)) / 100

    def _bleu(self, hyp: str, ref: _Reference) -> float:
        if not hyp or not ref.text:
            return 1.0 if hyp == ref.text else 0.0
        metric = self._bleu_metric[ref.chinese]
        stats = metric._compute_segment_statistics(metric._preprocess_segment(hyp), ref.bleu_info)
        return min(1.0, metric._compute_score_from_stats(stats).score / 100)

    @staticmethod
    def _rouge_l(hyp: str, ref: _Reference) -> float:
        hyp_tokens = tokens(hyp)
        if not hyp_tokens or not ref.tokens:
            return 1.0 if not hyp_tokens and not ref.tokens else 0.0
        return _f1(lcs_length(hyp_tokens, ref.tokens), len(hyp_tokens), len(ref.tokens))

    def chrf(self, answer: str, reference: str) -> float:
        """chrF in [0, 1]; 1.0 when both are empty, 0.0 when only one is."""
        return self._chrf(normalize(answer), self._reference(reference))

    def bleu(self, answer: str, reference: str) -> float:
        return self._bleu(normalize(answer), self._reference(reference))

    def rouge_l(self, answer: str, reference: str) -> float:
        return self._rouge_l(normalize(answer), self._reference(reference))

    def exact(self, answer: str, reference: str) -> bool:
        return exact_text(answer) == self._reference(reference).exact

    def score(self, answer: str, reference: str) -> AnswerScores:
        """Every measure at once (the answer normalized once, the reference read from the cache)."""
        ref = self._reference(reference)
        hyp = normalize(answer)
        return AnswerScores(chrf=round(self._chrf(hyp, ref), 4), bleu=round(self._bleu(hyp, ref), 4),
                            rouge_l=round(self._rouge_l(hyp, ref), 4),
                            exact=_punctuation_and_space().sub("", hyp) == ref.exact)


@lru_cache(maxsize=1)
def measures() -> Measures:
    """The process's one `Measures` (its reference cache is shared by every caller)."""
    return Measures()


def chrf(hypothesis: str, reference: str) -> float:
    return measures().chrf(hypothesis, reference)


def rouge_l(hypothesis: str, reference: str) -> float:
    return measures().rouge_l(hypothesis, reference)


@dataclass(frozen=True)
class Similarity:
    chrf: float
    rouge_l: float

    @property
    def score(self) -> float:
        """The score devtune's closed-loop check judges by: chrF (ROUGE-L is shown beside it)."""
        return self.chrf


def similarity(answer: str, expected: str) -> Similarity:
    m = measures()
    return Similarity(chrf=m.chrf(answer, expected), rouge_l=m.rouge_l(answer, expected))
