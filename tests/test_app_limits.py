"""Issue 26, item 3: every route that runs a handler is limited, MCP included, and agents' file fetches share
their slots between addresses. Each test performs the audit's attack against the running app (one trusted proxy
hop: each visitor is the X-Forwarded-For entry a proxy would append, so one test machine plays many addresses).

The app's request limit is small here (6 a minute, bursts of 10) so that a flood is a few dozen requests; every
test uses addresses of its own (buckets are per address).
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from mmvet_core.hosting.requestlimit import PROTOCOL_FACTOR
from tests.app_fixtures import HOST_KEY, RESULTS_DIR, start_app, stop_app
from tests.fake_judge import FakeJudgeServer
from tests.waiting import wait_until

PER_MINUTE, BURST = 6, 10
STREAMS_PER_ADDRESS, MAX_STREAMS = 3, 10
RESULTS_7B = RESULTS_DIR / "llava-v1.5-7b.json"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from mmvet_core.hosting.requestlimit import RequestLimits

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("limits")
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    with FakeJudgeServer() as judge:
        # private destinations allowed: the slow file server of these tests is on 127.0.0.1
        handle = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, trusted_proxy_hops=1,
                           allow_private_endpoints=True, requests=RequestLimits(per_minute=PER_MINUTE, burst=BURST,
                                                  streams_per_address=STREAMS_PER_ADDRESS, max_streams=MAX_STREAMS))
        try:
            yield handle
        finally:
            stop_app(handle)
            mp.undo()


def data_uri(path) -> str:
    return "data:application/json;base64," + base64.b64encode(path.read_bytes()).decode()


@contextlib.asynccontextmanager
async def agent(app, ip: str):
    """An MCP session over SSE of an agent at `ip` (3 requests: the stream, initialize, initialized)."""
    async with sse_client(app.url + "gradio_api/mcp/sse", headers={"X-Forwarded-For": ip}) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **args) -> tuple[bool, str]:
    res = await session.call_tool(tool, args)
    return res.isError, "".join(c.text for c in res.content if c.type == "text")


class Counted:
    """Counts the calls of one of the service's methods (what a tool does when it runs)."""

    def __init__(self, svc, name: str):
        self.svc, self.name, self.calls = svc, name, 0
        self.inner = getattr(svc, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return self.inner(*args, **kwargs)
        setattr(svc, name, counted)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        setattr(self.svc, self.name, self.inner)


def test_mcp_tool_calls_over_the_limit_are_refused_as_tool_errors_and_another_agent_is_served(app):
    """The audit: 300 tool calls over MCP, 0 refused. Now an agent's calls beyond its burst are tool errors that
    say why and when to try again (the session survives: the next call is answered), the tool never runs for
    them, and another address is served at once."""
    async def main():
        async with agent(app, "203.0.113.31") as s:
            flood = [await call(s, "read_leaderboard", limit=1) for _ in range(BURST + 10)]
        async with agent(app, "203.0.113.32") as other:
            return flood, await call(other, "read_leaderboard", limit=1)

    with Counted(app.svc.board, "leaderboard_json") as board:
        flood, other = asyncio.run(main())
    refused = [text for err, text in flood if err]
    served = [text for err, text in flood if not err]
    assert len(served) <= BURST - 3 + 1 and len(refused) >= len(flood) - BURST + 3 - 1, (len(served), flood[-1])
    expected = f"Too many requests from your address: at most {PER_MINUTE} a minute. Try again in "
    assert [t for t in refused if not t.strip("'").startswith(expected)] == []
    assert not flood[-1][0] or "Try again in" in flood[-1][1]      # the session still answers after refusals
    assert all(json.loads(t)["entries"] is not None for t in served)
    assert board.calls == len(served) + 1                            # refused calls never reached the service
    assert not other[0], other


def rpc_answer(r: httpx.Response) -> dict:
    """The JSON-RPC message of a streamable MCP answer (JSON, or one server-sent event)."""
    if r.headers["content-type"].startswith("text/event-stream"):
        return json.loads(next(line[5:] for line in r.text.splitlines() if line.startswith("data:")))
    return r.json()


def test_raw_posts_to_the_streamable_mcp_endpoint_are_limited(app):
    """The audit: 300 raw POSTs to /gradio_api/mcp/ answered 300 x 200. Tool calls beyond the burst get the tool
    error (in the protocol); the protocol's cheap messages (tools/list) pass within a second allowance (issue 33:
    the official client's own tools/list got 429, which ended its session), and beyond it get a JSON-RPC error
    that names the wait (HTTP 200: the client's session survives), never a handler run."""
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    tool_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "read_leaderboard", "arguments": {"limit": 1}}}
    allowance = BURST * (1 + PROTOCOL_FACTOR)
    with httpx.Client(base_url=app.url, headers={**MCP_HEADERS, "X-Forwarded-For": "203.0.113.41"},
                      timeout=30) as http:
        lists = [http.post("gradio_api/mcp/", json=listing) for _ in range(allowance + 5)]
        calls = [http.post("gradio_api/mcp/", json=tool_call) for _ in range(3)]
    assert [r.status_code for r in lists] == [200] * len(lists)
    answers = [rpc_answer(r) for r in lists]
    listed = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert answers[:allowance] == listed[:allowance] and len(refused) >= 4, (len(listed), len(refused))
    assert all(a["id"] == 1 and a["error"]["message"].startswith("Too many requests from your address")
               for a in refused), refused[0]
    assert int(next(r for r in lists if "error" in rpc_answer(r)).headers["retry-after"]) >= 1
    for r in calls:                       # a tool call over the limit: answered in the protocol, as a tool error
        assert r.status_code == 200, r.status_code
        data = rpc_answer(r)
        assert data["result"]["isError"] and "Too many requests" in data["result"]["content"][0]["text"], data


