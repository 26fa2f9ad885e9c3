"""A visitor's file as a URL or a data URI (`mmvet_core.hosting.remote_files`): bounded, never from a private address on a
public host, no redirects, safe names. The HTTP server is ours on 127.0.0.1 (allowed only with
``block_private=False``, a private deployment's setting)."""
from __future__ import annotations

import base64
import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mmvet_core.hosting.remote_files import RemoteFileError, decode_data_uri, fetch_visitor_file

BODY = b'{"v1_0": "a cat", "v1_1": "42"}'
LIMIT = 1000


class Server(ThreadingHTTPServer):
    """Serves BODY at /results.json, a body over the limit at /big, a gzip bomb at /bomb (small on the wire, big
    once decompressed), a byte every 0.2 s at /drip, a redirect to /results.json at /moved and a 404 elsewhere; counts requests."""

    def __init__(self):
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits += 1
                headers, status, body = {}, 200, BODY
                if self.path == "/big":
                    body = b"x" * (LIMIT * 50)
                elif self.path == "/bomb":
                    body, headers = gzip.compress(b" " * (LIMIT * 1000)), {"Content-Encoding": "gzip"}
                elif self.path == "/drip":          # a byte every 0.2 s, until the client goes away
                    self.send_response(200)
                    self.send_header("Content-Length", str(LIMIT))
                    self.end_headers()
                    try:
                        for _ in range(LIMIT):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.2)
                    except OSError:
                        pass
                    return
                elif self.path == "/moved":
                    status, body, headers = 302, b"", {"Location": "/results.json"}
                elif self.path != "/results.json":
                    status, body = 404, b"no"
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_port}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.shutdown()
    s.server_close()


def test_a_url_is_downloaded_under_its_name(server, tmp_path):
    path = fetch_visitor_file(server.url + "/results.json", tmp_path, max_bytes=LIMIT, block_private=False)
    assert path.read_bytes() == BODY and path.name == "results.json" and path.parent == tmp_path


@pytest.mark.parametrize("route,message", [
    ("/big", "upload limit"),
    ("/bomb", "upload limit"),
    ("/moved", "redirects"),
    ("/missing", "HTTP 404"),
], ids=["over-limit", "gzip-bomb", "redirect", "not-found"])
def test_a_bad_download_is_refused_and_nothing_is_written(server, tmp_path, route, message):
    with pytest.raises(RemoteFileError, match=message):
        fetch_visitor_file(server.url + route, tmp_path, max_bytes=LIMIT, block_private=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "169.254.169.254",
                                  "10.1.2.3", "192.168.0.1", "[::ffff:127.0.0.1]:{port}"],
                         ids=["loopback", "localhost", "loopback-v6", "metadata", "private-10", "private-192",
                              "mapped-v6"])
def test_a_private_destination_is_refused_on_a_public_host(server, tmp_path, host):
    hits = server.hits
    url = f"http://{host.format(port=server.server_port)}/results.json"
    with pytest.raises(RemoteFileError, match="URL refused"):
        fetch_visitor_file(url, tmp_path, max_bytes=LIMIT, block_private=True)
    assert server.hits == hits and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("source", ["file:///etc/passwd", "/etc/passwd", "ftp://example.com/x.json", "",
                                    "gopher://127.0.0.1/"], ids=["file-url", "path", "ftp", "empty", "gopher"])
def test_only_http_urls_and_data_uris_are_accepted(tmp_path, source):
    with pytest.raises(RemoteFileError, match="URL or as a base64 data URI"):
        fetch_visitor_file(source, tmp_path, max_bytes=LIMIT, block_private=True)


def test_a_data_uri_is_decoded_with_the_extension_of_its_type(tmp_path):
    uri = "data:application/json;base64," + base64.b64encode(BODY).decode()
    path = fetch_visitor_file(uri, tmp_path, max_bytes=LIMIT, block_private=True)
    assert path.read_bytes() == BODY and path.name == "results.json"
    named = fetch_visitor_file(uri, tmp_path, max_bytes=LIMIT, block_private=True, file_name="../../evil/llava.json")
    assert named == tmp_path / "llava.json"                    # the name never leaves the folder


@pytest.mark.parametrize("uri,message", [
    ("data:application/json;base64," + "A" * (LIMIT * 2), "upload limit"),
    ("data:application/json;base64,%%%notbase64", "not valid base64"),
    ("data:application/json,{\"v1_0\": \"x\"}", "only base64"),
    ("data:application/json;base64", "data URI looks like"),
], ids=["too-big", "bad-base64", "not-base64", "no-comma"])
def test_a_bad_data_uri_is_refused(uri, message):
    with pytest.raises(RemoteFileError, match=message):
        decode_data_uri(uri, LIMIT)


def test_a_drip_fed_download_is_cut_at_the_deadline(server, tmp_path):
    """Issue 26: a URL that drips a byte at a time held an agent's file slot for the whole 30 s; the deadline
    covers the whole download (here 1 s), however steadily the bytes come."""
    with pytest.raises(RemoteFileError, match=r"took longer than 1 s"):
        fetch_visitor_file(server.url + "/drip", tmp_path, max_bytes=LIMIT, block_private=False, deadline=1.0)
    assert list(tmp_path.iterdir()) == []


