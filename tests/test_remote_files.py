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
