"""Which generated pairs are kept, and why each other one is not.

Reasons, checked in this order (the first that applies is the pair's reason):

    error          the server refused the request (the journal keeps its answer)
    invalid-reply  the reply was not the JSON asked for
    truncated      the reply hit the reply token limit (finish_reason "length")
    empty          an empty question or answer (the model found no answer in the chunk)
    ungrounded     the answer's grounding score is below the threshold
    duplicate      the same question (case, spaces and punctuation aside) as a pair kept before it
    near-duplicate a question whose character 3-grams (punctuation and case aside) overlap those of a
                   question kept before it by at least 0.7 (Jaccard; candidates from datasketch's MinHash LSH,
                   each verified exactly). Questions are short: the 5-grams of `lint --near-dups` would miss
                   "How long does a refund take?" against "How long does the refund take?" (0.73 here)

The grounding score is cheap and explainable: the share of the answer's terms — words of Latin letters or
digits, and character pairs of CJK text — that also occur in the chunk. An answer that restates the chunk
scores near 1, one that invents its facts near 0; the threshold is shown in every report.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

NUM_PERM = 64

DEFAULT_GROUNDING = 0.5
NEAR_DUPLICATE = 0.7  # Jaccard of the questions' character 3-grams
LSH_THRESHOLD = 0.5  # looser than NEAR_DUPLICATE: LSH only proposes, the exact Jaccard decides
REASONS = ("error", "invalid-reply", "truncated", "empty", "ungrounded", "duplicate", "near-duplicate")
_LATIN = re.compile(r"[0-9]+(?:[.,:][0-9]+)*|[^\W\d_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")


def terms(text: str) -> set[str]:
    """Words (lower case) and digit runs outside CJK, character bigrams (and single characters) inside it."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: set[str] = set()
    for run in _CJK.findall(text):
        out.update(run[i:i + 2] for i in range(len(run) - 1)) if len(run) > 1 else out.add(run)
    for word in _LATIN.findall(_CJK.sub(" ", text)):
        out.add(word)
    return out


def grounding_score(answer: str, chunk: str) -> float:
    """Share of the answer's terms found in the chunk (0 for an answer without terms)."""
    said = terms(answer)
    if not said:
        return 0.0
    return len(said & terms(chunk)) / len(said)


def question_key(question: str) -> str:
    """A question as compared for exact duplicates: NFKC, lower case, letters and digits only."""
    text = unicodedata.normalize("NFKC", question).lower()
    return "".join(c for c in text if c.isalnum())


def question_grams(question: str) -> set[str]:
    text = " ".join(re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", question).lower()).split())
    return {text[i:i + 3] for i in range(max(1, len(text) - 2))}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


@dataclass
class Pair:
    """One generated pair, with what the filters found. `reason` empty: kept."""

    question: str
    answer: str
    chunk_text: str
    problem: str = ""  # error | invalid-reply | truncated, found while parsing the reply
    grounding: float = 0.0
    reason: str = ""
    detail: str = ""  # e.g. the earlier question it duplicates


def apply_filters(pairs: list[Pair], *, min_grounding: float = DEFAULT_GROUNDING) -> Counter:
    """Set `grounding` and `reason` on each pair (in order: earlier pairs win duplicates); the count per reason."""
    from datasketch import MinHash, MinHashLSH
    from xxhash import xxh32_intdigest

    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    grams: dict[str, set[str]] = {}
    kept_keys: dict[str, str] = {}
    counts: Counter = Counter()
    for n, pair in enumerate(pairs):
        pair.grounding = round(grounding_score(pair.answer, pair.chunk_text), 3) if pair.answer else 0.0
        pair.reason = _reason(pair, min_grounding)
        if pair.reason != pair.problem or not pair.problem:
            pair.detail = ""  # a reply's problem keeps what the server said; filters say their own
        if not pair.reason:
            key = question_key(pair.question)
            if key in kept_keys:
                pair.reason, pair.detail = "duplicate", kept_keys[key]
            else:
                mine = question_grams(pair.question)
                sig = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=xxh32_intdigest)
                sig.update_batch([g.encode("utf-8", "surrogatepass") for g in mine])
                similar = sorted((o for o in lsh.query(sig) if jaccard(grams[o], mine) >= NEAR_DUPLICATE), key=int)
                if similar:
                    pair.reason, pair.detail = "near-duplicate", pairs[int(similar[0])].question
                else:
                    kept_keys[key] = pair.question
                    grams[str(n)] = mine
                    lsh.insert(str(n), sig)
        if pair.reason:
            counts[pair.reason] += 1
    return counts


def _reason(pair: Pair, min_grounding: float) -> str:
    if pair.problem:
        return pair.problem
    if not pair.question.strip() or not pair.answer.strip():
        return "empty"
    if pair.grounding < min_grounding:
        return "ungrounded"
    return ""
