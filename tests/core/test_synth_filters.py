"""The filters of `data synth` on hand-made pairs: each reason, its order, and the counts."""

from core.data.synth.filters import Pair, apply_filters, grounding_score, question_key, terms

CHUNK = ("Refunds reach the original payment method in 3 to 5 working days after the warehouse receives the "
         "parcel. 电子发票在订单完成后24小时内发送到您的邮箱。")


def test_grounding_is_the_share_of_the_answer_found_in_the_chunk():
    assert grounding_score("Refunds reach the original payment method in 3 to 5 working days.", CHUNK) == 1.0
    assert grounding_score("We refund in cash at any of our shops on Sundays.", CHUNK) < 0.3
    assert grounding_score("电子发票在24小时内发送到邮箱。", CHUNK) > 0.9
    assert grounding_score("纸质发票需要到门店领取。", CHUNK) < 0.4
    assert grounding_score("", CHUNK) == 0.0
    assert {"3", "5", "refunds"} <= terms("Refunds: 3 to 5!") and "发票" in terms("电子发票")


def test_every_reason_is_found_and_counted():
    pairs = [
        Pair("How long does a refund take?", "Refunds reach the original payment method in 3 to 5 working days.",
             CHUNK),
        Pair("How long does a refund take ?!", "In 3 to 5 working days.", CHUNK),  # same question
        Pair("How long does the refund take?", "Refunds reach the payment method in 3 to 5 working days.",
             CHUNK),  # near duplicate
        Pair("Can I pay in bitcoin?", "Yes, we accept bitcoin and gold bars everywhere.", CHUNK),
        Pair("When is the invoice sent?", "", CHUNK),
        Pair("", "Refunds reach the original payment method.", CHUNK),
        Pair("Where is my parcel?", "", CHUNK, problem="truncated"),
        Pair("", "", CHUNK, problem="invalid-reply"),
        Pair("电子发票什么时候发？", "电子发票在订单完成后24小时内发送到您的邮箱。", CHUNK),
    ]
    counts = apply_filters(pairs, min_grounding=0.5)
    assert [p.reason for p in pairs] == ["", "duplicate", "near-duplicate", "ungrounded", "empty", "empty",
                                         "truncated", "invalid-reply", ""]
    assert counts == {"duplicate": 1, "near-duplicate": 1, "ungrounded": 1, "empty": 2, "truncated": 1,
                      "invalid-reply": 1}
    assert pairs[1].detail == pairs[0].question and pairs[2].detail == pairs[0].question
    assert pairs[3].grounding < 0.5 <= pairs[0].grounding


def test_a_rejected_pair_does_not_make_a_later_one_a_duplicate():
    pairs = [Pair("Can I return shoes?", "Only on the moon.", CHUNK),
             Pair("Can I return shoes?", "Refunds reach the original payment method in 3 to 5 working days.", CHUNK)]
    apply_filters(pairs, min_grounding=0.5)
    assert [p.reason for p in pairs] == ["ungrounded", ""]


def test_the_threshold_decides_and_zero_keeps_everything_with_words():
    pairs = [Pair("Q1?", "Something else entirely unrelated.", CHUNK)]
    assert apply_filters(pairs, min_grounding=0.0) == {}
    assert apply_filters(pairs, min_grounding=0.9) == {"ungrounded": 1}


def test_question_key_ignores_case_width_and_punctuation():
    assert question_key("How long?") == question_key("how  LONG ？") == "howlong"


def test_near_duplicates_need_most_of_their_wording_in_common():
    pairs = [Pair(q, "Refunds reach the original payment method in 3 to 5 working days.", CHUNK) for q in
             ("How long does a refund take?", "How long does shipping take?", "How long does the refund take?",
              "电子发票什么时候发？", "电子发票什么时候发送？", "Can I return a dress?")]
    apply_filters(pairs, min_grounding=0.0)
    assert [p.reason for p in pairs] == ["", "", "near-duplicate", "", "near-duplicate", ""]
