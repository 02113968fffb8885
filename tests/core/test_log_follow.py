from core.serve.log_follow import LogFollower


def test_lines_from_two_logs_with_tqdm_returns_and_partial_lines(tmp_path):
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_bytes(b"loading\nweights ")
    err.write_bytes(b"  5%|5| 1/20\r 10%|1| 2/20\r")
    f = LogFollower([out, err, tmp_path / "missing.log"])
    assert f.new_lines() == ["loading", "  5%|5| 1/20", " 10%|1| 2/20"]
    assert f.new_lines() == []
    with out.open("ab") as fh:
        fh.write("done ✓\r\n".encode())
    assert f.new_lines() == ["weights done ✓"]
    out.write_bytes(b"restarted\n")  # truncated and rewritten: read from the start again
    assert f.new_lines() == ["restarted"]