@pytest.mark.parametrize("route,ip", [("gradio_api/api/leaderboard", "203.0.113.51"),
                                      ("gradio_api/run/leaderboard", "203.0.113.52"),
                                      ("gradio_api/mcp/schema", "203.0.113.53")], ids=["api-alias", "run", "mcp-schema"])
def test_every_route_that_runs_a_handler_is_limited(app, route, ip):
    """Gradio also runs a named endpoint at /gradio_api/api/<name> (an alias of /run/), and the MCP server's
    schema is built per request: a flood of either is refused like /gradio_api/call/."""
    with httpx.Client(base_url=app.url, headers={"X-Forwarded-For": ip}, timeout=30) as http:
        send = (lambda: http.get(route)) if route.endswith("schema") else \
            (lambda: http.post(route, json={"data": ["", "", "", "rank", False, True]}))
        codes = [send().status_code for _ in range(BURST + 5)]
    assert 429 not in codes[:BURST] and codes[BURST:].count(429) >= 4, codes


class DripServer(ThreadingHTTPServer):
    """A results file served one byte at a time until `release` is set (the audit's drip-feed URL)."""

    def __init__(self):
        self.arrived, self.release = threading.Semaphore(0), threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = RESULTS_7B.read_bytes()
                if self.path.startswith("/fast/"):          # an honest agent's server: the file at once
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                server.arrived.release()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for i in range(len(body)):
                    if server.release.wait(0.2):
                        break
                    try:
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_port}/llava-v1.5-7b.json"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_a_drip_fed_url_holds_one_slot_of_its_address_and_another_agent_is_served_meanwhile(app):
    """The audit: four validate_results on a URL that drips a byte every 2 s held every file slot for 31 s; an
    honest agent was told "busy". Now the attacker's address holds one slot (its other calls are told at once
    that it already reads a file) and the honest agent's file is read while the drip goes on."""
    server = DripServer()

    async def main():
        async with agent(app, "203.0.113.71") as attacker, agent(app, "203.0.113.72") as honest:
            first = asyncio.create_task(call(attacker, "validate_results", results_file=server.url,
                                             judge="baseline"))
            assert await asyncio.to_thread(server.arrived.acquire, True, 30)      # the drip holds its slot
            more = await asyncio.gather(*(call(attacker, "validate_results", results_file=server.url,
                                               judge="baseline") for _ in range(3)))
            mine = await call(honest, "validate_results", results_file=data_uri(RESULTS_7B),
                              file_name="llava-v1.5-7b.json", judge="baseline")
            still_dripping = not first.done()
            server.release.set()
            return more, mine, still_dripping, await first
    try:
        more, mine, still_dripping, _ = asyncio.run(main())
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
    for err, text in more:
        assert err and "Your address is already reading 1 file here" in text, text
    assert not mine[0] and "218" in json.loads(mine[1])["report"], mine
    assert still_dripping


