"""shadowctl registrations end to end: every command against a real shadowd (registrations,
dead letters made by a real webhook receiver that refuses events, redrive, admin-only access),
checked both in what shadowctl prints and in what the server then holds. Which requests reached
the server is read from its own shadowd_http_requests_total counters.

The one stand-in server left is HostileProxy: a broken proxy answering 502 with an HTML page, a
reply no shadowd produces, to check that shadowctl reports a reply that is not JSON."""
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import SHADOWCTL, Server, shadow_path
from test_notify import Receiver, eventually, webhook

LETTERS = "/v1/registrations/{id}/dead-letters"
ONE_LETTER = "/v1/registrations/{id}/dead-letters/{eventId}"
EVENT_ID = re.compile(r"^\d{20}#R\d+$")  # e.g. 01795435761624171102#R1: holds a '#'


class CliTestCase(unittest.TestCase):
    """A fresh shadowd (SQLite unless server_args say otherwise) for each test."""

    server_args = ()

    def setUp(self):
        self.server = Server(*self.server_args)
        self.addCleanup(self.server.close)

    def ctl(self, *args, stdin=None, token=None, env=None):
        """Runs shadowctl against the server; args start with global options or the command."""
        command = [SHADOWCTL, "--server", self.server.url, *(["--token", token] if token else []), *args]
        inherited = {k: v for k, v in os.environ.items() if k not in ("SHADOWCTL_SERVER", "SHADOWCTL_TOKEN")}
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30,
                              env={**inherited, **(env or {})})

    def ok(self, *args, **kw):
        """shadowctl's stdout, after checking it succeeded and said nothing on stderr."""
        r = self.ctl(*args, **kw)
        self.assertEqual((r.returncode, r.stderr), (0, ""), args)
        return r.stdout

    def fails(self, *args, **kw):
        """shadowctl's stderr, after checking it exited 1 and printed nothing on stdout."""
        r = self.ctl(*args, **kw)
        self.assertEqual((r.returncode, r.stdout), (1, ""), (args, r.stderr))
        return r.stderr

    # The server's side, read over REST.
    def register(self, rid, body, token=None):
        r = self.server.request("PUT", f"/v1/registrations/{rid}", json=body, token=token)
        self.assertEqual(r.status_code, 200, r.text)

    def stored(self, rid, token=None):
        """The registration as the server holds it (without status), or None."""
        r = self.server.get(f"/v1/registrations/{rid}", token=token)
        if r.status_code == 404:
            return None
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        del body["status"]
        return body

    def status(self, rid):
        r = self.server.get(f"/v1/registrations/{rid}")
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()["status"]

    def letters(self, rid, token=None):
        """The registration's dead letters, in the server's order."""
        r = self.server.get(f"/v1/registrations/{rid}/dead-letters?limit=1000", token=token)
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()["deadLetters"]

    def letter_ids(self, rid, token=None):
        return [d["event"]["id"] for d in self.letters(rid, token)]

    def requests_seen(self, route, method, token=None):
        """How many requests the server has answered on a route template with a method, by any status."""
        text = self.server.get("/metrics", token=token).text
        pattern = re.compile(r'^shadowd_http_requests_total\{route="' + re.escape(route) + r'",method="' + method +
                             r'",status="\d+"\} (\d+)$', re.M)
        return sum(int(n) for n in pattern.findall(text))

    def report(self, thing, state):
        r = self.server.post(shadow_path(thing, "main", "reported"), {"state": state})
        self.assertEqual(r.status_code, 200, r.text)

    def make_dead_letters(self, rid, things):
        """Registers rid as a webhook to a Receiver answering 400, so each event is dead-lettered at
        once, writes one shadow per thing and waits for the dead letters. Returns the receiver (whose
        answer is switched by setting receiver.code) and the dead letters' event ids."""
        receiver = Receiver(answer=lambda n: receiver.code)
        receiver.code = 400
        self.addCleanup(receiver.close)
        self.register(rid, webhook(receiver.url, match="^dl .*"))
        for i, thing in enumerate(things):
            self.report(thing, {"n": i})
        self.assertTrue(eventually(lambda: len(self.letters(rid)) == len(things)), self.letters(rid))
        ids = self.letter_ids(rid)
        self.assertEqual(len(set(ids)), len(things))
        for event_id in ids:
            self.assertRegex(event_id, EVENT_ID)
        return receiver, ids


