"""shadowctl registrations: the requests it sends and how it shows the replies, against a stand-in
server that records each request and answers with canned JSON (the client's wire behaviour only)."""
import json
import os
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import SHADOWCTL

REGISTRATION = {"id": "watch", "sections": "both", "match": ".*", "include": ["old", "new", "diff"], "paths": [],
                "target": {"type": "webhook", "url": "http://127.0.0.1:9000/", "secret": "***", "headers": {},
                           "timeoutMs": 5000},
                "enabled": True, "maxAttempts": 10}
STATUS = {"pending": 3, "lagSeconds": 1.5, "delivered": 40, "failed": 2, "deadLetters": 2,
          "lastError": "webhook: HTTP 500: down"}


def dead_letter(event_id, failed_at="2026-11-23T12:00:00Z"):
    return {"event": {"specversion": "1.0", "id": event_id, "type": "deviceshadow.shadow.updated",
                      "subject": "My House#main", "data": {}},
            "attempts": 10, "lastError": "webhook: HTTP 500: down", "failedAt": failed_at}


class StandIn:
    """Records (method, path, headers, body) and answers each request with the next canned reply."""

    def __init__(self):
        self.requests = []
        self.replies = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else None
                stand_in.requests.append((self.command, self.path, dict(self.headers), body))
                status, reply = stand_in.replies.pop(0) if stand_in.replies else (200, {})
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = handle_one

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Registrations(unittest.TestCase):
    def setUp(self):
        self.server = StandIn()

    def tearDown(self):
        self.server.close()

    def ctl(self, *args, stdin=None, replies=()):
        self.server.replies = list(replies)
        return subprocess.run([SHADOWCTL, "--server", self.server.url, "--token", "admin-token", *args], input=stdin,
                              capture_output=True, text=True, timeout=30)

    def sent(self):
        """(method, path, JSON body or None) of each request, and forgets them."""
        out = [(m, p, json.loads(b) if b else None) for m, p, _, b in self.server.requests]
        self.server.requests.clear()
        return out

    def test_put_sends_the_file_or_stdin_and_shows_the_stored_registration(self):
        document = '{"target":{"type":"webhook","url":"http://127.0.0.1:9000/","secret":"s"}}'
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(document)
        try:
            r = self.ctl("registrations", "put", "watch", f.name, replies=[(200, REGISTRATION)])
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"secret": "***"', r.stdout)
        self.assertIn('"maxAttempts": 10', r.stdout)
        method, path, headers, body = self.server.requests[0]
        self.assertEqual((method, path, body), ("PUT", "/v1/registrations/watch", document))
        self.assertEqual(headers["Authorization"], "Bearer admin-token")
        self.assertEqual(headers["Content-Type"], "application/json")
        self.server.requests.clear()
        for args in ((), ("-",)):
            r = self.ctl("registrations", "put", "watch", *args, stdin=document, replies=[(200, REGISTRATION)])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.sent(), [("PUT", "/v1/registrations/watch", json.loads(document))])

    def test_put_refuses_a_file_that_is_not_json_without_sending_it(self):
        r = self.ctl("registrations", "put", "watch", "-", stdin='{"target":')
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("shadowctl: "), r.stderr)
        self.assertEqual(self.sent(), [])
        r = self.ctl("registrations", "put", "watch", "/nonexistent/reg.json")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read /nonexistent/reg.json", r.stderr)

    def test_ids_are_percent_encoded_in_paths(self):
        self.ctl("registrations", "get", "a b/c?")
        self.ctl("registrations", "delete-dead-letters", "watch", "01795435656876146329#R2")
        self.assertEqual([p for _, p, _ in self.sent()],
                         ["/v1/registrations/a%20b%2Fc%3F", "/v1/registrations/watch/dead-letters/01795435656876146329%23R2"])

    def test_list_get_delete(self):
        other = dict(REGISTRATION, id="queue", enabled=False, target={"type": "sqs", "queueUrl": "https://sqs/q"})
        r = self.ctl("registrations", "list", replies=[(200, {"registrations": [REGISTRATION, other]})])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "watch  webhook http://127.0.0.1:9000/  sections both  match .*",
            "queue  sqs https://sqs/q  sections both  match .*  disabled"])
        r = self.ctl("registrations", "get", "watch", replies=[(200, dict(REGISTRATION, status=STATUS))])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"status": {\n    "pending": 3,\n    "lagSeconds": 1.5,', r.stdout)
        r = self.ctl("--json", "registrations", "get", "watch", replies=[(200, dict(REGISTRATION, status=STATUS))])
        self.assertEqual(json.loads(r.stdout)["status"], STATUS)
        r = self.ctl("registrations", "delete", "watch", replies=[(200, b"")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "deleted registration watch\n")
        self.assertEqual(self.sent(), [("GET", "/v1/registrations", None), ("GET", "/v1/registrations/watch", None),
                                       ("GET", "/v1/registrations/watch", None), ("DELETE", "/v1/registrations/watch", None)])

    def test_dead_letters_one_page_or_all(self):
        page1 = {"deadLetters": [dead_letter("e#1"), dead_letter("e#2")], "cursor": "c 1"}
        page2 = {"deadLetters": [dead_letter("e#3")]}
        r = self.ctl("registrations", "dead-letters", "watch", "--limit", "2", replies=[(200, page1)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "2026-11-23T12:00:00Z  e#1  My House#main  attempts 10", "  webhook: HTTP 500: down",
            "2026-11-23T12:00:00Z  e#2  My House#main  attempts 10", "  webhook: HTTP 500: down",
            "more: --cursor c 1"])
        self.assertEqual(self.sent(), [("GET", "/v1/registrations/watch/dead-letters?limit=2", None)])
        r = self.ctl("--json", "registrations", "dead-letters", "watch", "--limit", "2", "--all",
                     replies=[(200, page1), (200, page2)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {"deadLetters": page1["deadLetters"] + page2["deadLetters"]})
        self.assertEqual([p for _, p, _ in self.sent()], ["/v1/registrations/watch/dead-letters?limit=2",
                                                          "/v1/registrations/watch/dead-letters?limit=2&cursor=c%201"])
        r = self.ctl("registrations", "dead-letters", "watch", "--cursor", "c 1", replies=[(200, page2)])
        self.assertNotIn("more:", r.stdout)
        self.assertEqual([p for _, p, _ in self.sent()], ["/v1/registrations/watch/dead-letters?cursor=c%201"])

    def test_redrive_all_or_some(self):
        r = self.ctl("registrations", "redrive", "watch", replies=[(202, {"redriven": 5})])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "redriven 5 dead letter(s)\n")
        r = self.ctl("registrations", "redrive", "watch", "e#1", "e#2", replies=[(202, {"redriven": 2})])
        self.assertEqual(r.stdout, "redriven 2 dead letter(s)\n")
        self.assertEqual(self.sent(), [("POST", "/v1/registrations/watch/dead-letters/redrive", {}),
                                       ("POST", "/v1/registrations/watch/dead-letters/redrive", {"ids": ["e#1", "e#2"]})])

    def test_delete_dead_letters_all_or_some(self):
        r = self.ctl("registrations", "delete-dead-letters", "watch", "--all", replies=[(200, {"deleted": 7})])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "deleted 7 dead letter(s)\n")
        r = self.ctl("registrations", "delete-dead-letters", "watch", "e#1", "e#2",
                     replies=[(200, {"deleted": 1}), (200, {"deleted": 0})])
        self.assertEqual(r.stdout, "deleted 1 dead letter(s)\n")
        self.assertEqual(self.sent(), [("DELETE", "/v1/registrations/watch/dead-letters", None),
                                       ("DELETE", "/v1/registrations/watch/dead-letters/e%231", None),
                                       ("DELETE", "/v1/registrations/watch/dead-letters/e%232", None)])
        for args in ((), ("e#1", "--all")):  # neither, or both: nothing is sent
            r = self.ctl("registrations", "delete-dead-letters", "watch", *args)
            self.assertEqual(r.returncode, 1)
            self.assertIn("give either event ids or --all", r.stderr)
        self.assertEqual(self.sent(), [])

    def test_server_errors_exit_1_with_the_servers_code_and_message(self):
        error = {"error": {"code": "not_found", "message": "no registration nobody"}}
        r = self.ctl("registrations", "get", "nobody", replies=[(404, error)])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "shadowctl: not_found: no registration nobody\n")
        self.assertEqual(r.stdout, "")
        forbidden = {"error": {"code": "forbidden", "message": "needs an admin token"}}
        r = self.ctl("registrations", "dead-letters", "watch", "--all",
                     replies=[(200, {"deadLetters": [], "cursor": "c"}), (403, forbidden)])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "shadowctl: forbidden: needs an admin token\n")
        r = self.ctl("registrations", "list", replies=[(502, b"<html>bad gateway</html>")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("HTTP 502 with a body that is not JSON", r.stderr)


if __name__ == "__main__":
    unittest.main()
