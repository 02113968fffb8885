import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.serve.similarity import chrf, lcs_length, normalize, rouge_l, similarity

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
    assert rouge_l("abcd", "abxd") == pytest.approx(0.75)  # LCS 3: P = R = 3/4


def test_similarity_scores_by_chrf():
    sim = similarity("Yes, we ship to 40 countries.", "Yes, we ship to 40 countries!")
    assert sim.score == sim.chrf and 0.8 < sim.chrf < 1.0 and 0.9 < sim.rouge_l < 1.0


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