class Registrations(CliTestCase):
    def test_put_from_a_file_from_stdin_and_dash_shows_the_stored_registration(self):
        document = {"target": {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "top-s3cret"}}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(document, f)
        self.addCleanup(os.unlink, f.name)
        out = self.ok("registrations", "put", "watch", f.name)
        # Readable: the stored registration, indented, the secret hidden and the defaults filled in.
        self.assertTrue(out.startswith('{\n  "id": "watch",\n  "sections": "both",\n'), out)
        self.assertNotIn("top-s3cret", out)
        shown = json.loads(out)
        self.assertEqual(shown, {"id": "watch", "sections": "both", "match": ".*", "include": ["old", "new", "diff"],
                                 "target": {"type": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "***",
                                            "timeoutMs": 5000},
                                 "enabled": True, "maxAttempts": 10, "maxAgeSeconds": 3600})
        self.assertEqual(self.stored("watch"), shown)

        # Stdin, without a file argument and with "-": each replaces the registration.
        from_stdin = webhook("http://127.0.0.1:9/other", sections="reported", match="^a#.*", maxAttempts=3)
        shown = json.loads(self.ok("registrations", "put", "watch", stdin=json.dumps(from_stdin)))
        self.assertEqual((shown["sections"], shown["match"], shown["maxAttempts"], shown["target"]["url"]),
                         ("reported", "^a#.*", 3, "http://127.0.0.1:9/other"))
        self.assertNotIn("secret", shown["target"])
        self.assertEqual(self.stored("watch"), shown)
        from_dash = webhook("http://127.0.0.1:9/dash", target={"secret": "s2"}, include=["new"], enabled=False)
        shown = json.loads(self.ok("registrations", "put", "watch", "-", stdin=json.dumps(from_dash)))
        self.assertEqual((shown["include"], shown["enabled"], shown["target"]["secret"], shown["sections"]),
                         (["new"], False, "***", "both"))
        self.assertEqual(self.stored("watch"), shown)
        # --json: the server's reply as received, one line.
        out = self.ok("--json", "registrations", "put", "other", "-", stdin=json.dumps(document))
        self.assertEqual(out.count("\n"), 1, out)
        self.assertEqual(json.loads(out), self.stored("other"))
        self.assertEqual(self.requests_seen("/v1/registrations/{id}", "PUT"), 4)

    def test_put_refuses_input_that_is_not_json_without_sending_it(self):
        r = self.fails("registrations", "put", "watch", "-", stdin='{"target":')
        # Told locally: the server would have answered "invalid_json: …".
        self.assertEqual(r, "shadowctl: unexpected end of JSON at line 1, column 11\n")
        self.assertEqual(self.fails("registrations", "put", "watch", "/nonexistent/reg.json"),
                         "shadowctl: cannot read /nonexistent/reg.json\n")
        self.assertEqual(self.requests_seen("/v1/registrations/{id}", "PUT"), 0)
        self.assertIsNone(self.stored("watch"))
        # JSON the server refuses is sent, and the server's error shown.
        r = self.fails("registrations", "put", "watch", "-", stdin=json.dumps(webhook("ftp://127.0.0.1/")))
        self.assertEqual(r, "shadowctl: invalid_request: target.url must be an http:// or https:// URL\n")
        self.assertEqual(self.requests_seen("/v1/registrations/{id}", "PUT"), 1)
        self.assertIsNone(self.stored("watch"))

    def test_list_prints_a_line_per_registration(self):
        self.assertEqual(self.ok("registrations", "list"), "")
        self.register("watch", webhook("http://127.0.0.1:9/hook"))
        self.register("queue", webhook("http://127.0.0.1:9/q", sections="desired", match="^a#.*", enabled=False))
        self.assertEqual(self.ok("registrations", "list").splitlines(), [
            "queue  webhook http://127.0.0.1:9/q  sections desired  match ^a#.*  disabled",
            "watch  webhook http://127.0.0.1:9/hook  sections both  match .*"])
        listed = json.loads(self.ok("--json", "registrations", "list"))
        self.assertEqual(listed, self.server.get("/v1/registrations").json())
        self.assertEqual([r["id"] for r in listed["registrations"]], ["queue", "watch"])

    def test_get_shows_the_registration_and_its_delivery_status(self):
        # The receiver takes the 1st event, refuses the 2nd (a dead letter) and holds the 3rd
        # until released (pending, with a lag).
        release = threading.Event()
        def answer(n):
            if n <= 2:
                return 204 if n == 1 else 400
            release.wait(20)
            return 204

        receiver = Receiver(answer=answer)
        self.addCleanup(receiver.close)
        self.addCleanup(release.set)
        self.register("watch", webhook(receiver.url, target={"secret": "s", "timeoutMs": 30000}))
        self.report("a", {"n": 1})
        self.assertTrue(eventually(lambda: self.status("watch")["delivered"] == 1))
        self.report("b", {"n": 1})
        self.assertTrue(eventually(lambda: self.status("watch")["deadLetters"] == 1))
        self.report("c", {"n": 1})
        self.assertTrue(eventually(lambda: len(receiver.requests) == 3))

        out = self.ok("registrations", "get", "watch")
        self.assertIn(',\n  "status": {\n    "pending": 1,\n    "lagSeconds": ', out)
        shown = json.loads(out)
        self.assertEqual(shown["target"]["secret"], "***")
        status = shown.pop("status")
        self.assertEqual(shown, self.stored("watch"))
        self.assertGreater(status.pop("lagSeconds"), 0)
        self.assertEqual(status, {"pending": 1, "delivered": 1, "failed": 1, "deadLetters": 1,
                                  "lastError": "webhook: HTTP 400"})
        out = self.ok("--json", "registrations", "get", "watch")
        self.assertEqual(out.count("\n"), 1, out)
        status = json.loads(out)["status"]
        self.assertGreater(status.pop("lagSeconds"), 0)
        self.assertEqual(status, {"pending": 1, "delivered": 1, "failed": 1, "deadLetters": 1,
                                  "lastError": "webhook: HTTP 400"})

        release.set()
        self.assertTrue(eventually(lambda: self.status("watch")["pending"] == 0))
        status = json.loads(self.ok("registrations", "get", "watch"))["status"]
        self.assertEqual(status, {"pending": 0, "lagSeconds": 0, "delivered": 2, "failed": 1, "deadLetters": 1,
                                  "lastError": "webhook: HTTP 400"})

    def test_delete_then_delete_again_is_not_found(self):
        receiver, ids = self.make_dead_letters("watch", ["dl 1"])
        self.register("keep", webhook("http://127.0.0.1:9/keep"))
        self.assertEqual(self.ok("registrations", "delete", "watch"), "deleted registration watch\n")
        self.assertIsNone(self.stored("watch"))
        self.assertIsNotNone(self.stored("keep"))
        self.assertEqual(self.fails("registrations", "delete", "watch"), "shadowctl: not_found: no registration watch\n")
        self.assertEqual(self.fails("registrations", "get", "watch"), "shadowctl: not_found: no registration watch\n")
        self.assertEqual(self.fails("registrations", "dead-letters", "watch"),
                         "shadowctl: not_found: no registration watch\n")
        self.assertEqual(self.requests_seen("/v1/registrations/{id}", "DELETE"), 2)
        # Its dead letters went with it.
        self.register("watch", webhook(receiver.url, match="^dl .*"))
        self.assertEqual(self.letters("watch"), [])
        self.assertEqual(self.ok("registrations", "dead-letters", "watch"), "")


