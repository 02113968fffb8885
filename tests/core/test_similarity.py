import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.serve.similarity import Measures, chrf, exact_text, lcs_length, normalize, rouge_l, similarity, tokens

REF = "在“我的订单”点击“申请退款”，3到5个工作日原路退回。"


def test_identical_and_disjoint():
    assert chrf(REF, REF) == pytest.approx(1.0)
    assert rouge_l(REF, REF) == pytest.approx(1.0)
    assert chrf("abc", "xyz") == 0.0 and rouge_l("abc", "xyz") == 0.0
    assert chrf("", "") == 1.0 and chrf("", "x") == 0.0 and rouge_l("x", "") == 0.0


def test_normalization_ignores_width_case_and_spaces():
    assert normalize("  Hello，ＷＯＲＬＤ？ ") == "hello,world?"
    assert chrf("支付宝、微信支付？", "支付宝、微信支付?") == pytest.approx(1.0)
    assert chrf("Refunds  arrive", "refunds arrive") == pytest.approx(1.0)


def test_measured_answers_of_the_tiny_model_order_as_expected():
    # real answers of the tiny model at 40 and 20 epochs (docs/verify.md)
    half_right = "质量问题由我们承担，超时请提供订单号为您加急。"
    assert 0.3 < chrf(half_right, "质量问题由我们承担，个人原因由您承担。") < 0.6
    gibberish = "etting?,\"etting?,\"退货运费需要您自行承担etting?"
    assert chrf(gibberish, REF) < 0.1
    assert chrf(REF[:-6], REF) > chrf(REF[:-14], REF) > chrf(gibberish, REF)


def test_recall_weighs_more_than_precision():
    ref = "Refunds arrive within 3 to 5 business days."
    longer = ref + " Contact us if they do not."
    shorter = "Refunds arrive within 3"
    assert chrf(longer, ref) > chrf(shorter, ref)


def test_lcs_and_rouge_l_values():
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    assert lcs_length(["a", "b", "c"], ["b", "c", "a"]) == 2
    assert rouge_l("a b c d", "a b x d") == pytest.approx(0.75)  # LCS 3 words: P = R = 3/4
    assert rouge_l("退款三天", "退款五天") == pytest.approx(0.75)  # Chinese: one token per character
    assert rouge_l("Refunds take 3 days", "refunds take three days") == pytest.approx(0.75)


def test_rouge_l_tokens_are_cjk_characters_and_words():
    assert tokens(normalize("退款 Refund3天, ok_go！")) == ["退", "款", "refund3", "天", "ok", "go"]
    assert rouge_l("。！？", "...") == 1.0  # nothing to compare on either side


PAIRS = [("在我的订单点击申请退款，5个工作日退回。", REF), ("Refunds arrive in 5 days, contact us.",
          "Refunds arrive within 3 to 5 business days."), ("a", "a"), ("退款 refund 3 天", "退款需要3天 refund"),
         ("", "x"), ("Yes.", "Yes, to 40 countries."), ("x y z .", "x y z ."), ("完全不同", "totally different")]


@pytest.mark.parametrize("answer, reference", PAIRS)
def test_chrf_and_bleu_are_sacrebleus_sentence_scores(answer, reference):
    from sacrebleu.metrics import BLEU, CHRF

    hyp, ref = normalize(answer), normalize(reference)
    bleu = BLEU(tokenize="zh" if any("\u4e00" <= c <= "\u9fff" for c in ref) else "13a", effective_order=True)
    m = Measures()
    want_chrf = CHRF().sentence_score(hyp, [ref]).score / 100 if hyp else 0.0
    want_bleu = min(1.0, bleu.sentence_score(hyp, [ref]).score / 100) if hyp else 0.0
    assert m.chrf(answer, reference) == pytest.approx(want_chrf, abs=1e-12)
    assert m.bleu(answer, reference) == pytest.approx(want_bleu, abs=1e-12)
    assert m.bleu(answer, reference) == pytest.approx(want_bleu, abs=1e-12)  # the second time from the cache


def test_bleu_tokenizes_chinese_by_character():
    m = Measures()
    # with 13a the Chinese sentence is one token, and any difference scores 0
    assert m.bleu("在我的订单点击申请退款", "在我的订单点击申请退款吧") > 0.5
    assert m.bleu("Refunds take three business days", "Refunds take three business days") == pytest.approx(1.0)
    assert m.bleu("completely unrelated words here", "Refunds take three business days") == 0.0


def test_exact_match_normalises_width_case_punctuation_and_spaces():
    m = Measures()
    assert exact_text("  Hello，ＷＯＲＬＤ？ ") == "helloworld"
    assert m.exact("３到５个工作日。", "3 到 5 个工作日")
    assert m.exact("Yes, to 40 countries!", "yes to 40 countries")
    assert not m.exact("Yes, to 41 countries", "Yes, to 40 countries")
    assert not m.exact("退款三天", "退款五天")
    scores = m.score("Yes, to 40 countries!", "yes to 40 countries")
    assert scores.exact and scores.as_dict()["exact"] is True and 0.0 <= scores.bleu <= 1.0


def test_similarity_scores_by_chrf():
    sim = similarity("Yes, we ship to 40 countries.", "Yes, we ship to 40 countries!")
    assert sim.score == sim.chrf and 0.8 < sim.chrf < 1.0
    assert sim.rouge_l == 1.0  # the same words in the same order: punctuation is no token


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_scores_are_bounded_and_rouge_l_is_symmetric(a, b):
    for value in (chrf(a, b), rouge_l(a, b)):
        assert 0.0 <= value <= 1.0 + 1e-9
    assert rouge_l(a, b) == pytest.approx(rouge_l(b, a))


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda s: normalize(s).replace(" ", "")))
def test_a_text_matches_itself(a):
    assert chrf(a, a) == pytest.approx(1.0) and rouge_l(a, a) == pytest.approx(1.0)
