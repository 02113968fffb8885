"""How close an answer is to the expected one: chrF and character-level ROUGE-L, in pure Python.

Both work on characters, so they need no word segmentation and treat Chinese and English alike
(docs/verify.md explains the choice and the thresholds).

- chrF (Popović 2015): character n-grams of orders 1..6 (whitespace removed), precision and recall
  each averaged over the orders, then combined as an F-score with beta = 2
  (recall counts twice as much as precision: an answer that says everything expected plus a little
  more scores higher than one that stops half-way).
- ROUGE-L on characters: the longest common subsequence of the two strings, as an F1 of its
  precision (over the answer) and recall (over the expected text). It rewards the right words in the
  right order, and tolerates insertions.

Texts are normalized first: Unicode NFKC (full-width ASCII and punctuation become their half-width
forms: "？" and "?" are the same answer), case-folded, whitespace collapsed.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass

CHRF_ORDER = 6
CHRF_BETA = 2.0


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _ngrams(chars: str, n: int) -> Counter:
    return Counter(chars[i:i + n] for i in range(len(chars) - n + 1))


def chrf(hypothesis: str, reference: str, *, order: int = CHRF_ORDER, beta: float = CHRF_BETA) -> float:
    """chrF in [0, 1]. Orders that neither text is long enough for are left out of the averages
    (sacreBLEU's "effective order"), so very short answers are still scored fairly."""
    hyp = "".join(normalize(hypothesis).split())
    ref = "".join(normalize(reference).split())
    if not hyp and not ref:
        return 1.0
    if not hyp or not ref:
        return 0.0
    precisions, recalls = [], []
    for n in range(1, order + 1):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        h_total, r_total = sum(h.values()), sum(r.values())
        if not h_total or not r_total:
            continue
        matched = sum((h & r).values())
        precisions.append(matched / h_total)
        recalls.append(matched / r_total)
    if not precisions:
        return 0.0
    p, r = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    if p == 0 and r == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r)


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence (O(len(a) * len(b)) time, O(len(b)) memory)."""
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for ca in a:
        current = [0]
        for j, cb in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if ca == cb else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(hypothesis: str, reference: str) -> float:
    """Character-level ROUGE-L F1 in [0, 1]."""
    hyp, ref = normalize(hypothesis), normalize(reference)
    if not hyp and not ref:
        return 1.0
    if not hyp or not ref:
        return 0.0
    lcs = lcs_length(hyp, ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(hyp), lcs / len(ref)
    return 2 * p * r / (p + r)


@dataclass(frozen=True)
class Similarity:
    chrf: float
    rouge_l: float

    @property
    def score(self) -> float:
        """The score devtune judges by: chrF (ROUGE-L is shown beside it)."""
        return self.chrf


def similarity(answer: str, expected: str) -> Similarity:
    return Similarity(chrf=chrf(answer, expected), rouge_l=rouge_l(answer, expected))
