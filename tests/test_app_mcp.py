"""Agents as users: the official `mcp` client against the running app's MCP server (SSE at /gradio_api/mcp/sse).

One app for the module (fake judge as the host's judge, private destinations blocked as on a public host, one
trusted proxy hop so that each agent is told apart by the X-Forwarded-For a proxy would append). The tools are
listed and called like an agent would; the attacks: another visitor's run without its owner token, a spent
visitor budget (and fresh owner tokens to get around it), files on loopback / metadata addresses, an oversized
file. And with MCP turned off the route is gone.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamablehttp_client

from mmvet_core.successors.judgecheck import call_count
from tests.app_fixtures import HOST_KEY, RESULTS_DIR, start_app, stop_app
from tests.fake_judge import FakeJudgeServer
from mmvet_app.mcp import MCP_TOOLS

ALICE, BOB, CAROL = "203.0.113.7", "198.51.100.23", "192.0.2.99"
BUDGET = 1000             # host-key calls per visitor and day (a v1 run is 218 samples, a few calls each at most)
RESULTS_13B = RESULTS_DIR / "llava-v1.5-13b.json"
RESULTS_7B = RESULTS_DIR / "llava-v1.5-7b.json"
RESULTS_OTHER = RESULTS_DIR / "llava_llama2_13b_chat.json"     # graded by no one else in this module


def data_uri(path, media: str = "application/json") -> str:
    return f"data:{media};base64," + base64.b64encode(path.read_bytes()).decode()


@pytest.fixture(scope="module")
def judge():
    with FakeJudgeServer() as server:
        yield server


@pytest.fixture(scope="module")
def app(judge, tmp_path_factory):
    from mmvet_core.judging.budget import BudgetLimits

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("mcp")
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    handle = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, run_concurrency=8,
                       allow_private_endpoints=False, trusted_proxy_hops=1, max_upload_mb=1,
                       limits=BudgetLimits(per_visitor_daily=BUDGET, global_daily=100_000,
                                           tokens_per_visitor_daily=0, tokens_global_daily=0))
    try:
        yield handle
    finally:
        handle.wait_idle()
        stop_app(handle)
        mp.undo()


@contextlib.asynccontextmanager
async def agent(app, ip: str):
    """An MCP session of an agent at address `ip` (as the trusted proxy reports it)."""
    async with sse_client(app.url + "gradio_api/mcp/sse", headers={"X-Forwarded-For": ip}) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **args):
    """(is an error, the answer: parsed JSON when it is JSON, else the text)."""
    res = await session.call_tool(tool, args)
    text = "".join(c.text for c in res.content if c.type == "text")
    try:
        return res.isError, json.loads(text)
    except ValueError:
        return res.isError, text


async def ok(session: ClientSession, tool: str, **args):
    err, answer = await call(session, tool, **args)
    assert not err, f"{tool}: {answer}"
    return answer


async def poll_to_end(session: ClientSession, run_id: str, token: str, timeout: float = 180.0) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await ok(session, "poll_run", run_id=run_id, owner_token=token)
        if st["status"] != "running":
            return st
        assert loop.time() < deadline, st
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def alice_runs(app, judge):
    """Alice's agent validates and grades the 13b answers with the server's judge, and the 7b answers with the
    free baseline (same owner token), each polled to the end. Returns (token, run_13b, run_7b, validation)."""
    async def main():
        async with agent(app, ALICE) as s:
            v = await ok(s, "validate_results", results_file=data_uri(RESULTS_13B), file_name="llava-v1.5-13b.json")
            a = await ok(s, "start_grading", results_file=data_uri(RESULTS_13B), file_name="llava-v1.5-13b.json")
            tok = a["owner_token"]
            b = await ok(s, "start_grading", results_file=data_uri(RESULTS_7B), file_name="llava-v1.5-7b.json",
                         judge="baseline", owner_token=tok)
            for run in (a, b):
                st = await poll_to_end(s, run["run_id"], tok)
                assert st["status"] == "done" and st["done"] == st["total"] == 218, st
            return tok, a, b, v
    return asyncio.run(main())


def test_the_agents_tools_are_listed_with_descriptions_and_nothing_else(app):
    async def main():
        async with agent(app, ALICE) as s:
            sse = (await s.list_tools()).tools
        async with streamablehttp_client(app.url + "gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                http = (await s.list_tools()).tools
        return sse, http
    tools, http_tools = asyncio.run(main())
    assert [t.name for t in tools] == list(MCP_TOOLS)
    assert [t.name for t in http_tools] == list(MCP_TOOLS)         # the streamable HTTP transport too
    for t in tools:
        assert len(t.description) > 80, t.name
        assert "Free" in t.description or "COSTS" in t.description, t.name       # each says what it costs
        props = t.inputSchema["properties"]
        assert all(p.get("description") for p in props.values()), (t.name, props)
    by_name = {t.name: t for t in tools}
    assert by_name["start_grading"].inputSchema["properties"]["results_file"]["type"] == "string"
    assert "owner_token" in by_name["start_grading"].description
    assert f"({call_count()} judge calls" in by_name["check_judge"].description     # this server's cost of a check
    assert "Returns: What happened (plain text)." in by_name["stop_run"].description
    assert all("Returns: A JSON object: " in t.description for t in tools if t.name != "stop_run")
    # the scripts' API keeps the lower-level endpoints that the MCP list leaves out
    with urllib.request.urlopen(app.url + "gradio_api/info") as r:
        named = json.load(r)["named_endpoints"]
    assert {"/grade", "/status", "/stop", "/my_runs", "/compare", "/leaderboard", "/publish"} <= set(named)
    assert {f"/{name}" for name in MCP_TOOLS} <= set(named)


def test_an_agent_grades_polls_reads_scores_and_compares(app, alice_runs):
    tok, a, b, v = alice_runs
    assert "218" in v["report"] and v["estimate"], v
    assert len(tok) >= 16 and a["started"] and a["share_url"].endswith(f"?run={a['run_id']}")
    assert app.store.get_run(a["run_id"]).owner == tok

    async def main():
        async with agent(app, ALICE) as s:
            scores = await ok(s, "run_scores", run_id=a["run_id"], owner_token=tok)
            cmp = await ok(s, "compare_runs", run_a=a["run_id"], run_b=b["run_id"], owner_token=tok)
            return scores, cmp
    scores, cmp = asyncio.run(main())
    status = app.svc.reading.status(a["run_id"])
    total = scores["total"]
    assert scores["complete"] and total["official"] == status["total_score"]
    assert total["ci"][0] < total["score"] < total["ci"][1] and total["n"] == 218
    assert set(scores["capabilities"]) == {"rec", "ocr", "know", "gen", "spat", "math"}
    assert "official_equivalent" in scores
    assert cmp["n_common"] == 218
    d = cmp["difference"]["total"]
    assert d["ci"][0] <= d["diff"] <= d["ci"][1]
    assert d["diff"] == pytest.approx(cmp["b"]["total"] - cmp["a"]["total"], abs=0.02)
    assert cmp["verdict"]


def test_an_agent_reads_the_leaderboard(app, alice_runs):
    tok, a, _, _ = alice_runs
    app.svc.board.publish(a["run_id"], "Agent's llava 13b", "", tok, visitor="test")

    async def main():
        async with agent(app, BOB) as s:
            pages, offset = [], 0
            while offset is not None:          # the whole board (the paper's rows too), 10 rows at a time
                pages.append(await ok(s, "read_leaderboard", limit=10, offset=offset))
                offset = pages[-1]["next_offset"]
            return await ok(s, "read_leaderboard", query="Agent's", references=False), pages
    board, pages = asyncio.run(main())
    walked = [(e["entry"], e["name"], e["benchmark"]) for p in pages for e in p["entries"]]
    assert len(pages) > 2 and all(len(p["entries"]) == 10 for p in pages[:-1])
    assert len(walked) == len(set(walked)) == pages[0]["count"]
    assert ("", "LLaVA-13B (paper)", "v1") in walked and any(name == "Agent's llava 13b" for _, name, _ in walked)
    assert board["rank_note"] and board["count"] == 1 and board["next_offset"] is None
    [entry] = board["entries"]
    assert entry["name"] == "Agent's llava 13b"
    assert entry["total"] == pytest.approx(app.svc.reading.status(a["run_id"])["total_score"], abs=0.1)
    assert entry["ci"][0] < entry["total"] < entry["ci"][1] and entry["rank"] == [1, 1]
    assert (entry["provenance"], entry["verified"]) == ("graded here (this server's judge)", True)   # not its address


def test_an_agent_cannot_read_stop_or_compare_another_visitors_run(app, alice_runs):
    _, a, b, _ = alice_runs
    bob_tok = "bob-agent-token-0123456789"
    rid = a["run_id"]

    async def main():
        async with agent(app, BOB) as s:
            out = {}
            for name, tool, args in [
                ("poll", "poll_run", dict(run_id=rid, owner_token=bob_tok)),
                ("scores", "run_scores", dict(run_id=rid, owner_token=bob_tok)),
                ("stop", "stop_run", dict(run_id=rid, owner_token=bob_tok)),
                ("compare", "compare_runs", dict(run_a=rid, run_b=b["run_id"], owner_token=bob_tok)),
                ("no token", "run_scores", dict(run_id=rid, owner_token="")),
                ("guess", "run_scores", dict(run_id=rid, owner_token="a")),
                ("no such run", "poll_run", dict(run_id="does-not-exist", owner_token=bob_tok)),
            ]:
                out[name] = await call(s, tool, **args)
            return out
    out = asyncio.run(main())
    for name, (err, answer) in out.items():
        assert err, (name, answer)
        assert "owner_token" in str(answer), (name, answer)
        assert "llava" not in str(answer).lower(), (name, answer)        # nothing of the run is shown
    # a foreign run and a missing one get the same answer (ids cannot be probed)
    assert out["poll"][1] == out["no such run"][1]
    assert app.store.get_run(rid).status == "done"


def test_an_agent_cannot_exceed_the_visitor_budget_even_with_new_owner_tokens(app, judge):
    from mmvet_core.judging.budget import today

    carol = app.svc.limits.visitor("127.0.0.1", CAROL)          # the visitor the trusted proxy hop makes of her
    app.svc.store.add_usage(today(), carol, BUDGET - 20)  # she already spent all but 20 of today's calls

    async def main():
        async with agent(app, CAROL) as s:
            before = len(judge.state.calls)
            first = await ok(s, "start_grading", results_file=data_uri(RESULTS_7B), file_name="7b.json")
            st1 = await poll_to_end(s, first["run_id"], first["owner_token"])
            spent = len(judge.state.calls) - before
            again = await ok(s, "start_grading", results_file=data_uri(RESULTS_OTHER), file_name="other.json")
            assert again["owner_token"] != first["owner_token"]          # a fresh token: same visitor
            st2 = await poll_to_end(s, again["run_id"], again["owner_token"])
            spent_again = len(judge.state.calls) - before - spent
            # a judge check (hundreds of calls when nothing is stored) obeys the same budget
            check = await ok(s, "check_judge", start=True)
            assert str(call_count()) in check["message"], check
            for _ in range(300):
                if not check["running"]:
                    break
                await asyncio.sleep(0.1)
                check = await ok(s, "check_judge", owner_token=check["owner_token"])
            return st1, st2, spent, spent_again, check, len(judge.state.calls) - before - spent - spent_again
    st1, st2, spent, spent_again, check, spent_check = asyncio.run(main())
    assert st1["status"] == "stopped" and "own API key" in st1["message"], st1
    assert 0 < spent <= 20 and 0 < st1["done"] < st1["total"]            # what was graded is kept
    assert st2["status"] == "stopped" and "own API key" in st2["message"], st2
    assert spent_again == 0
    assert not check["running"] and spent_check == 0, check
    assert "daily limit" in check["report"], check
    assert app.svc.store.usage(today(), carol) <= BUDGET


class _FileServer(ThreadingHTTPServer):
    """A results file on 127.0.0.1 (what an attacker wants the server to fetch); counts the requests."""

    def __init__(self, body: bytes):
        self.body, self.hits = body, 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/llava.json", "http://localhost:{port}/llava.json",
                                 "http://[::ffff:127.0.0.1]:{port}/llava.json",
                                 "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/results.json",
                                 "file:///etc/passwd"],
                         ids=["loopback", "localhost", "mapped-v6", "cloud-metadata", "private", "file-scheme"])
def test_a_file_url_to_a_private_address_is_refused(app, url):
    server = _FileServer(RESULTS_7B.read_bytes())
    runs_before = len(dict(app.store.iter_tables())["runs"])
    try:
        async def main():
            async with agent(app, BOB) as s:
                v = await call(s, "validate_results", results_file=url.format(port=server.server_port))
                g = await call(s, "start_grading", results_file=url.format(port=server.server_port),
                               judge="baseline")
                return v, g
        for err, answer in asyncio.run(main()):
            assert err and "results_file" in answer, answer
            assert "refused" in answer or "URL" in answer, answer
        assert server.hits == 0                               # not even a connection reached it
    finally:
        server.shutdown()
        server.server_close()
    assert len(dict(app.store.iter_tables())["runs"]) == runs_before


def test_an_own_judge_endpoint_on_a_private_address_is_refused(app, judge):
    calls = len(judge.state.calls)

    async def main():
        async with agent(app, BOB) as s:
            return await call(s, "start_grading", results_file=data_uri(RESULTS_7B), judge="own",
                              base_url=judge.url, api_key="sk-visitor-secret")
    err, answer = asyncio.run(main())
    assert err and "Base URL refused" in answer and "loopback" in answer, answer
    assert "sk-visitor-secret" not in answer and len(judge.state.calls) == calls


def test_a_file_over_the_upload_limit_is_refused_before_it_is_read(app):
    big = "data:application/json;base64," + base64.b64encode(b"{" + b" " * (1024 * 1024 + 10) + b"}").decode()

    async def main():
        async with agent(app, BOB) as s:
            return await call(s, "validate_results", results_file=big)
    err, answer = asyncio.run(main())
    assert err and "upload limit (1 MB)" in answer, answer


def test_mcp_turned_off_has_no_route(tmp_path):
    from app import AppSettings, launch_options

    assert launch_options(AppSettings.from_env({"MMVET_MCP": "0", "MMVET_DATA_DIR": str(tmp_path)}))[
        "mcp_server"] is False
    assert launch_options(AppSettings.from_env({"MMVET_DATA_DIR": str(tmp_path)}))["mcp_server"] is True
    off = start_app(tmp_path / "data", mcp_server=False)
    try:
        for path in ("gradio_api/mcp/sse", "gradio_api/mcp/", "gradio_api/mcp/schema"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(off.url + path, timeout=10)
            assert e.value.code == 404, path
        with urllib.request.urlopen(off.url + "gradio_api/info") as r:      # the scripts' API stays
            assert "/start_grading" in json.load(r)["named_endpoints"]
    finally:
        stop_app(off)


def test_file_tools_share_their_slots_between_addresses_and_tell_the_rest_the_server_is_busy(tmp_path,
                                                                                              monkeypatch):
    """Agents' file tools run on the server's worker threads: at most `file_slots` read files at once, one address
    at most `file_slots_per_visitor` of them (issue 26: one agent's four slow URLs held every slot). A URL waits
    on the network in a download slot of its own (issue 33: four addresses' slow URLs held every file slot): here
    every download slot's download hangs on a server of ours; one more address's URL is told the server is busy,
    an address that already reads a file is told so at once, and a data URI is read meanwhile."""
    import gradio as gr

    import mmvet_app.mcp as mcp_ui
    from mmvet_core.service import GradingService, ServiceSettings

    monkeypatch.setattr(mcp_ui, "FILE_WAIT", 0.5)
    release, arrived = threading.Event(), threading.Semaphore(0)

    class Hanging(BaseHTTPRequestHandler):
        def do_GET(self):
            arrived.release()
            release.wait(30)
            body = RESULTS_7B.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hanging)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    svc = GradingService(ServiceSettings(data_dir=tmp_path / "data", allow_private_endpoints=True,
                                         trusted_proxy_hops=1))
    slots = svc.settings.hosting.file_downloads
    with gr.Blocks() as demo:
        mcp_ui.register_mcp_tools(svc)
    validate = next(f.fn for f in demo.fns.values() if f.api_name == "validate_results")
    url = f"http://127.0.0.1:{server.server_port}/llava-v1.5-7b.json"
    answers: dict[str, list] = {}

    def agent_call(ip: str):
        request = gr.Request(headers={"x-forwarded-for": ip}, client={"host": "127.0.0.1"})
        try:
            out = json.loads(validate(url, judge="baseline", request=request))["report"]
        except gr.Error as e:
            out = f"error: {e.message}"
        answers.setdefault(ip, []).append(out)

    holders = [threading.Thread(target=agent_call, args=(f"203.0.113.{i}",)) for i in range(slots)]
    try:
        for t in holders:
            t.start()
        for _ in holders:                                  # every slot is taken: four downloads are hanging
            assert arrived.acquire(timeout=120)
        agent_call("203.0.113.0")                          # an address already reading a file: at once
        agent_call("198.51.100.1")                         # one more address, while every download hangs
        assert answers.pop("198.51.100.1") == ["error: The server is busy reading other files; try again in a "
                                               "minute."]
        request = gr.Request(headers={"x-forwarded-for": "198.51.100.2"}, client={"host": "127.0.0.1"})
        inline = "data:application/json;base64," + base64.b64encode(RESULTS_7B.read_bytes()).decode()
        assert "218" in json.loads(validate(inline, file_name="llava-v1.5-7b.json", judge="baseline",
                                            request=request))["report"]
        assert answers["203.0.113.0"] == ["error: Your address is already reading 1 file here (at most 1 at once): "
                                          "wait until it is read, then try again."], answers
    finally:
        release.set()
        for t in holders:
            t.join(30)
        server.shutdown()
        server.server_close()
        svc.store.close()
    # the holders' downloads, released together, then share the file slots (FILE_WAIT 0.5 s here): each was
    # answered, a report or "busy"
    outs = [a for outs in answers.values() for a in outs if "already reading" not in a]
    reports = [a for a in outs if not a.startswith("error")]
    assert len(outs) == slots and len(reports) >= svc.settings.hosting.file_slots, answers
    assert all("218" in a for a in reports) and all("busy" in a for a in outs if a.startswith("error")), answers


# --- issue 26: agents after gpt-4-0613 -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def after_gpt4(tmp_path_factory):
    """An app whose own endpoint no longer serves gpt-4-0613 (it serves judge-b and judge-c), and whose host lets
    agents pick judge-b (``MMVET_AGENT_JUDGES=judge-b``). Yields (app, the host's judge)."""
    from mmvet_core.judging.budget import BudgetLimits
    from tests.fake_judge import FakeState

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("mcp-after-gpt4")
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    with FakeJudgeServer(FakeState.after_gpt4()) as judge:
        handle = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, run_concurrency=8,
                           allow_private_endpoints=False, trusted_proxy_hops=1, agent_judges=("judge-b",),
                           limits=BudgetLimits(per_visitor_daily=BUDGET, global_daily=100_000,
                                               tokens_per_visitor_daily=0, tokens_global_daily=0))
        try:
            yield handle, judge
        finally:
            handle.wait_idle()
            stop_app(handle)
            mp.undo()


def test_after_gpt4_an_agent_is_told_which_tools_and_judges_to_use(after_gpt4):
    """The audit: start_grading with the default server judge failed with text naming page buttons ("Check this
    judge first", under Grade); the agent could not pick the server's other judges. Now the refusal names the
    check_judge tool and the judges this server lets agents pick, and the tools' descriptions say so too."""
    app, judge = after_gpt4

    async def main():
        async with agent(app, ALICE) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            return tools, await call(s, "start_grading", results_file=data_uri(RESULTS_7B), file_name="7b.json")
    tools, (err, answer) = asyncio.run(main())
    assert err and "gpt-4-0613 was shut down by OpenAI on 2026-10-23" in answer, answer
    assert "check_judge tool" in answer and "judge-b (shutdown 2026-12-11), judge-c" in answer, answer
    assert "gpt-4-0613 (its default), judge-b" in answer, answer
    for page_words in ("Check this judge", "under Grade", "judge field"):
        assert page_words not in answer, (page_words, answer)
    assert judge.state.chat_calls() == []
    for name in ("start_grading", "validate_results", "check_judge"):
        assert "pick judge_model among: gpt-4-0613 (its default), judge-b" in \
            tools[name].inputSchema["properties"]["judge_model"]["description"], name


def test_an_agent_grades_with_a_server_judge_the_host_allows_within_its_budget(after_gpt4):
    """MMVET_AGENT_JUDGES: judge-b through the server's key and endpoint, charged to the agent's daily budget;
    judge-c (served, but not allowed) is refused before any call."""
    from mmvet_core.judging.budget import today

    app, judge = after_gpt4
    bob = app.svc.limits.visitor("127.0.0.1", BOB)

    async def main():
        async with agent(app, BOB) as s:
            refused = await call(s, "start_grading", results_file=data_uri(RESULTS_7B), judge="server",
                                 judge_model="judge-c")
            calls_refused = len(judge.state.chat_calls())
            run = await ok(s, "start_grading", results_file=data_uri(RESULTS_7B), judge="server",
                           judge_model="judge-b")
            return refused, calls_refused, run, await poll_to_end(s, run["run_id"], run["owner_token"])
    (err, answer), calls_refused, run, st = asyncio.run(main())
    assert err and "using gpt-4-0613 or judge-b, not judge-c" in answer, answer
    assert calls_refused == 0
    assert st["status"] == "done" and st["done"] == 218, st
    stored = app.store.get_run(run["run_id"]).judge
    assert stored["model"] == "judge-b" and stored["base_url"] == judge.url
    assert {c["model"] for c in judge.state.chat_calls()} == {"judge-b"}
    assert {c["auth"] for c in judge.state.chat_calls()} == {f"Bearer {HOST_KEY}"}           # the server's key
    assert app.svc.store.usage(today(), bob) >= 218               # the agent's own budget paid for it


def test_check_judge_explains_an_empty_report_and_a_check_that_cannot_run(after_gpt4):
    """The audit: check_judge for the server's judge answered an empty report with no message. Now it says no
    check is stored and how to run one; a check of the shut-down default judge stops with words for an agent."""
    app, judge = after_gpt4

    async def main():
        async with agent(app, CAROL) as s:
            empty = await ok(s, "check_judge")
            started = await ok(s, "check_judge", start=True, owner_token=empty["owner_token"])
            for _ in range(300):
                if not started["running"]:
                    break
                await asyncio.sleep(0.1)
                started = await ok(s, "check_judge", owner_token=empty["owner_token"])
            return empty, started
    empty, stopped = asyncio.run(main())
    assert empty["report"] == "" and not empty["running"]
    assert empty["message"].startswith("No check of gpt-4-0613 is stored on this server yet: call check_judge "
                                       "again with start=true"), empty
    assert stopped["report"].startswith("The check stopped: The official MM-Vet judge gpt-4-0613 was shut down"), \
        stopped
    assert "check_judge tool" in stopped["report"] and "judge field" not in stopped["report"], stopped
    assert judge.state.chat_calls("gpt-4-0613") == []


def test_the_start_log_names_both_mcp_urls(tmp_path):
    """The audit: the start log printed the streamable HTTP URL only, while the README's first configuration
    uses /gradio_api/mcp/sse. `python app.py` as a host runs it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.fake_judge import free_port

    root = Path(__file__).resolve().parents[1]
    port = free_port()
    env = {**os.environ, "MMVET_DATA_DIR": str(tmp_path / "data"), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(port), "GRADIO_TEMP_DIR": str(tmp_path / "gradio-tmp"), "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        for line in proc.stdout:                 # the log as a host reads it, until both URLs were named
            seen.append(line.rstrip())
            if any("gradio_api/mcp/sse" in s for s in seen) and \
                    any(s.rstrip("/").endswith(f"{port}/gradio_api/mcp") for s in seen):
                break
    finally:
        proc.kill()
        proc.wait()
    log = "\n".join(seen)
    assert f"* SSE URL: http://127.0.0.1:{port}/gradio_api/mcp/sse" in log, log
    assert f"* Streamable HTTP URL: http://127.0.0.1:{port}/gradio_api/mcp/" in log, log
