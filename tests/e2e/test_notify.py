"""Notifications end to end: registrations over REST, webhook delivery to real HTTP receivers
(well-behaved, failing, hanging, resetting, speaking garbage, redirecting), dead letters, and
delivery across kill -9 of shadowd."""
import hashlib
import hmac
import json
import os
import functools
import socket
import tempfile
import threading
import time
import unittest
from urllib.parse import quote
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from contract import CONTRACT
from harness import ApiTestCase, ContractViolation, Server, ServerTestCase, checked_session, eventually, kill_9_under_load, shadow_path


class Receiver:
    """A webhook receiver recording every POST; `answer(n)` gives the status of the n-th (from 1)."""

    def __init__(self, answer=lambda n: 204, port=0, delay=0.0):
        self.answer = answer
        self.delay = delay
        self.requests = []
        self.violations = []  # of docs/openapi.yaml, by the deliveries
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                problems = CONTRACT.check_delivery(self.headers, body)
                with outer.lock:
                    outer.requests.append((self.path, dict(self.headers), body))
                    outer.violations += problems
                    n = len(outer.requests)
                status = outer.answer(n)
                time.sleep(outer.delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self):
        with self.lock:
            if self.violations:
                raise ContractViolation("\n".join(self.violations))
            return [json.loads(body) for _, _, body in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        if self.violations:
            raise ContractViolation("\n".join(self.violations))


class RawReceiver:
    """A TCP listener that misbehaves: 'hang' never answers, 'reset' closes at once with RST,
    'garbage' answers with bytes that are not HTTP, 'redirect' answers 302."""

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.connections = 0
        self.held = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            if self.mode == "hang":
                self.held.append(conn)
                continue
            if self.mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()
                continue
            try:
                conn.recv(65536)
                if self.mode == "garbage":
                    conn.sendall(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
                else:
                    conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conn.close()

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def webhook(url, **extra):
    target = {"type": "webhook", "url": url}
    target.update(extra.pop("target", {}))
    return {"target": target, **extra}


def check_filtered_delivery(test, server, hot, every, timeout=10):
    """Registers `hot` with a filter and `every` without on `server`, writes, and checks that
    `hot` gets only the writes that leave the shadow passing the filter."""
    for rid, body in (("hot", webhook(hot.url, filter="gt(reported/temp,30)")), ("every", webhook(every.url))):
        r = server.request("PUT", f"/v1/registrations/{rid}", json=body)
        test.assertEqual(r.status_code, 200, r.text)
    test.assertEqual(server.get("/v1/registrations/hot").json()["filter"], "gt(reported/temp,30)")
    writes = [("boiler", "reported", {"temp": t}) for t in (20, 35, 25, 40)]
    # A write of desired alone: reported, which it leaves alone, is 40 and passes.
    writes += [("boiler", "desired", {"fan": True}), ("other", "reported", {"temp": 10})]
    for thing, section, state in writes:
        r = server.post(shadow_path(thing, "main", section), {"state": state})
        test.assertEqual(r.status_code, 200, r.text)
    test.assertTrue(eventually(lambda: len(every.events()) == 6, timeout=timeout), every.requests)
    status = lambda: server.get("/v1/registrations/hot").json()["status"]
    test.assertTrue(eventually(lambda: status()["delivered"] == 3 and status()["pending"] == 0, timeout=timeout), status())
    events = hot.events()
    test.assertEqual([e["data"]["reported"]["new"]["temp"] for e in events[:2]], [35, 40])
    test.assertEqual(events[2]["data"]["desired"]["new"], {"fan": True})
    test.assertNotIn("reported", events[2]["data"])


class RegistrationApiTest(ServerTestCase):
    def put(self, rid, body):
        return self.server.request("PUT", f"/v1/registrations/{rid}", json=body)

    def test_create_list_get_delete(self):
        r = self.put("crud", webhook("http://127.0.0.1:9/x", target={"secret": "s3"}, match="^a#.*"))
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        self.assertEqual(body["id"], "crud")
        self.assertEqual(body["target"]["secret"], "***")
        self.assertEqual(body["sections"], "both")
        self.assertEqual(body["include"], ["old", "new", "diff"])
        self.assertEqual(body["maxAttempts"], 10)
        listed = self.server.get("/v1/registrations").json()["registrations"]
        self.assertIn("crud", [x["id"] for x in listed])
        self.assertNotIn("s3", json.dumps(listed))
        one = self.server.get("/v1/registrations/crud").json()
        self.assertEqual(one["status"]["pending"], 0)
        self.assertEqual(one["status"]["delivered"], 0)
        self.assertEqual(one["status"]["deadLetters"], 0)
        self.assertEqual(self.server.delete("/v1/registrations/crud").status_code, 200)
        self.assertError(self.server.get("/v1/registrations/crud"), 404, "not_found")
        self.assertError(self.server.delete("/v1/registrations/crud"), 404, "not_found")

    def test_bad_registrations_are_refused_naming_the_field(self):
        cases = [
            ("bad id!", webhook("http://h/"), "id"),
            ("r1", webhook("http://h/", match="(unclosed"), "match"),
            ("r1", webhook("ftp://h/"), "target.url"),
            ("r1", webhook("http://h/", sections="neither"), "sections"),
            ("r1", webhook("http://h/", include=[]), "include"),
            ("r1", webhook("http://h/", maxAttempts=0), "maxAttempts"),
            ("r1", {"target": {"type": "sqs"}}, "target.queueUrl"),
            ("r1", {"target": {"type": "mqtt", "broker": "mqtt://h:1883", "qos": 2}}, "target.qos"),
            ("r1", {"target": {"type": "carrier-pigeon"}}, "target.type"),
        ]
        for rid, body, field in cases:
            with self.subTest(field=field, body=body):
                r = self.server.request("PUT", "/v1/registrations/" + rid.replace(" ", "%20"), json=body)
                err = self.assertError(r, 400, "invalid_request")
                self.assertEqual(err.get("field"), field, err)
        self.assertError(self.server.request("PUT", "/v1/registrations/r1", data="{not json"), 400, "invalid_json")
        err = self.assertError(self.put("r1", webhook("http://h/", filter="gt(reported/temp)")), 400, "invalid_filter")
        self.assertEqual(err["offset"], 16, err)
        self.assertTrue(err["expected"], err)
        self.assertError(self.put("r1", webhook("http://h/", filter=7)), 400, "invalid_request")
        self.assertError(self.server.get("/v1/registrations/r1"), 404, "not_found")
        self.assertError(self.server.request("PATCH", "/v1/registrations/r1"), 405, "method_not_allowed")
        self.assertError(self.server.get("/v1/registrations/r1/whatever"), 404, "not_found")
        self.assertError(self.server.get("/v1/registrations/nobody/dead-letters"), 404, "not_found")


class AdminOnlyTest(unittest.TestCase):
    def test_registrations_need_an_admin_token(self):
        tokens = {"admin-secret": "admin", "app-secret": "app", "device-secret": "device"}
        with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as f:
            for token, role in tokens.items():
                f.write(f"{hashlib.sha256(token.encode()).hexdigest()} {role}\n")
        try:
            with Server("--tokens", f.name) as server:
                body = webhook("http://127.0.0.1:9/")
                for token in ("app-secret", "device-secret"):
                    r = server.request("PUT", "/v1/registrations/r", token=token, json=body)
                    self.assertEqual(r.status_code, 403, r.text)
                    self.assertEqual(server.get("/v1/registrations", token=token).status_code, 403)
                self.assertEqual(server.get("/v1/registrations").status_code, 401)
                r = server.request("PUT", "/v1/registrations/r", token="admin-secret", json=body)
                self.assertEqual(r.status_code, 200, r.text)
        finally:
            os.unlink(f.name)


class DeliveryTest(ApiTestCase):
    def setUp(self):
        self.server = Server()
        self.receivers = []

    def tearDown(self):
        self.server.close()
        for r in self.receivers:
            r.close()

    def receiver(self, cls=Receiver, *args, **kw):
        r = cls(*args, **kw)
        self.receivers.append(r)
        return r

    def register(self, rid, body):
        r = self.server.request("PUT", f"/v1/registrations/{rid}", json=body)
        self.assertEqual(r.status_code, 200, r.text)

    def report(self, thing, state, name="main"):
        r = self.server.post(shadow_path(thing, name, "reported"), {"state": state})
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def test_signed_cloudevents_for_reports_desires_and_deletes(self):
        rec = self.receiver()
        self.register("w", webhook(rec.url, target={"secret": "top-secret", "headers": {"X-Team": "ops"}},
                                   include=["new", "diff"]))
        self.report("My House", {"temp": 20}, name="climate")
        self.server.post(shadow_path("My House", "climate", "desired"), {"state": {"temp": 22}})
        self.assertEqual(self.server.delete(shadow_path("My House", "climate")).status_code, 200)
        self.assertTrue(eventually(lambda: len(rec.requests) == 3), rec.requests)
        for path, headers, body in rec.requests:
            self.assertEqual(path, "/hook")
            self.assertEqual(headers["Content-Type"], "application/cloudevents+json")
            self.assertEqual(headers["X-Team"], "ops")
            t, v1 = dict(p.split("=", 1) for p in headers["X-Shadow-Signature"].split(",")).values()
            expected = hmac.new(b"top-secret", t.encode() + b"." + body, hashlib.sha256).hexdigest()
            self.assertTrue(hmac.compare_digest(v1, expected))
            self.assertLess(abs(int(t) - time.time()), 60)
        reported, desired, deleted = rec.events()
        self.assertEqual(reported["specversion"], "1.0")
        self.assertEqual(reported["source"], "deviceshadow")
        self.assertEqual(reported["subject"], "My House#climate")
        self.assertEqual(reported["type"], "deviceshadow.shadow.updated")
        self.assertEqual(reported["data"]["reported"]["new"], {"temp": 20})
        self.assertNotIn("old", reported["data"]["reported"])
        self.assertEqual(reported["data"]["reported"]["diff"][0]["path"], "/temp")
        self.assertEqual(desired["data"]["desired"]["version"], 1)
        self.assertEqual(deleted["type"], "deviceshadow.shadow.deleted")
        self.assertEqual(len({e["id"] for e in rec.events()}), 3)
        shown = self.server.get("/v1/registrations/w").json()["target"]
        self.assertEqual((shown["secret"], shown["headers"]), ("***", {"X-Team": "***"}))
        # The receiver records a request before shadowd has read the answer: wait for the count.
        delivered = lambda: self.server.get("/v1/registrations/w").json()["status"]["delivered"]
        self.assertTrue(eventually(lambda: delivered() == 3))
        metrics = self.server.get("/metrics").text
        self.assertIn('shadowd_notify_delivered_total{registration="w"} 3', metrics)
        self.assertIn('shadowd_notify_delivery_latency_seconds_count{registration="w"} 3', metrics)

    def test_a_filter_delivers_only_the_writes_that_leave_the_shadow_passing_it(self):
        check_filtered_delivery(self, self.server, self.receiver(), self.receiver())

    def test_a_receiver_down_then_up_gets_every_event_in_order(self):
        rec = self.receiver(answer=lambda n: 503 if n <= 6 else 200)
        self.register("w", webhook(rec.url, sections="reported"))
        for i in range(1, 6):
            self.report("t", {"n": i})
        self.assertTrue(eventually(lambda: len({e["id"] for e in rec.events()}) == 5 and len(rec.requests) >= 11))
        delivered = [e["data"]["reported"]["version"] for e in rec.events()[6:]]
        self.assertEqual(delivered, [1, 2, 3, 4, 5])
        status = self.server.get("/v1/registrations/w").json()["status"]
        self.assertEqual(status["failed"], 6)
        self.assertIn("503", status["lastError"])

    def test_a_refusing_receiver_dead_letters_and_redrive_delivers_later(self):
        status = {"code": 400}
        rec = self.receiver(answer=lambda n: status["code"])
        self.register("w", webhook(rec.url))
        self.report("t", {"n": 1})
        self.report("u", {"n": 1})
        letters_path = "/v1/registrations/w/dead-letters"
        self.assertTrue(eventually(lambda: len(self.server.get(letters_path).json()["deadLetters"]) == 2))
        page = self.server.get(letters_path + "?limit=1").json()
        self.assertEqual(len(page["deadLetters"]), 1)
        letter = page["deadLetters"][0]
        self.assertEqual(letter["attempts"], 1)
        self.assertIn("400", letter["lastError"])
        self.assertEqual(letter["event"]["type"], "deviceshadow.shadow.updated")
        self.assertRegex(letter["failedAt"], r"^\d{4}-\d\d-\d\dT")
        rest = self.server.get(letters_path + "?limit=1&cursor=" + page["cursor"]).json()
        self.assertNotIn("cursor", rest)
        self.assertNotEqual(rest["deadLetters"][0]["event"]["id"], letter["event"]["id"])
        # The count follows the store's write of the letters: read it once it has.
        self.assertTrue(eventually(lambda: self.server.get("/v1/registrations/w").json()["status"]["deadLetters"] == 2))
        log = "".join(self.server.log)
        self.assertIn("event dead-lettered", log)

        status["code"] = 200
        r = self.server.post(letters_path + "/redrive", {"ids": [letter["event"]["id"]]})
        self.assertEqual(r.status_code, 202, r.text)
        self.assertEqual(r.json(), {"redriven": 1})
        self.assertTrue(eventually(lambda: len(self.server.get(letters_path).json()["deadLetters"]) == 1))
        self.assertEqual(rec.events()[-1]["id"], letter["event"]["id"])
        # Event ids hold "#": percent-encoded in the path.
        r = self.server.delete(letters_path + "/" + quote(rest["deadLetters"][0]["event"]["id"], safe=""))
        self.assertEqual(r.json(), {"deleted": 1})
        self.assertError(self.server.delete(letters_path + "/no-such-event"), 404, "not_found")
        self.assertEqual(self.server.post(letters_path + "/redrive").json(), {"redriven": 0})
        self.assertEqual(self.server.post(letters_path + "/redrive", {"ids": []}).json(), {"redriven": 0})
        self.assertError(self.server.post(letters_path + "/redrive", {"ids": "all"}), 400, "invalid_request")

    def test_misbehaving_receivers_are_retried_or_dead_lettered_without_harm(self):
        # hang: the timeout fails each attempt; reset and garbage: connection-level failures;
        # redirect: not followed, a 3xx dead-letters at once.
        cases = {"hang": 2, "reset": 2, "garbage": 2, "redirect": 1}
        for mode in cases:
            rec = self.receiver(RawReceiver, mode)
            self.register(mode, webhook(rec.url, target={"timeoutMs": 300}, maxAttempts=2))
        self.report("t", {"n": 1})
        for mode, attempts in cases.items():
            with self.subTest(mode=mode):
                path = f"/v1/registrations/{mode}/dead-letters"
                self.assertTrue(eventually(lambda: self.server.get(path).json()["deadLetters"]), mode)
                letter = self.server.get(path).json()["deadLetters"][0]
                self.assertEqual(letter["attempts"], attempts, letter)
                self.assertTrue(letter["lastError"])
        self.assertTrue(self.server.alive())


class DeadLetterLimitsTest(ApiTestCase):
    """--max-dead-letters keeps a registration's newest dead letters; --dead-letter-retention
    makes them expire, and the periodic purge drops them."""

    def setUp(self):
        self.receiver = Receiver(answer=lambda n: 400)  # refuses every event: each is dead-lettered at once
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.close()
        self.receiver.close()

    def refused(self, *args, count, pad=""):
        """Starts shadowd with `args`, registers w and writes `count` reports of shadow t (with
        `pad` in each), each refused by the receiver, and waits until all are dead-lettered."""
        self.server = Server(*args)
        r = self.server.request("PUT", "/v1/registrations/w", json=webhook(self.receiver.url))
        self.assertEqual(r.status_code, 200, r.text)
        for i in range(1, count + 1):
            state = {"n": i, "pad": pad} if pad else {"n": i}
            self.assertEqual(self.server.post(shadow_path("t", "main", "reported"), {"state": state}).status_code, 200)
        self.assertTrue(eventually(lambda: self.metric("shadowd_notify_dead_lettered_total") == count))

    def metric(self, name):
        for line in self.server.get("/metrics").text.splitlines():
            if line.startswith(name + '{registration="w"} '):
                return int(line.split()[-1])
        return None

    def test_a_registration_keeps_its_newest_dead_letters_up_to_the_limit(self):
        self.refused("--max-dead-letters", "2", count=4)
        letters = self.server.get("/v1/registrations/w/dead-letters").json()["deadLetters"]
        self.assertEqual([d["event"]["data"]["reported"]["version"] for d in letters], [3, 4])
        self.assertEqual(self.metric("shadowd_notify_dead_letters_evicted_total"), 2)
        self.assertEqual(self.server.get("/v1/registrations/w").json()["status"]["deadLetters"], 2)
        self.assertTrue(eventually(lambda: "the oldest dead letters were removed" in "".join(self.server.log)))

    def test_a_page_of_dead_letters_ends_once_it_holds_max_page_bytes(self):
        self.refused("--max-page-bytes", "5000", count=5, pad="x" * 1000)  # events of about 2 KiB
        pages, cursor = [], None
        while True:
            r = self.server.get("/v1/registrations/w/dead-letters" + (f"?cursor={cursor}" if cursor else ""))
            page = r.json()
            pages.append(page["deadLetters"])
            self.assertLessEqual(len(r.content), 5000 + 100, "the budget, and the page's own brackets")
            cursor = page.get("cursor")
            if not cursor:
                break
        self.assertGreater(len(pages), 1)
        self.assertGreater(max(len(p) for p in pages), 1, "as many as fit")
        self.assertTrue(all(pages), "every page holds at least one letter")
        versions = [d["event"]["data"]["reported"]["version"] for p in pages for d in p]
        self.assertEqual(versions, [1, 2, 3, 4, 5])

    def test_expired_dead_letters_are_purged(self):
        self.refused("--dead-letter-retention", "1s", "--purge-interval", "1s", count=2)
        self.assertTrue(eventually(lambda: self.server.get("/v1/registrations/w/dead-letters").json()["deadLetters"] == []))
        self.assertTrue(eventually(lambda: "purged" in "".join(self.server.log)))


class RegistrationLimitsTest(ApiTestCase):
    """Registrations cost descriptors each, and no thread: --max-registrations bounds how many a
    PUT may create, and one whose target cannot start for want of descriptors is refused with
    503, stored nowhere."""

    def setUp(self):
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.close()

    def put(self, rid, **extra):
        return self.server.request("PUT", f"/v1/registrations/{rid}", json=webhook("http://127.0.0.1:9/hook", **extra))

    def ids(self):
        return [r["id"] for r in self.server.get("/v1/registrations").json()["registrations"]]

    def test_a_new_registration_past_the_limit_is_refused_naming_it(self):
        self.server = Server("--max-registrations", "2")
        self.assertEqual(self.put("a").status_code, 200)
        self.assertEqual(self.put("b", enabled=False).status_code, 200)
        error = self.assertError(self.put("c"), 400, "invalid_request")
        self.assertEqual(error["limit"], 2)
        self.assertIn("--max-registrations", error["message"])
        self.assertEqual(self.put("a", maxAttempts=3).status_code, 200, "replacing one creates none")
        self.assertEqual(self.ids(), ["a", "b"])
        self.assertEqual(self.server.delete("/v1/registrations/b").status_code, 200)
        self.assertEqual(self.put("c").status_code, 200)

    def test_registrations_cost_no_thread_each(self):
        self.server = Server("--max-registrations", "1000")
        tasks = f"/proc/{self.server.proc.pid}/task"
        self.assertEqual(self.put("first").status_code, 200)
        before = len(os.listdir(tasks))
        for i in range(200):
            self.assertEqual(self.put(f"r{i}").status_code, 200)
        for i in range(20):  # deliveries under way (refused: port 9), retried
            self.assertEqual(self.server.post(shadow_path(f"t{i}", "main", "reported"), json={"state": {"n": i}}).status_code, 200)
        time.sleep(0.5)
        self.assertLessEqual(len(os.listdir(tasks)), before + 2, "a thread per registration")

    def test_out_of_descriptors_a_registration_is_503_and_stored_nowhere(self):
        self.server = Server("--max-registrations", "1000", open_files=96)
        made, refused = [], None
        for i in range(200):
            r = self.put(f"r{i}")
            if r.status_code != 200:
                refused = r
                break
            made.append(f"r{i}")
        self.assertIsNotNone(refused, "the descriptors never ran out")
        error = self.assertError(refused, 503, "unavailable")
        self.assertEqual(error["message"], "cannot start the target: too many open files")
        self.assertEqual(self.ids(), sorted(made), "nothing stored of the refused one")
        self.assertTrue(self.server.alive())
        # Deleting one gives its descriptors back.
        self.assertEqual(self.server.delete(f"/v1/registrations/{made[0]}").status_code, 200)
        self.assertEqual(self.put("again").status_code, 200)


class CrashTest(unittest.TestCase):
    """kill -9 while writes and deliveries are under way: after a restart every acknowledged
    write's event arrives (duplicates allowed, same id), in version order per shadow."""

    def test_kill_9_loses_no_event(self):
        rec = Receiver(answer=lambda n: 204, delay=0.05)  # slower than the writers: a backlog builds
        server = Server()
        try:
            r = server.request("PUT", "/v1/registrations/w", json=webhook(rec.url, sections="reported"))
            self.assertEqual(r.status_code, 200, r.text)
            acknowledged = {}  # thing -> highest version acknowledged

            def writer(thing, stop):
                url = server.url + shadow_path(thing, "main", "reported")
                client = checked_session()
                while not stop.is_set():
                    try:
                        r = client.post(url, json={"state": {"n": time.time()}}, timeout=5)
                    except Exception:
                        return
                    if r.status_code == 200:
                        acknowledged[thing] = r.json()["reported"]["version"]

            kill_9_under_load(server, [functools.partial(writer, f"t{i}") for i in range(3)], 1.5)
            self.assertTrue(acknowledged)
            delivered_before = len({e["id"] for e in rec.events()})
            self.assertLess(delivered_before, sum(acknowledged.values()), "no backlog when shadowd was killed")
            server.start()

            def all_arrived():
                seen = {}
                for e in rec.events():
                    thing = e["data"]["thing"]
                    seen.setdefault(thing, set()).add(e["data"]["reported"]["version"])
                return all(set(range(1, v + 1)) <= seen.get(t, set()) for t, v in acknowledged.items())

            self.assertTrue(eventually(all_arrived, timeout=60), acknowledged)
            # Per shadow, first deliveries come in version order.
            for thing in acknowledged:
                first_seen = []
                for e in rec.events():
                    v = e["data"]["reported"]["version"]
                    if e["data"]["thing"] == thing and v not in first_seen:
                        first_seen.append(v)
                self.assertEqual(first_seen, sorted(first_seen), thing)
        finally:
            server.close()
            rec.close()


if __name__ == "__main__":
    unittest.main()
