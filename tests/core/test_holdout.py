"""The held-out split at registration: rows that belong together (the same prompt, exact or near duplicates)
never straddle it, every row lands on exactly one side, the same file and seed give the same split, tiny files
are refused with the reason, and the parts are registered as N and N_eval without touching the source."""

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.fix import fix_file
from core.data.holdout import (
    EVAL_SUFFIX,
    Holdout,
    HoldoutError,
    SplitRow,
    group_of_rows,
    heldout_for,
    heldout_name,
    normalised,
    plan_split,
)
from core.data.holdout_files import read_split_record, register_with_holdout, split_files, split_plan
from core.data.lint import lint_file
from core.data.register import RegisterRefused, read_dataset_info, register_dataset
from core.data.summary import load_summary
from core.files.digest import file_sha256

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("refund", "order", "password", "invoice", "delivery", "account", "coupon", "warranty", "return", "address",
         "退款", "订单", "发票", "地址", "会员", "优惠券")


def rows_file(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def question(k: int) -> str:
    rng = random.Random(k)
    return f"Question {k}: " + " ".join(rng.choice(WORDS) for _ in range(6)) + "?"


def answer(k: int) -> str:
    rng = random.Random(10_000 + k)
    return f"Answer {k}. " + " ".join(rng.choice(WORDS) for _ in range(12)) + "."


# ---- the share ------------------------------------------------------------------------------------------

def test_the_share_is_a_fraction_a_percentage_or_a_row_count():
    assert Holdout.parse("0.1") == Holdout(fraction=0.1)
    assert Holdout.parse("10%") == Holdout(fraction=0.1)
    assert Holdout.parse("20") == Holdout(count=20)
    assert Holdout.parse("0.5").target(30) == 15
    assert Holdout.parse("0.01").target(30) == 1  # at least one row
    for bad in ("0", "0.0", "0.6", "1.0", "-3", "abc", "60%", ""):
        with pytest.raises(HoldoutError, match="at most 0.5"):
            Holdout.parse(bad)


def test_text_is_compared_as_people_read_it():
    assert normalised("  How DO I\tget a ＲＥＦＵＮＤ?\n") == "how do i get a refund?"


# ---- the pure split -------------------------------------------------------------------------------------

def test_groups_are_closed_over_prompts_and_near_pairs():
    rows = [SplitRow(1, 10), SplitRow(2, 20), SplitRow(1, 11), SplitRow(3, 30), SplitRow(4, 40)]
    groups = group_of_rows(rows, [(3, 1)])  # row 3 nearly repeats row 1
    assert groups == [0, 1, 0, 1, 4]


def test_tiny_files_and_one_big_group_are_refused_with_the_reason():
    with pytest.raises(HoldoutError, match="5 rows: a held-out set needs at least 6"):
        plan_split([SplitRow(i, i) for i in range(5)], Holdout(fraction=0.1), source="tiny.jsonl")
    with pytest.raises(HoldoutError, match="all 8 rows are one group"):
        plan_split([SplitRow(7, i) for i in range(8)], Holdout(fraction=0.2))
    with pytest.raises(HoldoutError, match="hold out at most half"):
        plan_split([SplitRow(i, i) for i in range(10)], Holdout(count=6))
    # a group of 4 in 8 rows: holding it out would leave 4 to train on
    with pytest.raises(HoldoutError, match="smallest group .* has 4 rows"):
        plan_split([SplitRow(1, i) for i in range(4)] + [SplitRow(2, 10 + i) for i in range(4)], Holdout(count=1))


def test_the_minimums_shape_a_small_split():
    plan = plan_split([SplitRow(i, i) for i in range(6)], Holdout(fraction=0.5))
    assert (plan.train_rows, plan.heldout_rows) == (5, 1) and plan.notes  # 3 asked, 5 must stay to train
    plan = plan_split([SplitRow(i, i) for i in range(7)], Holdout(fraction=0.01))
    assert plan.heldout_rows == 1


@st.composite
def grouped_rows(draw):
    """Rows with shared prompts (exact duplicates among them) and near-duplicate links, in any order."""
    n = draw(st.integers(min_value=6, max_value=120))
    prompts = draw(st.lists(st.integers(0, max(2, n // 2)), min_size=n, max_size=n))
    contents = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    rows = [SplitRow(p, p * 8 + c) for p, c in zip(prompts, contents)]
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n // 3))
    return rows, pairs


def _components(rows, pairs):
    """The groups by brute force (a fixed point), to check the union-find against."""
    label = list(range(len(rows)))
    changed = True
    links = [(i, j) for i in range(len(rows)) for j in range(len(rows)) if rows[i].prompt == rows[j].prompt]
    links += list(pairs)
    while changed:
        changed = False
        for a, b in links:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    return label


@settings(max_examples=150, deadline=None)
@given(grouped_rows(), st.sampled_from(["0.1", "0.2", "0.5", "1", "3"]), st.integers(0, 2**31))
def test_property_no_group_straddles_counts_add_up_and_the_split_is_deterministic(data, share, seed):
    rows, pairs = data
    try:
        plan = plan_split(rows, Holdout.parse(share), seed=seed, near_pairs=pairs)
    except HoldoutError:
        return  # refused: nothing to check but that it said so (the cases are tested above)
    assert plan.train_rows + plan.heldout_rows == len(rows)
    assert plan.heldout_rows >= 1 and plan.train_rows >= 5
    label = _components(rows, pairs)
    for i in range(len(rows)):
        for j in range(len(rows)):
            if label[i] == label[j]:
                assert plan.heldout[i] == plan.heldout[j]
    again = plan_split(rows, Holdout.parse(share), seed=seed, near_pairs=pairs)
    assert again.heldout == plan.heldout
    # the order of the rows does not matter: each row keeps its side (the split reads content, not position)
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    where = {old: new for new, old in enumerate(order)}
    shuffled = plan_split([rows[i] for i in order], Holdout.parse(share), seed=seed,
                          near_pairs=[(where[a], where[b]) for a, b in pairs])
    assert [shuffled.heldout[where[i]] for i in range(len(rows))] == plan.heldout


# ---- files: the property on real files, near duplicates found by the lint's MinHash ---------------------

@st.composite
def dataset(draw):
    """Alpaca rows: unique questions, exact copies, the same question with another answer (also re-cased and
    re-spaced), and near copies (one word of a long answer changed)."""
    n = draw(st.integers(min_value=8, max_value=40))
    base = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n, unique=True))
    rows = [{"instruction": question(k), "input": "", "output": answer(k)} for k in base]
    for kind, at in draw(st.lists(st.tuples(st.sampled_from(["copy", "prompt", "recased", "near"]),
                                            st.integers(0, n - 1)), max_size=12)):
        src = rows[at]
        if kind == "copy":
            rows.append(dict(src))
        elif kind == "prompt":
            rows.append({**src, "output": answer(at + 5_000_000)})
        elif kind == "recased":
            rows.append({**src, "instruction": "  " + src["instruction"].upper().replace(" ", "  ")})
        else:
            rows.append({**src, "instruction": src["instruction"] + " " + answer(at)[:300],
                         "output": src["output"] + " Thanks."})
            rows.append({**src, "instruction": src["instruction"] + " " + answer(at)[:300] + ".",
                         "output": src["output"] + " Thanks!"})
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(dataset(), st.sampled_from(["0.1", "0.25", "2"]))
def test_property_on_files_no_prompt_or_near_copy_leaks(tmp_path, rows, share):
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    src = rows_file(folder / "rows.jsonl", rows)
    report = lint_file(src)
    try:
        plan = split_plan(src, Holdout.parse(share), report.schema, seed=7)
    except HoldoutError:
        return
    held = [r for r, h in zip(rows, plan.heldout) if h]
    train = [r for r, h in zip(rows, plan.heldout) if not h]
    assert len(held) + len(train) == len(rows) and held and len(train) >= 5
    train_prompts = {normalised(r["instruction"]) for r in train}
    assert not [r for r in held if normalised(r["instruction"]) in train_prompts]
    # the near copies we made share their first 20 characters ("Question k: ...") and nothing else does
    stems = {r["instruction"][:40] for r in train if len(r["instruction"]) > 200}
    assert not [r for r in held if len(r["instruction"]) > 200 and r["instruction"][:40] in stems]


# ---- registering ----------------------------------------------------------------------------------------

@pytest.fixture
def support(workspace):
    shutil.copy(ROOT / "data" / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    clean = workspace.data_dir / "support.jsonl"
    fix_file(workspace.data_dir / "support_messy.jsonl", clean, yes=True)
    return clean


def test_register_with_holdout_writes_both_parts_and_registers_n_and_n_eval(workspace, support):
    before = file_sha256(support)
    result = register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.2"),
                                   ws_root=workspace.root)
    assert file_sha256(support) == before  # the source is never changed
    files = split_files(support, "support")
    assert files.train.name == "support.train.jsonl" and files.heldout.name == "support.heldout.jsonl"
    train, held, whole = read_rows(files.train), read_rows(files.heldout), read_rows(support)
    assert len(train) + len(held) == len(whole) == 29
    assert sorted(map(json.dumps, train + held)) == sorted(map(json.dumps, whole))  # nothing lost, nothing twice
    assert len(held) == 6 and result.plan.grouped_groups >= 1
    # the two rows asking 订单一直显示待发货怎么办？ (two answers) are on one side
    pending = [r for r in train + held if r["instruction"] == "订单一直显示待发货怎么办？"]
    assert len(pending) == 2 and (all(r in held for r in pending) or all(r in train for r in pending))
    info = read_dataset_info(workspace.data_dir)
    assert info["support"] == {"file_name": "support.train.jsonl"}
    assert info["support_eval"] == {"file_name": "support.heldout.jsonl"}
    record = read_split_record(files)
    assert record["seed"] == 42 and record["holdout"] == "0.2" and record["source_sha256"] == before
    assert (record["train"]["rows"], record["heldout"]["rows"]) == (23, 6)
    assert record["heldout"]["sha256"] == file_sha256(files.heldout)
    assert load_summary(workspace.root, "support").rows == 23
    assert load_summary(workspace.root, "support_eval").rows == 6
    assert heldout_name(workspace.data_dir, "support") == "support_eval"
    assert heldout_for(workspace, "support") == files.heldout
    assert heldout_for(workspace, "other") is None
    out = result.to_json()
    assert out["name"] == "support" and out["heldout"]["name"] == "support" + EVAL_SUFFIX
    assert out["split"]["train_rows"] == 23 and out["split"]["heldout_rows"] == 6 and out["rows"] == 23


def test_registering_again_gives_the_same_split(workspace, support):
    first = register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.2"),
                                  ws_root=workspace.root)
    files = first.files
    shas = file_sha256(files.train), file_sha256(files.heldout)
    again = register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.2"),
                                  ws_root=workspace.root)
    assert (file_sha256(files.train), file_sha256(files.heldout)) == shas
    assert not again.changed and again.train.action == "unchanged" and again.heldout.action == "unchanged"
    other = register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.2"), seed=1,
                                  ws_root=workspace.root)
    assert other.changed and read_split_record(files)["seed"] == 1