class DeadLetters(CliTestCase):
    THINGS = ["dl 0", "dl 1", "dl 2", "dl 3", "dl 4"]

    @staticmethod
    def lines(letters):
        """How shadowctl shows dead letters: a line each, then the last error indented."""
        out = []
        for d in letters:
            out.append(f"{d['failedAt']}  {d['event']['id']}  {d['event']['subject']}  attempts {d['attempts']}")
            out.append(f"  {d['lastError']}")
        return out

    def test_dead_letters_a_page_at_a_time_or_all(self):
        _, ids = self.make_dead_letters("watch", self.THINGS)
        letters = self.letters("watch")
        self.assertEqual({d["event"]["subject"] for d in letters}, {t + "#main" for t in self.THINGS})
        self.assertEqual({(d["attempts"], d["lastError"]) for d in letters}, {(1, "webhook: HTTP 400")})

        # Page by page, following the cursor shadowctl prints.
        before = self.requests_seen(LETTERS, "GET")
        shown, cursor, pages = [], None, 0
        while True:
            out = self.ok("registrations", "dead-letters", "watch", "--limit", "2", *(["--cursor", cursor] if cursor else []))
            lines = out.splitlines()
            pages += 1
            if lines and lines[-1].startswith("more: --cursor "):
                cursor = lines.pop()[len("more: --cursor "):]
                self.assertEqual(len(lines), 4, out)
            else:
                cursor = None
            shown += lines
            if not cursor:
                break
            self.assertLess(pages, 5, "cursors do not end")
        self.assertEqual(pages, 3)
        self.assertEqual(shown, self.lines(letters))
        self.assertEqual(self.requests_seen(LETTERS, "GET") - before, 3)

        # --all follows the cursors itself: one listing, no "more:".
        before = self.requests_seen(LETTERS, "GET")
        out = self.ok("registrations", "dead-letters", "watch", "--limit", "2", "--all")
        self.assertEqual(out.splitlines(), self.lines(letters))
        self.assertEqual(self.requests_seen(LETTERS, "GET") - before, 3)
        merged = json.loads(self.ok("--json", "registrations", "dead-letters", "watch", "--limit", "2", "--all"))
        self.assertEqual(merged, {"deadLetters": letters})
        self.assertEqual([d["event"]["id"] for d in merged["deadLetters"]], ids)
        # Without --limit the server's page holds them all.
        self.assertEqual(self.ok("registrations", "dead-letters", "watch").splitlines(), self.lines(letters))
        # --json of one page: the server's reply, cursor included.
        page = json.loads(self.ok("--json", "registrations", "dead-letters", "watch", "--limit", "3"))
        self.assertEqual(page["deadLetters"], letters[:3])
        self.assertEqual(self.server.get("/v1/registrations/watch/dead-letters?limit=3").json(), page)
        rest = self.ok("registrations", "dead-letters", "watch", "--cursor", page["cursor"])
        self.assertEqual(rest.splitlines(), self.lines(letters[3:]))

    def test_event_ids_are_percent_encoded_in_paths(self):
        # An event id holds '#': sent unencoded it would end the path (a fragment), and the server
        # would look for the id without it.
        _, ids = self.make_dead_letters("watch", self.THINGS[:2])
        self.assertIn("#", ids[1])
        self.assertEqual(self.ok("registrations", "delete-dead-letters", "watch", ids[1]), "deleted 1 dead letter(s)\n")
        self.assertEqual(self.letter_ids("watch"), ids[:1])
        self.assertEqual(self.requests_seen(ONE_LETTER, "DELETE"), 1)
        # The server names the id it received, '#' and all.
        self.assertEqual(self.fails("registrations", "delete-dead-letters", "watch", ids[1]),
                         f"shadowctl: not_found: no dead letter {ids[1]} of registration watch\n")
        self.assertEqual(self.letter_ids("watch"), ids[:1])

    def test_redrive_some_then_all(self):
        receiver, ids = self.make_dead_letters("watch", self.THINGS[:4])
        self.assertEqual(len(receiver.requests), 4)
        receiver.code = 200
        some = [ids[0], ids[2]]
        self.assertEqual(self.ok("registrations", "redrive", "watch", *some), "redriven 2 dead letter(s)\n")
        self.assertTrue(eventually(lambda: self.letter_ids("watch") == [ids[1], ids[3]]), self.letter_ids("watch"))
        self.assertTrue(eventually(lambda: len(receiver.requests) == 6))
        self.assertEqual(sorted(e["id"] for e in receiver.events()[4:]), sorted(some))
        # An id that is no dead letter is not counted.
        self.assertEqual(self.ok("registrations", "redrive", "watch", ids[0]), "redriven 0 dead letter(s)\n")

        self.assertEqual(self.ok("registrations", "redrive", "watch"), "redriven 2 dead letter(s)\n")
        self.assertTrue(eventually(lambda: self.letter_ids("watch") == []), self.letter_ids("watch"))
        self.assertTrue(eventually(lambda: len(receiver.requests) == 8))
        self.assertEqual(sorted(e["id"] for e in receiver.events()[6:]), [ids[1], ids[3]])
        # The counters follow the receiver's answers and the store's removal: read them once they have.
        counts = lambda: (lambda s: (s["delivered"], s["deadLetters"]))(json.loads(self.ok("registrations", "get", "watch"))["status"])
        self.assertTrue(eventually(lambda: counts() == (4, 0)), counts())
        self.assertEqual(json.loads(self.ok("--json", "registrations", "redrive", "watch")), {"redriven": 0})
        self.assertEqual(self.requests_seen(LETTERS + "/redrive", "POST"), 4)

    def test_delete_dead_letters_some_then_all(self):
        _, ids = self.make_dead_letters("watch", self.THINGS)
        out = self.ok("registrations", "delete-dead-letters", "watch", ids[1], ids[3])
        self.assertEqual(out, "deleted 2 dead letter(s)\n")
        self.assertEqual(self.letter_ids("watch"), [ids[0], ids[2], ids[4]])
        self.assertEqual(self.requests_seen(ONE_LETTER, "DELETE"), 2)  # one request per id
        # Neither ids nor --all, or both: refused before anything is sent.
        for args in ((), (ids[0], "--all")):
            with self.subTest(args=args):
                self.assertEqual(self.fails("registrations", "delete-dead-letters", "watch", *args),
                                 "shadowctl: delete-dead-letters: give either event ids or --all\n")
        self.assertEqual(self.letter_ids("watch"), [ids[0], ids[2], ids[4]])
        self.assertEqual(self.requests_seen(ONE_LETTER, "DELETE") + self.requests_seen(LETTERS, "DELETE"), 2)

        self.assertEqual(self.ok("registrations", "delete-dead-letters", "watch", "--all"), "deleted 3 dead letter(s)\n")
        self.assertEqual(self.letter_ids("watch"), [])
        self.assertEqual(self.requests_seen(LETTERS, "DELETE"), 1)
        self.assertEqual(json.loads(self.ok("registrations", "get", "watch"))["status"]["deadLetters"], 0)
        self.assertEqual(json.loads(self.ok("--json", "registrations", "delete-dead-letters", "watch", "--all")),
                         {"deleted": 0})