def test_slow_urls_from_four_addresses_leave_the_file_slots_to_an_honest_agent(app):
    """Issue 33: slow file URLs from 4 addresses held all 4 file slots; an honest agent was told "busy" after
    10.1 s. A URL now waits on the network in a download slot of its own (one per address): with 4 addresses
    dripping, an honest agent's data URI and another's fast URL are both read while the drips go on."""
    server = DripServer()
    attackers = [f"203.0.113.{81 + i}" for i in range(4)]

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(agent(app, ip)) for ip in attackers]
            drips = [asyncio.create_task(call(s, "validate_results", results_file=server.url, judge="baseline"))
                     for s in sessions]
            for _ in attackers:                                     # every drip has started downloading
                assert await asyncio.to_thread(server.arrived.acquire, True, 30)
            honest = await stack.enter_async_context(agent(app, "203.0.113.91"))
            mine = await call(honest, "validate_results", results_file=data_uri(RESULTS_7B),
                              file_name="llava-v1.5-7b.json", judge="baseline")
            other = await stack.enter_async_context(agent(app, "203.0.113.92"))
            theirs = await call(other, "validate_results", results_file=server.url.replace("/llava", "/fast/llava"),
                                judge="baseline")
            still_dripping = not any(d.done() for d in drips)
            server.release.set()
            await asyncio.gather(*drips)
            return mine, theirs, still_dripping
    try:
        mine, theirs, still_dripping = asyncio.run(main())
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
    assert still_dripping
    for err, text in (mine, theirs):
        assert not err and "218" in json.loads(text)["report"], text


def heartbeat(http: httpx.Client, stack: contextlib.ExitStack, ip: str) -> int:
    """Open a page's heartbeat stream from `ip` and keep it open in `stack`: its HTTP status."""
    r = stack.enter_context(http.stream("GET", f"gradio_api/heartbeat/{secrets.token_hex(8)}",
                                        headers={"X-Forwarded-For": ip}))
    if r.status_code == 200:
        lines = r.iter_lines()                   # (kept: a dropped reader closes the stream)
        next(lines)                              # the stream is open (its first beat arrived)
        stack.callback(lines.close)
    else:
        r.read()
    return r.status_code


def test_open_streams_are_bounded_per_address_and_in_all_and_given_back_when_they_close(app):
    """Issue 33: 2,000 pages following one run from 20 addresses: no request refused, another visitor's share
    link > 120 s, memory 260 -> 1,663 MB. Now the streams a page holds open (its heartbeat, its queue stream) are
    counted while open: an address holds at most STREAMS_PER_ADDRESS, the server MAX_STREAMS; beyond either the
    stream is refused with words that say which, another visitor is served meanwhile, and a closed stream's
    place is given back."""
    from tests.crowd import StatusClient

    crowd = [f"198.18.0.{i}" for i in range(1, 4)]
    with httpx.Client(base_url=app.url, timeout=30) as http, contextlib.ExitStack() as first:
        opened = [heartbeat(http, first, crowd[0]) for _ in range(STREAMS_PER_ADDRESS + 2)]
        assert opened == [200] * STREAMS_PER_ADDRESS + [429] * 2, opened
        refused = http.get(f"gradio_api/heartbeat/{secrets.token_hex(8)}", headers={"X-Forwarded-For": crowd[0]})
        assert refused.status_code == 429 and "Too many open streams from your address" in refused.json()["error"]
        # another visitor's status call (its result stream included) is served while the crowd holds its streams
        me = StatusClient(app.url, ip="198.18.0.200")
        try:
            with pytest.raises(RuntimeError, match="No such run"):
                me.status("no-such-run")             # answered (an error of the app, not a refusal)
        finally:
            me.close()
        with contextlib.ExitStack() as more:
            for ip in crowd[1:]:
                assert [heartbeat(http, more, ip) for _ in range(STREAMS_PER_ADDRESS)] == [200] * STREAMS_PER_ADDRESS
            left = MAX_STREAMS - 3 * STREAMS_PER_ADDRESS
            assert [heartbeat(http, more, f"198.18.1.{i}") for i in range(left)] == [200] * left
            full = http.get(f"gradio_api/heartbeat/{secrets.token_hex(8)}", headers={"X-Forwarded-For": "198.18.2.1"})
            assert full.status_code == 429 and "The server holds as many open streams" in full.json()["error"], \
                full.text
        # closed: their places are back (once the server has seen the closes: it learns of them a moment later)
        wait_until(lambda: heartbeat(http, first, "198.18.2.1") == 200, what="the closed streams' places to come back",
                   every=0.05)
    with httpx.Client(base_url=app.url, timeout=30) as http, contextlib.ExitStack() as again:
        assert [heartbeat(http, again, crowd[0]) for _ in range(STREAMS_PER_ADDRESS)] == [200] * STREAMS_PER_ADDRESS


