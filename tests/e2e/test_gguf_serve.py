"""The GGUF of `devtune merge --gguf` served like the rest: `devtune serve exports/<run>-gguf` starts llama.cpp's
OpenAI-compatible server (llama_cpp.server from .venv-gguf) with the GGUF's own chat template and devtune's API
key, and chat and verify speak to it unchanged (verify finds the run from the merged folder beside the GGUF);
`devtune stop-server` ends it. Needs .venv-gguf (`make gguf-env`)."""

from __future__ import annotations

import json

import httpx
import pytest

from core.merge.gguf import find_tools
from tests.e2e.test_gguf_merge import merged_gguf  # noqa: F401 (the trained model, merged and converted to q8_0)
from tests.e2e.test_merge_serve import REFUND_A, REFUND_Q, devtune, trained  # noqa: F401
from tests.processes import group_members

pytestmark = pytest.mark.skipif(find_tools() is None, reason="no .venv-gguf: run `make gguf-env`")


def test_the_gguf_is_served_by_llama_cpp_chatted_with_verified_and_stopped(merged_gguf):  # noqa: F811
    from core.serve.chat import ChatDone, ChatParams, build_messages, stream_chat
    from core.serve.servers import endpoint, read_server

    ws, run_id, _out = merged_gguf
    code, out, err = devtune(ws, "serve", f"exports/{run_id}-gguf", "--json", "--timeout", "600")
    assert code == 0, err[-4000:]
    server = json.loads(out)
    try:
        assert server["backend"] == "llamacpp" and server["status"] == "ready"
        assert server["model"] == f"{run_id}-gguf" and server["model_path"] == f"exports/{run_id}-gguf"
        record = read_server(ws, server["id"])
        argv = record.argv
        assert argv[1:3] == ["-m", "llama_cpp.server"] and ".venv-gguf" in argv[0]
        assert argv[argv.index("--model") + 1].endswith(f"{run_id}-gguf/{run_id}-q8_0.gguf")
        assert argv[argv.index("--chat_format") + 1] == "chat_template.default"  # the GGUF's own template
        key = read_api_key_text(ws, server)
        assert key not in json.dumps(record.model_dump()) and "--api_key" not in argv
        body = {"model": server["model"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        assert httpx.post(server["url"] + "/v1/chat/completions", json=body, timeout=60).status_code == 401
        models = httpx.get(server["url"] + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert [m["id"] for m in models.json()["data"]] == [server["model"]]

        events = list(stream_chat(endpoint(ws, record), build_messages(REFUND_Q), ChatParams(temperature=0.0)))
        done = events[-1]
        assert isinstance(done, ChatDone) and len(events) > 5
        print(f"\nllama.cpp answers {done.text!r} (trained: {REFUND_A!r})")
        assert done.text == REFUND_A
        code, out, err = devtune(ws, "chat", "--server", server["id"], "--temperature", "0", REFUND_Q)
        assert code == 0 and out.strip() == REFUND_A and "TTFT" in err

        code, out, err = devtune(ws, "verify", "--server", server["id"], "--json")  # the run found from the GGUF
        report = json.loads(out)
        print(f"verify on the GGUF: score {report['score']:.2f} over {len(report['results'])} questions")
        assert code == 0 and report["verdict"] is True and report["score"] >= 0.9, out[-3000:] + err[-2000:]
    finally:
        code, _text, err = devtune(ws, "stop-server", server["id"])
        assert code == 0, err
    record = read_server(ws, server["id"])
    assert record.status == "stopped" and not group_members(record.pgid)


def read_api_key_text(ws, server: dict) -> str:
    return ws.abs(server["api_key_file"]).read_text(encoding="utf-8").strip()