def test_a_name_first_registered_without_holdout_moves_to_the_train_part(workspace, support):
    register_dataset(support, "support", workspace.data_dir)
    register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("3"))
    assert read_dataset_info(workspace.data_dir)["support"]["file_name"] == "support.train.jsonl"


def test_refusals_keep_everything_as_it_was(workspace, support):
    info = workspace.data_dir / "dataset_info.json"
    info.write_text(json.dumps({"support_eval": {"file_name": "someone_elses.jsonl"}}))
    with pytest.raises(RegisterRefused, match="support_eval.* already registered for someone_elses.jsonl"):
        register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.1"))
    info.write_text("{}")
    mine = split_files(support, "support").heldout
    mine.write_text('{"instruction": "mine", "input": "", "output": "keep me"}\n')
    with pytest.raises(RegisterRefused, match="not the part devtune wrote"):
        register_with_holdout(support, "support", workspace.data_dir, Holdout.parse("0.1"))
    assert "keep me" in mine.read_text() and read_dataset_info(workspace.data_dir) == {}
    messy = workspace.data_dir / "support_messy.jsonl"
    with pytest.raises(RegisterRefused, match="lint error"):
        register_with_holdout(messy, "messy", workspace.data_dir, Holdout.parse("0.1"))
    assert not split_files(messy, "messy").train.exists()