def test_a_name_lookup_that_hangs_is_cut_at_the_deadline(tmp_path, monkeypatch):
    """The deadline covers the name's lookup too (a resolver that never answers is a slow server)."""
    import socket

    import mmvet_core.judging.transport as transport

    released = threading.Event()

    def hanging_lookup(*args, **kwargs):
        released.wait(60)
        raise socket.gaierror("released")

    monkeypatch.setattr(transport.socket, "getaddrinfo", hanging_lookup)
    try:
        with pytest.raises(RemoteFileError, match=r"took longer than 0.5 s"):
            fetch_visitor_file("https://results.example.org/llava.json", tmp_path, max_bytes=LIMIT,
                               block_private=True, deadline=0.5)
    finally:
        released.set()


# ---- file slots shared by the replicas on one database (issue 33) ----
def refusal(slot) -> str:
    """The refusal of entering `slot` (a slots' context manager), or "" when it was given."""
    from mmvet_core.hosting.remote_files import SlotRefused
    try:
        with slot:
            return ""
    except SlotRefused as e:
        return str(e)


def test_replicas_on_one_database_count_the_same_file_slots_and_an_address_has_one_share(pg_url):
    """The audit: file slots were per process, so an address had one share per replica and the server N times its
    slots. Two processes' slots on one database: an address's second download is refused on the other replica,
    the totals are everyone's, and what is given back is free on both."""
    from mmvet_core.hosting.remote_files import BUSY, SharedFetchSlots
    from mmvet_core.store import Store

    stores = [Store(pg_url) for _ in range(2)]
    a, b = (SharedFetchSlots(s, total=2, per_visitor=1, wait=0.0, downloads=2) for s in stores)
    try:
        with a.download("x"):
            assert refusal(b.download("x")).startswith("Your address is already reading 1 file here")
            with b.download("y"):
                assert refusal(a.download("z")) == BUSY                 # two downloads in all
                with b.slot("z"), a.slot("w"):
                    assert refusal(b.slot("v")) == BUSY                 # two file slots in all
                    assert refusal(a.slot("z")).startswith("Your address is already reading 1 file here")
                    assert a.in_use() == b.in_use() == 2
        assert a.leases() == {} and refusal(b.download("x")) == ""
    finally:
        for s in stores:
            s.close()


def test_a_wait_for_a_file_slot_ends_when_another_replica_gives_it_back(pg_url):
    """A file slot's wait spans the replicas: a call on one waits while another replica holds the last slot, and
    is given it once that one is given back."""
    from mmvet_core.hosting.remote_files import SharedFetchSlots
    from mmvet_core.store import Store

    stores = [Store(pg_url) for _ in range(2)]
    looks, inner = threading.Semaphore(0), stores[1].update_pace

    def looked(*args, **kwargs):            # each look of the waiting replica at the database
        result = inner(*args, **kwargs)
        looks.release()
        return result
    stores[1].update_pace = looked
    a = SharedFetchSlots(stores[0], total=1, wait=0.0)
    b = SharedFetchSlots(stores[1], total=1, wait=120.0)
    given_back, got = threading.Event(), []
    try:
        with a.slot("x"):
            waiter = threading.Thread(target=lambda: got.append((refusal(b.slot("y")), given_back.is_set())))
            waiter.start()
            assert looks.acquire(timeout=60) and looks.acquire(timeout=60)    # it looked twice: it waits
            given_back.set()
        waiter.join(60)
    finally:
        for s in stores:
            s.close()
    assert got == [("", True)]


HOLDER = """
import sys, time
from mmvet_core.hosting.remote_files import SharedFetchSlots
from mmvet_core.store import Store
slots = SharedFetchSlots(Store(sys.argv[1], check=False), total=1, lease=float(sys.argv[2]))
with slots.slot("holder"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_slot_held_by_a_process_that_died_is_free_again_when_its_lease_ends(pg_url):
    """A replica killed while it reads a file never gives its slot back: its lease, renewed while it lived,
    ends and the slot is another's."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from mmvet_core.hosting.remote_files import BUSY, SharedFetchSlots
    from mmvet_core.store import Store

    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url, "3"], cwd=root, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(root)})
    store = Store(pg_url)
    slots = SharedFetchSlots(store, total=1, wait=0.0)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert refusal(slots.slot("honest")) == BUSY
        (first,) = [h[2] for h in slots.leases().values()]
        deadline = time.monotonic() + 60
        while [h[2] for h in slots.leases().values()] == [first] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [h[2] for h in slots.leases().values()][0] > first        # renewed while its process lives
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        while (answer := refusal(slots.slot("honest"))) == BUSY and time.monotonic() < deadline + 30:
            time.sleep(0.2)
        assert answer == "" and slots.leases() == {}
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)
        store.close()


def test_file_slots_are_counted_by_each_process_while_the_database_fails(pg_server, pg_url):
    """A database outage never refuses a file for the database's sake: each process counts its own slots (the
    per-process bounds still hold), and the shared count comes back with the database."""
    from mmvet_core.hosting.remote_files import BUSY, SharedFetchSlots
    from mmvet_core.store import Store

    store = Store(pg_url)
    slots = SharedFetchSlots(store, total=1, wait=0.0)
    try:
        pg_server.outage(pg_url, True)
        with slots.slot("x"):
            assert refusal(slots.slot("y")) == BUSY                 # this process's own count
        assert refusal(slots.download("x")) == ""
        pg_server.outage(pg_url, False)
        with slots.slot("x"):
            assert len(slots.leases()) == 1
    finally:
        pg_server.outage(pg_url, False)
        store.close()