class DeadLettersInMemory(DeadLetters):
    """The same flows on the memory store."""

    server_args = ("--store", "memory")


class AdminOnly(CliTestCase):
    TOKENS = {"admin": "s3cret-admin", "app": "s3cret-app", "device": "s3cret-device"}

    def setUp(self):
        fd, self.token_file = tempfile.mkstemp(suffix=".tokens")
        self.addCleanup(os.unlink, self.token_file)
        with os.fdopen(fd, "w") as f:
            for role, token in self.TOKENS.items():
                f.write(f"{hashlib.sha256(token.encode()).hexdigest()} {role}\n")
        self.server_args = ("--tokens", self.token_file)
        super().setUp()

    def test_registrations_need_an_admin_token(self):
        admin = self.TOKENS["admin"]
        document = json.dumps(webhook("http://127.0.0.1:9/hook"))
        self.assertEqual(json.loads(self.ok("registrations", "put", "watch", stdin=document, token=admin))["id"], "watch")
        self.assertEqual(self.ok("registrations", "list", token=admin),
                         "watch  webhook http://127.0.0.1:9/hook  sections both  match .*\n")
        # The token may come from SHADOWCTL_TOKEN too.
        self.assertEqual(self.ok("registrations", "list", env={"SHADOWCTL_TOKEN": admin}),
                         "watch  webhook http://127.0.0.1:9/hook  sections both  match .*\n")
        forbidden = "shadowctl: forbidden: registrations need an admin token\n"
        commands = [("put", "watch", "-"), ("put", "other", "-"), ("list",), ("get", "watch"), ("delete", "watch"),
                    ("dead-letters", "watch"), ("dead-letters", "watch", "--all"), ("redrive", "watch"),
                    ("delete-dead-letters", "watch", "--all"), ("delete-dead-letters", "watch", "e#1")]
        for role in ("app", "device"):
            for command in commands:
                with self.subTest(role=role, command=command):
                    stderr = self.fails("registrations", *command, token=self.TOKENS[role],
                                        stdin=json.dumps(webhook("http://127.0.0.1:9/evil")))
                    self.assertEqual(stderr, forbidden)
        # The admin's put, then two refused per role: they did reach the server.
        self.assertEqual(self.requests_seen("/v1/registrations/{id}", "PUT", token=admin), 5)
        unauthorized = "shadowctl: unauthorized: a valid Authorization: Bearer token is required\n"
        self.assertEqual(self.fails("registrations", "list"), unauthorized)
        self.assertEqual(self.fails("registrations", "list", token="not-a-token"), unauthorized)
        # Nothing changed.
        self.assertEqual(self.stored("watch", token=admin)["target"]["url"], "http://127.0.0.1:9/hook")
        self.assertIsNone(self.stored("other", token=admin))


class HostileProxy(unittest.TestCase):
    """Not shadowd: a broken proxy in front of it answering 502 with an HTML page. No real shadowd
    answers so; shadowctl must say the reply is not JSON, with the status."""

    def setUp(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                page = b"<html>bad gateway</html>"
                self.send_response(502)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass

        self.proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.proxy.serve_forever, daemon=True).start()
        self.addCleanup(self.proxy.server_close)
        self.addCleanup(self.proxy.shutdown)

    def test_a_reply_that_is_not_json_exits_1_naming_the_status(self):
        url = f"http://127.0.0.1:{self.proxy.server_address[1]}"
        r = subprocess.run([SHADOWCTL, "--server", url, "registrations", "list"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertEqual(r.stderr, "shadowctl: HTTP 502 with a body that is not JSON: <html>bad gateway</html>\n")


if __name__ == "__main__":
    unittest.main()