def test_opening_streams_spends_the_addresss_request_budget(app):
    """A page's stream is a request of its address: opening and closing heartbeats in a loop is refused like a
    flood of calls once the burst is spent ("Too many requests")."""
    codes = []
    with httpx.Client(base_url=app.url, timeout=30) as http:
        for _ in range(BURST + 4):
            with contextlib.ExitStack() as stack:
                codes.append(heartbeat(http, stack, "198.18.3.1"))
        last = http.get(f"gradio_api/heartbeat/{secrets.token_hex(8)}", headers={"X-Forwarded-For": "198.18.3.1"})
    assert codes[:BURST] == [200] * BURST and codes[BURST:].count(429) >= 3, codes
    assert last.status_code == 429 and last.json()["error"].startswith("Too many requests from your address")


@contextlib.asynccontextmanager
async def streamable_agent(app, ip: str):
    """An MCP session over streamable HTTP (the official client) of an agent at `ip`."""
    from mcp.client.streamable_http import streamable_http_client

    async with httpx.AsyncClient(headers={"X-Forwarded-For": ip}, timeout=30) as http, \
            streamable_http_client(app.url + "gradio_api/mcp/", http_client=http) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.mark.parametrize("transport,ip", [("sse", "203.0.113.101"), ("streamable", "203.0.113.102")])
def test_the_official_mcp_client_over_the_limit_slows_down_and_stays_connected(app, transport, ip):
    """Issue 33: over the limit, the official `mcp` client's automatic tools/list got HTTP 429, which ended its
    session: 0 of 300 tool calls answered, 205 failed. Now an agent making three bursts' worth of tool calls,
    listing the tools now and then as clients do, gets an answer to every call (a result, or a tool error that
    names the wait), never an exception, and its session still lists the tools at the end."""
    async def main():
        opened = agent if transport == "sse" else streamable_agent
        out, listed = [], []
        async with opened(app, ip) as session:
            for i in range(3 * BURST):
                if i % 5 == 0:
                    listed.append(len((await session.list_tools()).tools))
                out.append(await call(session, "read_leaderboard", limit=1))
            listed.append(len((await session.list_tools()).tools))
        return out, listed

    out, listed = asyncio.run(main())
    served = [t for err, t in out if not err]
    refused = [t for err, t in out if err]
    assert served and len(refused) >= BURST, (len(served), len(refused))
    assert all("Too many requests from your address" in t for t in refused), refused[0]
    assert len(set(listed)) == 1 and listed[0] >= 5, listed            # every listing answered, the same tools


def test_two_replicas_on_one_database_spend_one_budget_per_client(tmp_path, pg_url):
    """Issue 33: with two replicas, a client alternating them had two budgets (300 fast requests: 109 refused
    through one replica, 0 alternating the two). On one database the buckets are the database's: the same client
    alternating two replicas is refused once its one burst is spent, and another client is served meanwhile."""
    from mmvet_core.hosting.requestlimit import RequestLimits

    limits = RequestLimits(per_minute=PER_MINUTE, burst=BURST)
    replicas = [start_app(tmp_path / f"replica{i}", database_url=pg_url, trusted_proxy_hops=1, requests=limits)
                for i in (1, 2)]
    try:
        def send(url: str, ip: str) -> int:
            with httpx.Client(base_url=url, headers={"X-Forwarded-For": ip}, timeout=30) as http:
                return http.post("gradio_api/call/leaderboard", json={"data": ["", "", "", "", "rank", False, True,
                                                                               0, 1]}).status_code
        codes = [send(replicas[i % 2].url, "203.0.113.111") for i in range(2 * BURST)]
        other = send(replicas[1].url, "203.0.113.112")
    finally:
        for r in replicas:
            stop_app(r)
    assert codes[:BURST] == [200] * BURST and codes[BURST:].count(429) >= BURST - 2, codes
    assert other == 200