def test_a_json_array_splits_into_json_lines_rows(workspace):
    rows = [{"question": question(k), "answer": answer(k)} for k in range(12)]
    src = workspace.data_dir / "qa.json"
    src.write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")
    result = register_with_holdout(src, "qa", workspace.data_dir, Holdout.parse("0.25"))
    train, held = read_rows(result.files.train), read_rows(result.files.heldout)
    assert sorted(map(json.dumps, train + held)) == sorted(map(json.dumps, rows)) and len(held) == 3
    entry = read_dataset_info(workspace.data_dir)["qa_eval"]
    assert entry["columns"] == {"prompt": "question", "response": "answer"}  # read as the whole file is


def test_cli_register_holdout_text_json_and_exit_codes(workspace, support, devtune_cli):
    ws = str(workspace.root)
    out = devtune_cli("-w", ws, "data", "register", str(support), "--name", "support", "--holdout", "0.2")
    assert out.returncode == 0, out.stderr
    assert "23 rows to train, 6 held out of 29" in out.stdout and '"support_eval" added' in out.stdout
    out = devtune_cli("-w", ws, "data", "register", str(support), "--name", "support", "--holdout", "0.2", "--json")
    data = json.loads(out.stdout)
    assert data["split"]["heldout_rows"] == 6 and data["split"]["groups_kept_together"] >= 1
    assert data["heldout"]["action"] == "unchanged" and data["split"]["changed"] is False
    out = devtune_cli("-w", ws, "data", "register", str(support), "--name", "support", "--holdout", "0.9")
    assert out.returncode == 2 and "at most 0.5" in out.stderr
    tiny = rows_file(workspace.data_dir / "tiny.jsonl", [{"instruction": question(k), "input": "",
                                                          "output": answer(k)} for k in range(4)])
    out = devtune_cli("-w", ws, "data", "register", str(tiny), "--name", "tiny", "--holdout", "1")
    assert out.returncode == 1 and "4 rows: a held-out set needs at least 6" in out.stderr
    out = devtune_cli("-w", ws, "data", "register", str(tiny), "--name", "tiny")  # without --holdout: as before
    assert out.returncode == 0 and not (workspace.data_dir / "tiny.train.jsonl").exists()
