"""Findings: the fast sort (by line in C, ties by the full key) orders exactly as the full key does."""

from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.findings import RULES, Finding, finding, sort_findings

FINDINGS = st.lists(st.builds(lambda rule, line, column: finding(rule, line, f"L{line}: {rule}", column=column),
                              st.sampled_from(sorted(RULES)), st.integers(1, 12),
                              st.one_of(st.none(), st.integers(1, 4))), max_size=60)


@settings(max_examples=200, deadline=None)
@given(findings=FINDINGS)
def test_sort_findings_orders_as_the_full_key(findings):
    fast = list(findings)
    sort_findings(fast)
    expected = sorted(findings, key=Finding.sort_key)
    assert [f.sort_key() for f in fast] == [f.sort_key() for f in expected]
    # stable like list.sort: findings with equal keys keep their order
    assert [id(f) for f in fast] == [id(f) for f in expected]