def test_slow_urls_on_two_replicas_on_one_database_hold_one_share_per_address(tmp_path, pg_url):
    """Issue 33: MCP file slots were per process, so an address had one share per replica (and the server N times
    its slots). On one database the slots are the database's: 4 addresses each send a slow URL to both replicas;
    each address's first is read (it drips), its second, on the other replica, is told at once that the address
    already reads a file, and an honest agent's file is read on either replica while the drips go on."""
    replicas = [start_app(tmp_path / f"replica{i}", database_url=pg_url, trusted_proxy_hops=1,
                          allow_private_endpoints=True) for i in (1, 2)]
    server = DripServer()
    attackers = [f"203.0.113.{121 + i}" for i in range(4)]

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            on = [[await stack.enter_async_context(agent(r, ip)) for r in replicas] for ip in attackers]
            drips = [asyncio.create_task(call(s[0], "validate_results", results_file=server.url, judge="baseline"))
                     for s in on]
            for _ in attackers:                                     # every first URL is downloading (replica 1)
                assert await asyncio.to_thread(server.arrived.acquire, True, 60)
            seconds = await asyncio.gather(*(call(s[1], "validate_results", results_file=server.url,
                                                  judge="baseline") for s in on))       # the same, on replica 2
            honest = await stack.enter_async_context(agent(replicas[1], "203.0.113.131"))
            mine = await call(honest, "validate_results", results_file=data_uri(RESULTS_7B),
                              file_name="llava-v1.5-7b.json", judge="baseline")
            other = await stack.enter_async_context(agent(replicas[0], "203.0.113.132"))
            theirs = await call(other, "validate_results", results_file=server.url.replace("/llava", "/fast/llava"),
                                judge="baseline")
            still_dripping = not any(d.done() for d in drips)
            server.release.set()
            await asyncio.gather(*drips)
            return seconds, mine, theirs, still_dripping
    try:
        seconds, mine, theirs, still_dripping = asyncio.run(main())
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        for r in replicas:
            stop_app(r)
    assert still_dripping
    for err, text in seconds:
        assert err and "Your address is already reading 1 file here" in text, text
    for err, text in (mine, theirs):
        assert not err and "218" in json.loads(text)["report"], text


def test_the_leaderboard_never_answers_more_than_a_page_and_repeats_are_served_from_it(app):
    """Issue 33: `/leaderboard` with `limit: null` answered the whole board (6.15 MB on 5,000 rows; another
    visitor's my_runs 37 ms -> 6.3 s under 100 such calls). `null` is now the default page (100 rows), any larger
    limit is cut at 500, and a page asked again is the page kept (no filtering, sorting or row building)."""
    from mmvet_core.service.board import DEFAULT_PAGE
    from tests.crowd import StatusClient
    from tests.test_board_book import add_entries

    add_entries(app.svc.store, DEFAULT_PAGE + 50, distinct=False, seed=33)
    app.svc.board.book.refresh()
    me = StatusClient(app.url, ip="198.18.4.1")
    try:
        page = me.call("leaderboard", "", "", "", "", "rank", False, False, 0, None)
        assert (len(page["entries"]), page["limit"], page["next_offset"]) == (DEFAULT_PAGE, DEFAULT_PAGE,
                                                                               DEFAULT_PAGE)
        assert page["count"] >= DEFAULT_PAGE + 50
        with Counted(app.svc.board, "leaderboard") as selected:
            again = [me.call("leaderboard", "", "", "", "", "rank", False, False, 0, None) for _ in range(3)]
        assert again == [page] * 3 and selected.calls == 0
        huge = me.call("leaderboard", "", "", "", "", "rank", False, False, 0, 10**9)
        assert len(huge["entries"]) == page["count"] and huge["limit"] == 500
    finally:
        me.close()
