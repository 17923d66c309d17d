"""Hostile clients: framing that exhausts memory or smuggles requests, slow senders and readers,
connection floods, label floods, raw bytes echoed in errors. Each test reproduces one attack on
a real shadowd over raw sockets and checks that it is refused and that nothing else suffers."""
import json
import os
import re
import resource
import socket
import subprocess
import time
import unittest

from harness import SHADOWD, Server, shadow_path


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Raw:
    """One client connection speaking raw bytes."""

    def __init__(self, port, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(20)
        self.buffer = b""

    def send(self, data):
        """Sends data; False when the server has closed the connection meanwhile."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def flood(self, piece, limit=64 << 20):
        """Sends piece over and over until the server refuses more or limit bytes went out;
        returns the bytes sent."""
        sent = 0
        while sent < limit and self.send(piece):
            sent += len(piece)
        return sent

    def response(self):
        """Reads one response: (status, headers, body). Raises on a connection closed first."""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before a response")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        length = int(headers.get("content-length", 0))
        while len(self.buffer) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed inside a body")
            self.buffer += chunk
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self, timeout=10):
        """True when the server closes the connection within timeout (reads and drops bytes)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def request(method, path, body=b"", extra=""):
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


class HostileClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--read-timeout-ms", "2000", "--idle-timeout-ms", "30000", "--max-connections", "40")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def setUp(self):
        self.assertTrue(self.server.alive())

    def tearDown(self):
        self.assertTrue(self.server.alive(), "".join(self.server.log[-20:]))

    def raw(self, **kw):
        c = Raw(self.server.port, **kw)
        self.addCleanup(c.close)
        return c

    def assertJsonError(self, status, headers, body, expected_status, code=None):
        self.assertEqual(status, expected_status, body)
        self.assertEqual(headers["content-type"], "application/json")
        parsed = json.loads(body.decode("utf-8"))  # strict: every body is UTF-8 JSON
        if code:
            self.assertEqual(parsed["error"]["code"], code, parsed)
        return parsed

    # Finding 1: chunk extensions, chunk-size lines and trailers were buffered without limit.
    def test_an_endless_chunk_extension_is_refused_without_growing_memory(self):
        before = rss_kib(self.server.proc.pid)
        c = self.raw()
        c.send(b"POST " + shadow_path("ext").encode() + b"/reported HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n5;")
        self.assertLess(c.flood(b"x" * 65536), 32 << 20, "the server kept reading an endless chunk extension")
        self.assertJsonError(*c.response(), 400, "invalid_request")
        self.assertTrue(c.closed())
        self.assertLess(rss_kib(self.server.proc.pid) - before, 16 << 10)

    def test_an_endless_trailer_is_refused(self):
        c = self.raw()
        c.send(b"POST " + shadow_path("trailer").encode() + b"/reported HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: ")
        self.assertLess(c.flood(b"y" * 65536), 32 << 20)
        self.assertJsonError(*c.response(), 400, "invalid_request")

    def test_tiny_chunks_with_long_extensions_count_against_the_body_limit(self):
        c = self.raw()
        c.send(b"POST " + shadow_path("tiny").encode() + b"/reported HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"1;" + b"e" * 4000 + b"\r\n \r\n"
        self.assertLess(c.flood(chunk * 16), 32 << 20)
        self.assertJsonError(*c.response(), 413, "document_too_large")
        self.assertEqual(self.server.get(shadow_path("tiny")).status_code, 404)

    def test_ordinary_chunked_bodies_still_work(self):
        body = json.dumps({"state": {"chunked": True}}).encode()
        c = self.raw()
        c.send(b"POST " + shadow_path("chunked").encode() + b"/reported HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + b"%x;name=value\r\n" % len(body) + body + b"\r\n0\r\nX-T: 1\r\n\r\n")
        status, _, text = c.response()
        self.assertEqual(status, 200, text)
        self.assertEqual(self.server.get(shadow_path("chunked")).json()["reported"]["state"], {"chunked": True})

    # Finding 7: a Transfer-Encoding not ending in chunked was ignored and the body read as the
    # next request; RFC 9112 §6.3 makes every such message a 400 and the connection closed.
    def test_smuggled_requests_are_refused_and_never_run(self):
        self.server.post(shadow_path("victim", "main", "reported"), {"state": {"a": 1}})
        hidden = request("DELETE", shadow_path("victim"))
        for framing in ["Transfer-Encoding: identity\r\n", "Transfer-Encoding: chunked, chunked\r\n",
                        "Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                        "Transfer-Encoding: gzip\r\n"]:
            c = self.raw()
            c.send(f"GET /healthz HTTP/1.1\r\nHost: x\r\n{framing}\r\n".encode() + hidden)
            self.assertJsonError(*c.response(), 400, "invalid_request")
            self.assertTrue(c.closed(), framing)
        for framing in ["Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                        "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
                        "Transfer-Encoding: identity\r\nContent-Length: 0\r\n",
                        "Content-Length: 0\r\nContent-Length: 0\r\n", "Content-Length: 0, 0\r\n",
                        "Content-Length: 0\r\nContent-Length: 5\r\n"]:
            c = self.raw()
            c.send(f"GET /healthz HTTP/1.1\r\nHost: x\r\n{framing}\r\n".encode() + hidden)
            status, _, body = c.response()
            self.assertEqual(status, 400, (framing, body))
            self.assertTrue(c.closed(), framing)
        self.assertEqual(self.server.get(shadow_path("victim")).status_code, 200)

    # Finding 8: error bodies echoed raw bytes and stopped being JSON.
    def test_error_bodies_stay_utf8_json_whatever_the_target(self):
        for target in [b"/\xff\xfe", b"/v1/things?%FF=1", b"/v1/things/%FF%FE/shadows/main", b"/v1/\xc3"]:
            c = self.raw()
            c.send(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            status, headers, body = c.response()
            self.assertIn(status, (400, 404), body)
            self.assertJsonError(status, headers, body, status)

    # Finding 9: after a first request, the next one's headers could trickle in under the idle
    # timeout (60 s); the read timeout now runs from a request's first byte.
    def test_a_trickled_request_ends_at_the_read_timeout(self):
        c = self.raw()
        c.send(request("GET", "/healthz"))
        self.assertEqual(c.response()[0], 200)
        start = time.monotonic()
        trickle = request("GET", "/healthz", extra="X-Padding: " + "p" * 200 + "\r\n")
        closed = False
        for byte in trickle:
            if not c.send(bytes([byte])):
                closed = True
                break
            time.sleep(0.2)
            if time.monotonic() - start > 25:
                break
        if not closed:
            closed = c.closed(timeout=1)
        elapsed = time.monotonic() - start
        self.assertTrue(closed)
        self.assertLess(elapsed, 15, "the trickle lasted past the 2 s read timeout, up to the 30 s idle one")

    def test_an_idle_keep_alive_connection_may_wait_for_its_next_request(self):
        c = self.raw()
        c.send(request("GET", "/healthz"))
        self.assertEqual(c.response()[0], 200)
        time.sleep(3)  # past the read timeout, within the idle one
        c.send(request("GET", "/healthz"))
        self.assertEqual(c.response()[0], 200)

    # Finding 2: every invented method added a series to /metrics, forever.
    def test_invented_methods_share_one_metrics_label(self):
        for i in range(200):
            c = self.raw()
            c.send(request(f"M{i}X", "/v1/things"))
            c.response()
            c.close()
        text = self.server.get("/metrics").text
        self.assertFalse("M17X" in text, "an invented method got a series of its own")
        self.assertIn('method="other"', text)
        self.assertLess(len(text), 64 << 10)

    def test_readyz_reports_when_the_disk_is_nearly_full(self):
        with Server("--min-free-bytes", str(1 << 62)) as full:
            r = full.get("/readyz")
            self.assertEqual(r.status_code, 503)
            self.assertIn("bytes free", r.json()["error"]["message"])
            self.assertEqual(full.get("/healthz").status_code, 200)
        self.assertEqual(self.server.get("/readyz").status_code, 200)

    def test_numbers_and_nulls_as_documented(self):
        r = self.server.post(shadow_path("forms", "main", "reported"),
                             data=b'{"state":{"big":18446744073709551616,"arr":[null,1,null],'
                                  b'"tv":{"value":null,"ts":1700000000}}}')
        self.assertEqual(r.status_code, 200, r.text)
        raw = self.server.get(shadow_path("forms")).text
        self.assertIn('"big":1.8446744073709552e+19', raw)
        self.assertIn('"arr":[null,1,null]', raw)
        self.assertIn('"tv":{"value":null,"ts":1700000000}', raw)


class ConnectionLimits(unittest.TestCase):
    # Finding 5: no connection cap; at the descriptor limit accept() spun at 100% CPU.
    def test_connections_over_the_limit_are_answered_503_and_the_rest_served(self):
        with Server("--max-connections", "20") as server:
            held = [Raw(server.port) for _ in range(20)]
            try:
                time.sleep(0.3)
                extra = Raw(server.port)
                status, headers, body = extra.response()
                self.assertEqual(status, 503)
                self.assertEqual(json.loads(body)["error"]["code"], "unavailable")
                extra.close()
                held.pop().close()
                time.sleep(0.3)
                c = Raw(server.port)
                c.send(request("GET", "/healthz"))
                self.assertEqual(c.response()[0], 200)
                c.close()
            finally:
                for c in held:
                    c.close()
            time.sleep(0.3)
            metrics = server.get("/metrics").text
            self.assertRegex(metrics, r"shadowd_http_connections_rejected_total [1-9]")
            self.assertIn("shadowd_http_connections_open ", metrics)

    def test_with_few_descriptors_the_limit_leaves_out_those_the_server_holds(self):
        with Server(open_files=64) as server:
            cap = int(re.search(r"lowered to three quarters of the descriptors left max_connections=(\d+)",
                                "".join(server.log)).group(1))
            self.assertLess(cap, 48)  # three quarters of what the store and the rest leave of 64
            self.assertEqual(server.get("/healthz").status_code, 200)  # the session's connection, kept
            held = [Raw(server.port) for _ in range(cap - 1)]
            try:
                def open_now():
                    m = re.search(r"(?m)^shadowd_http_connections_open (\d+)", server.get("/metrics").text)
                    return int(m.group(1)) == cap
                deadline = time.time() + 20
                while not open_now() and time.time() < deadline:
                    time.sleep(0.05)
                extra = Raw(server.port)  # refused at once, not left waiting for a descriptor
                self.assertEqual(extra.response()[0], 503)
                extra.close()
            finally:
                for c in held:
                    c.close()
            time.sleep(0.3)
            self.assertRegex(server.get("/metrics").text, r"shadowd_http_accept_failures_total 0\b")

    def test_out_of_descriptors_the_server_pauses_instead_of_spinning(self):
        with Server("--max-connections", "10000") as server:
            pid = server.proc.pid
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            open_now = len(os.listdir(f"/proc/{pid}/fd"))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_now + 4, hard))
            clients = [Raw(server.port) for _ in range(30)]  # the kernel's backlog holds the rest
            try:
                time.sleep(0.5)
                before = cpu_seconds(pid)
                time.sleep(3)
                used = cpu_seconds(pid) - before
                self.assertLess(used, 1.0, "accept() spun on EMFILE")  # spinning uses ~3 s of CPU here
            finally:
                for c in clients:
                    c.close()
                resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
            time.sleep(0.5)
            self.assertIsNone(server.proc.poll(), "".join(server.log[-20:]))
            r = server.get("/healthz")
            self.assertEqual(r.status_code, 200, r.text)
            self.assertRegex(server.get("/metrics").text, r"shadowd_http_accept_failures_total [1-9]")


class ThreadLimits(unittest.TestCase):
    def test_workers_that_cannot_start_fail_the_start_with_a_message(self):
        """Under a limit of virtual memory (or of processes) a thread cannot start: asio's pool then
        waited forever for the threads it had started."""
        limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 4096 stacks need 32 GiB
        r = subprocess.run([SHADOWD, "--listen", "127.0.0.1:0", "--store", "memory", "--workers", "4096"],
                           preexec_fn=limit, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("shadowd: cannot start 4096 worker threads: Resource temporarily unavailable", r.stderr)


class SlowReaders(unittest.TestCase):
    # Finding 6: pages were built whole (57 MB for 1,000 events of 30 KB) and held for slow readers.
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-page-bytes", str(6 << 20), "--max-response-bytes-in-flight", str(8 << 20))
        value = "v" * 30000
        for i in range(200):
            r = cls.server.post(shadow_path("big", "main", "reported"), {"state": {"v": f"{value}{i}"}})
            assert r.status_code == 200, r.text

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_history_pages_stop_at_the_byte_budget(self):
        events, cursor, pages = [], None, 0
        while True:
            r = self.server.get(shadow_path("big", "main", "history") + "?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
            self.assertEqual(r.status_code, 200)
            self.assertLess(len(r.content), (6 << 20) + 100000)
            page = r.json()
            events += page["events"]
            pages += 1
            cursor = page.get("cursor")
            if not cursor:
                break
        self.assertEqual(len(events), 200)
        self.assertEqual(len({e["id"] for e in events}), 200)
        self.assertGreaterEqual(pages, 2)

    def test_batch_get_answers_past_the_budget_with_a_retryable_error(self):
        with Server("--max-page-bytes", "100000") as server:
            for i in range(5):
                server.post(shadow_path(f"b{i}", "main", "reported"), {"state": {"v": "x" * 40000}})
            r = server.post("/v1/batch/get", {"shadows": [{"thing": f"b{i}"} for i in range(5)]})
            self.assertEqual(r.status_code, 200)
            items = r.json()["shadows"]
            self.assertEqual([x["thing"] for x in items], [f"b{i}" for i in range(5)])
            served = [x for x in items if "error" not in x]
            refused = [x for x in items if "error" in x]
            self.assertGreaterEqual(len(served), 2)
            self.assertTrue(refused)
            self.assertTrue(all(x["error"]["code"] == "unavailable" for x in refused))

    def test_reads_are_shed_while_slow_readers_hold_the_response_budget(self):
        path = shadow_path("big", "main", "history") + "?limit=1000"
        slow = Raw(self.server.port, rcvbuf=4096)
        try:
            slow.send(request("GET", path))
            time.sleep(1.0)  # the response waits in the server for a reader that does not read
            r = self.server.get(path)
            self.assertEqual(r.status_code, 503, r.text[:200])
            self.assertEqual(r.json()["error"]["code"], "unavailable")
            self.assertEqual(r.headers["Retry-After"], "1")
            # Small reads and writes go on.
            self.assertEqual(self.server.get("/healthz").status_code, 200)
            self.assertEqual(self.server.post(shadow_path("w", "main", "reported"), {"state": {"a": 1}}).status_code, 200)
            self.assertRegex(self.server.get("/metrics").text, r"shadowd_http_responses_shed_total [1-9]")
        finally:
            slow.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.server.get(path).status_code != 200:
            time.sleep(0.2)
        self.assertEqual(self.server.get(path).status_code, 200)


if __name__ == "__main__":
    unittest.main()
