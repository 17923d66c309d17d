"""A corpus of hostile requests: each gets the right status and error JSON, the server stays
up, and nothing is stored."""
import json
import socket
import time
import unittest

from harness import ServerTestCase, shadow_path

PATH = shadow_path("victim", "main", "reported")


def raw(server, data: bytes, read_timeout=10.0):
    """Sends raw bytes on a fresh connection; returns (status, body) of the first response or None."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=read_timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early (e.g. 413) and closed; its answer is still readable
        chunks = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks += chunk
                head, sep, body = chunks.partition(b"\r\n\r\n")
                if sep:
                    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")]
                    if length and len(body) >= length[0]:
                        break
        except (socket.timeout, ConnectionResetError):
            pass
    if not chunks:
        return None
    head, _, body = chunks.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def post_raw(server, body: bytes, path=PATH):
    return raw(server, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " +
               str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)


class BadInput(ServerTestCase):
    server_args = ("--read-timeout-ms", "1000", "--idle-timeout-ms", "2000")

    def tearDown(self):
        self.assertTrue(self.server.alive(), "the server died")
        self.assertEqual(self.server.get(shadow_path("victim")).status_code, 404, "something was stored")

    def expect(self, response, status, code):
        self.assertIsNotNone(response, "no response")
        got_status, body = response
        self.assertEqual(got_status, status, body[:300])
        self.assertEqual(json.loads(body)["error"]["code"], code)

    def test_malformed_and_truncated_json(self):
        for body in [b"{", b'{"state":', b'{"state":{"a":1}', b'{"state":{"a":1}}}', b"nul", b'{"state":{"a":01}}',
                     b'{"state":{"a":1,}}', b"{'state':{}}", b'{"state":{"a":NaN}}', b'{"state":{"a":1e999}}',
                     b'{"state":{"a":"\\u12"}}', b'\xef\xbb\xbf{"state":{}}', b"\x00\x01\x02", b"[" * 10 + b"]" * 9]:
            with self.subTest(body=body[:40]):
                self.expect(post_raw(self.server, body), 400, "invalid_json")

    def test_invalid_utf8(self):
        for body in [b'{"state":{"a":"\xff"}}', b'{"state":{"\xc0\xaf":1}}', b'{"state":{"a":"\xed\xa0\x80"}}',
                     b'{"state":{"a":"\xf4\x90\x80\x80"}}', b'{"state":{"a":"\xe2\x82"}}']:
            with self.subTest(body=body):
                self.expect(post_raw(self.server, body), 400, "invalid_json")

    def test_empty_and_wrong_bodies(self):
        self.expect(post_raw(self.server, b""), 400, "invalid_request")
        self.expect(post_raw(self.server, b"   "), 400, "invalid_json")
        self.expect(post_raw(self.server, b'"state"'), 400, "invalid_request")
        self.expect(post_raw(self.server, b'{"state":null}'), 400, "invalid_request")

    def test_huge_body_is_refused_before_it_is_read(self):
        head = (b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n")
        self.expect(raw(self.server, head + b"{" * 1000), 413, "document_too_large")

    def test_nesting_far_beyond_the_limit(self):
        for depth in [100, 10000, 150000]:  # the largest is just under the 1 MiB body limit
            with self.subTest(depth=depth):
                body = b'{"state":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
                response = post_raw(self.server, body)
                self.expect(response, 400, "too_deep")
                # the limit it names is the server's (32 levels), not the parser's guard above it
                error = json.loads(response[1])["error"]
                self.assertEqual((error["message"], error["limit"]), ("nesting deeper than 32 levels", 32))
        self.expect(post_raw(self.server, b'{"state":{"a":' + b"[" * 100000), 400, "too_deep")
        self.expect(post_raw(self.server, b'{"state":' + b'{"a":' * 1000000), 413, "document_too_large")

    def test_bad_names_in_the_path(self):
        for path in ["/v1/things/a%0Ab/shadows/main/reported", "/v1/things/%C0%AF/shadows/main/reported",
                     "/v1/things/x/shadows/a%20b/reported", "/v1/things/x/shadows/" + "n" * 65 + "/reported",
                     "/v1/things/" + "t" * 513 + "/shadows/main/reported"]:
            with self.subTest(path=path[:50]):
                self.expect(post_raw(self.server, b'{"state":{"a":1}}', path), 400, "invalid_name")
        self.expect(post_raw(self.server, b'{"state":{"a":1}}', "/v1/things/a%zz/shadows/main/reported"), 400, "invalid_request")

    def test_malformed_http(self):
        for data in [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n",
                     b"POST " + PATH.encode() + b" HTTP/1.1\r\nContent-Length: abc\r\n\r\n"]:
            with self.subTest(data=data[:30]):
                self.expect(raw(self.server, data), 400, "invalid_request")
        self.expect(raw(self.server, b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"), 431, "invalid_request")

    def test_wrong_methods_and_unknown_routes(self):
        self.expect(raw(self.server, b"PATCH " + PATH.encode() + b" HTTP/1.1\r\nConnection: close\r\n\r\n"), 405,
                    "method_not_allowed")
        self.expect(raw(self.server, b"GET /nothing/here HTTP/1.1\r\nConnection: close\r\n\r\n"), 404, "not_found")
        self.expect(raw(self.server, b"GET relative HTTP/1.1\r\nConnection: close\r\n\r\n"), 400, "invalid_request")

    def test_slow_clients_are_cut_off_and_hold_no_worker(self):
        slow = []
        for _ in range(8):  # trickle a header, never finish it
            s = socket.create_connection(("127.0.0.1", self.server.port))
            s.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        half_body = socket.create_connection(("127.0.0.1", self.server.port))
        half_body.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"state\":")
        slow.append(half_body)
        start = time.time()
        self.assertEqual(self.server.get("/healthz").status_code, 200)  # served meanwhile
        self.assertLess(time.time() - start, 1.0)
        time.sleep(2.5)
        for s in slow:
            s.settimeout(2)
            try:
                data = s.recv(1024)
            except (ConnectionResetError, socket.timeout):
                data = b""
            self.assertEqual(data, b"", "the server kept a slow connection open")
            s.close()

    def test_pipelined_requests_are_answered_in_order(self):
        requests = b"".join(b"GET " + shadow_path(f"pipe-{i}").encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n" for i in range(5))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=5) as sock:
            sock.sendall(requests)
            data = b""
            while data.count(b"HTTP/1.1 404") < 5:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        order = [data.find(f"pipe-{i}".encode()) for i in range(5)]
        self.assertEqual(order, sorted(order))
        self.assertNotIn(-1, order)


if __name__ == "__main__":
    unittest.main()
