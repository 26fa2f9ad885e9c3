"""Issue 33, named faults: the database going away mid-run is named on every route, never a bare error.

The audit stopped PostgreSQL while a run graded: `/status` and `/my_runs` answered ``{"error": null}`` for the
whole outage. Here the app runs on a PostgreSQL database of its own, which the test closes to every connection
(``ALLOW_CONNECTIONS false``, its sessions ended) and opens again: every API route and MCP tool asked meanwhile
says "the store is unreachable; nothing is lost" (never the database's address), and once the database answers
again the same calls answer as before.
"""
from __future__ import annotations

import asyncio
import functools
import json
import secrets

import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client

from tests.app_fixtures import start_app, stop_app
from tests.crowd import StatusClient
from tests.test_leaderboard import GRADES_7B_1RUN

DOWN = "The store is unreachable; nothing is lost"


@pytest.fixture
def app_on_pg(tmp_path, pg_server, pg_url):
    handle = start_app(tmp_path / "data", database_url=pg_url, trusted_proxy_hops=1)
    try:
        yield handle, functools.partial(pg_server.outage, pg_url)
    finally:
        pg_server.outage(pg_url, False)
        stop_app(handle)


def test_a_database_outage_is_named_on_every_route_and_nothing_is_lost(app_on_pg, tmp_path):
    from gradio_client import handle_file
    from tests.api_client import ApiClient

    app, outage = app_on_pg
    owner = secrets.token_urlsafe(18)
    client = ApiClient(app.url, headers={"X-Forwarded-For": "203.0.113.9"}, verbose=False, download_files=False)
    run_id = client.predict(handle_file(str(GRADES_7B_1RUN)), "MM-Vet v1 (bundled, 218 samples)", None, "",
                            "All samples", owner, api_name="/view_grades")["run_id"]
    me = StatusClient(app.url, ip="203.0.113.9")

    async def poll_over_mcp() -> str:
        async with sse_client(app.url + "gradio_api/mcp/sse", headers={"X-Forwarded-For": "203.0.113.9"}) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                res = await session.call_tool("poll_run", {"run_id": run_id, "owner_token": owner})
                return "".join(c.text for c in res.content if c.type == "text")

    try:
        before = me.status(run_id)
        assert before["status"] == "done"
        outage(True)
        answers = {}
        for route, args in (("status", (run_id,)), ("my_runs", (owner,)),
                            ("leaderboard", ("", "", "", "", "rank", False, True, 0, 10))):
            with pytest.raises(RuntimeError) as refused:
                me.call(route, *args)
            answers[route] = str(refused.value)
        answers["mcp poll_run"] = asyncio.run(poll_over_mcp())
        for route, text in answers.items():
            if route == "leaderboard" and DOWN not in text:
                continue                  # (the board is answered from its rows in memory: not a fault)
            assert DOWN in text, (route, text)
            assert '"error": null' not in text and "127.0.0.1" not in text and "postgres" not in text.lower()
        assert DOWN in answers["status"] and DOWN in answers["my_runs"] and DOWN in answers["mcp poll_run"]
        outage(False)
        assert me.status(run_id) == before                               # nothing was lost
        assert run_id in json.dumps(me.call("my_runs", owner))
    finally:
        me.close()
