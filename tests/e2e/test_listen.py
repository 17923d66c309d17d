"""shadowctl listen: a webhook receiver that checks signatures and prints each CloudEvent."""
import hashlib
import hmac
import json
import queue
import re
import signal
import subprocess
import threading
import time
import unittest

import requests

from harness import SHADOWCTL

# Events as shadowd builds them (notify::build_event): a report with a client token, a desire of
# two leaves, a report that acknowledges desired, and a delete.
REPORT = {"specversion": "1.0", "id": "01795435656876146329#R2", "source": "deviceshadow",
          "type": "deviceshadow.shadow.updated", "subject": "My House#main", "time": "2026-11-23T12:00:00.123Z",
          "datacontenttype": "application/json",
          "data": {"thing": "My House", "name": "main", "op": "report", "clientToken": "abc", "registration": "watch",
                   "reported": {"version": 7, "old": {"temp": 20}, "new": {"temp": 21},
                                "diff": [{"op": "update", "path": "/temp", "old": 20, "new": 21}]}}}
DESIRE = {"specversion": "1.0", "id": "01795435656876167479#D1", "source": "deviceshadow",
          "type": "deviceshadow.shadow.updated", "subject": "My House#main", "time": "2026-11-23T12:00:01Z",
          "datacontenttype": "application/json",
          "data": {"thing": "My House", "name": "main", "op": "desire", "registration": "watch",
                   "desired": {"version": 1, "diff": [{"op": "add", "path": "/sp", "new": 22},
                                                      {"op": "add", "path": "/mode", "new": "eco"}]}}}
ACKNOWLEDGING = {"specversion": "1.0", "id": "01795435656876179773#C3", "source": "deviceshadow",
                 "type": "deviceshadow.shadow.updated", "subject": "My House#main", "time": "2026-11-23T12:00:02Z",
                 "datacontenttype": "application/json",
                 "data": {"thing": "My House", "name": "main", "op": "report", "registration": "watch",
                          "reported": {"version": 8, "diff": [{"op": "add", "path": "/sp", "new": 22}]},
                          "desired": {"version": 2, "diff": [{"op": "remove", "path": "/sp", "old": 22}]},
                          "acknowledged": [{"path": "/sp", "value": 22}]}}
DELETE = {"specversion": "1.0", "id": "01795435656876187878#X4", "source": "deviceshadow",
          "type": "deviceshadow.shadow.deleted", "subject": "My House#main", "time": "2026-11-23T12:00:03Z",
          "datacontenttype": "application/json",
          "data": {"thing": "My House", "name": "main", "op": "delete", "registration": "watch",
                   "reported": {"version": 9, "diff": [{"op": "remove", "path": "/temp", "old": 21}]}}}
EVENTS = [REPORT, DESIRE, ACKNOWLEDGING, DELETE]


def compact(event):
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def sign(secret, body, t=None):
    t = str(int(time.time()) if t is None else t)
    return f"t={t},v1=" + hmac.new(secret.encode(), t.encode() + b"." + body, hashlib.sha256).hexdigest()


class Listener:
    """One `shadowctl listen --port 0` process; its stdout lines are collected as they come."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([SHADOWCTL, "listen", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.startup = self.proc.stderr.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", self.startup)
        if not m:
            self.proc.kill()
            raise RuntimeError("shadowctl listen did not start: " + self.startup + self.proc.stderr.read())
        self.url = f"http://127.0.0.1:{m.group(1)}"
        self.lines = queue.Queue()
        self.errors = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.errors.append), daemon=True).start()
        self.session = requests.Session()

    @staticmethod
    def _read(stream, sink):
        with stream:
            for line in stream:
                sink(line)

    def post(self, body, headers=None, path="/"):
        if isinstance(body, dict):
            body = compact(body)
        if isinstance(body, str):
            body = body.encode()
        headers = {"Content-Type": "application/cloudevents+json", **(headers or {})}
        return self.session.post(self.url + path, data=body, headers=headers, timeout=10)

    def post_signed(self, event, secret="s", t=None):
        body = compact(event).encode()
        return self.post(body, {"X-Shadow-Signature": sign(secret, body, t)})

    def line(self, timeout=10):
        return self.lines.get(timeout=timeout)

    def no_more_lines(self):
        """True when nothing more was printed (the receiver prints before it answers)."""
        return self.lines.empty()

    def wait_for_error(self, line, timeout=10):
        deadline = time.time() + timeout
        while line not in self.errors:
            if time.time() > deadline:
                return False
            time.sleep(0.02)
        return True

    def stop(self, sig=signal.SIGINT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.session.close()
        return self.proc.returncode


class ListenJson(unittest.TestCase):
    def setUp(self):
        self.listener = Listener("--secret", "s", "--json")

    def tearDown(self):
        self.listener.stop()

    def test_startup_line_names_the_port_and_signature_check(self):
        self.assertIn("signatures checked", self.listener.startup)

    def test_signed_events_are_printed_one_json_line_each_as_received(self):
        for i, event in enumerate(EVENTS):
            r = self.listener.post_signed(event)
            self.assertEqual(r.status_code, 204, r.text)
            self.assertEqual(self.listener.line(), compact(event) + "\n", i)
        self.assertTrue(self.listener.no_more_lines())

    def test_any_path_is_accepted(self):
        body = compact(REPORT).encode()
        r = self.listener.post(body, {"X-Shadow-Signature": sign("s", body)}, path="/hooks/shadow?x=1")
        self.assertEqual(r.status_code, 204, r.text)
        self.assertEqual(json.loads(self.listener.line()), REPORT)

    def test_a_wrong_signature_is_refused_and_not_printed(self):
        r = self.listener.post_signed(REPORT, secret="not-s")
        self.assertEqual(r.status_code, 401)
        self.assertIn("signature does not match", r.text)
        body = compact(REPORT).encode()
        tampered = body.replace(b"21", b"22")
        r = self.listener.post(tampered, {"X-Shadow-Signature": sign("s", body)})
        self.assertEqual(r.status_code, 401)
        self.assertTrue(self.listener.no_more_lines())
        # The receiver still works, and only the valid event is printed.
        self.assertEqual(self.listener.post_signed(DESIRE).status_code, 204)
        self.assertEqual(json.loads(self.listener.line()), DESIRE)
        self.assertTrue(self.listener.no_more_lines())

    def test_a_stale_or_future_timestamp_is_refused(self):
        now = int(time.time())
        for t in (now - 301 - 5, now + 301 + 5, 0):
            r = self.listener.post_signed(REPORT, t=t)
            self.assertEqual(r.status_code, 401, t)
            self.assertIn("from the receiver's clock", r.text)
        self.assertTrue(self.listener.no_more_lines())
        self.assertEqual(self.listener.post_signed(REPORT, t=now - 250).status_code, 204)
        self.assertEqual(json.loads(self.listener.line()), REPORT)

    def test_a_missing_or_malformed_signature_header_is_refused(self):
        r = self.listener.post(REPORT)
        self.assertEqual(r.status_code, 401)
        self.assertIn("missing X-Shadow-Signature", r.text)
        body = compact(REPORT).encode()
        good = sign("s", body)
        digest = good.split("v1=")[1]
        for header in ("", "v1=" + digest, "t=abc,v1=" + digest, f"t={int(time.time())}", "garbage"):
            r = self.listener.post(body, {"X-Shadow-Signature": header})
            self.assertEqual(r.status_code, 401, header)
        self.assertTrue(self.listener.no_more_lines())
        # Refusals are told on stderr, which stdout consumers never see.
        self.assertTrue(self.listener.wait_for_error("shadowctl: refused POST /: 401 missing X-Shadow-Signature header\n"))

    def test_any_of_several_v1_signatures_may_match_and_the_header_name_is_case_insensitive(self):
        body = compact(REPORT).encode()
        t = int(time.time())
        header = f"t={t}, v1={'0' * 64}, " + sign("s", body, t).split(",")[1]
        r = self.listener.post(body, {"x-shadow-signature": header})
        self.assertEqual(r.status_code, 204, r.text)
        self.assertEqual(json.loads(self.listener.line()), REPORT)

    def test_a_body_that_is_not_json_is_400(self):
        for body in (b"not json", b'{"a":', b"[1,2]"):
            r = self.listener.post(body, {"X-Shadow-Signature": sign("s", body)})
            self.assertEqual(r.status_code, 400, body)
        self.assertTrue(self.listener.no_more_lines())

    def test_an_event_sent_over_several_lines_is_printed_on_one(self):
        body = json.dumps(DESIRE, indent=2).encode()
        r = self.listener.post(body, {"X-Shadow-Signature": sign("s", body)})
        self.assertEqual(r.status_code, 204, r.text)
        line = self.listener.line()
        self.assertEqual(line.count("\n"), 1)
        self.assertEqual(json.loads(line), DESIRE)

    def test_only_post_is_accepted(self):
        r = self.listener.session.get(self.listener.url + "/", timeout=10)
        self.assertEqual(r.status_code, 405)
        self.assertEqual(r.headers.get("Allow"), "POST")


class ListenUnsigned(unittest.TestCase):
    def test_without_a_secret_unsigned_events_are_accepted(self):
        listener = Listener("--json")
        try:
            self.assertIn("unsigned events accepted", listener.startup)
            r = listener.post(REPORT)
            self.assertEqual(r.status_code, 204, r.text)
            self.assertEqual(listener.line(), compact(REPORT) + "\n")
            self.assertEqual(listener.post("no json").status_code, 400)
        finally:
            self.assertEqual(listener.stop(), 0)

    def test_sigterm_stops_it_with_status_0(self):
        listener = Listener()
        self.assertEqual(listener.stop(signal.SIGTERM), 0)

    def test_a_port_in_use_is_an_error(self):
        first = Listener()
        try:
            port = first.url.rsplit(":", 1)[1]
            r = subprocess.run([SHADOWCTL, "listen", "--port", port], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen on 127.0.0.1:" + port, r.stderr)
        finally:
            first.stop()


class ListenReadable(unittest.TestCase):
    def setUp(self):
        self.listener = Listener("--secret", "s")

    def tearDown(self):
        self.assertEqual(self.listener.stop(), 0)

    def lines_of(self, event, count):
        self.assertEqual(self.listener.post_signed(event).status_code, 204)
        return [self.listener.line() for _ in range(count)]

    def test_one_change_is_one_line(self):
        self.assertEqual(self.lines_of(REPORT, 1), [
            "2026-11-23T12:00:00.123Z updated My House#main reported v7: update /temp 20 -> 21 (clientToken abc)\n"])

    def test_several_changes_are_listed_under_the_write(self):
        self.assertEqual(self.lines_of(DESIRE, 3), [
            "2026-11-23T12:00:01Z updated My House#main desired v1\n",
            "  desired add /sp 22\n",
            '  desired add /mode "eco"\n'])

    def test_acknowledgements_are_marked_on_the_desired_removal(self):
        self.assertEqual(self.lines_of(ACKNOWLEDGING, 3), [
            "2026-11-23T12:00:02Z updated My House#main reported v8 desired v2\n",
            "  reported add /sp 22\n",
            "  desired remove /sp 22 (acknowledged)\n"])

    def test_a_delete(self):
        self.assertEqual(self.lines_of(DELETE, 1), ["2026-11-23T12:00:03Z deleted My House#main reported v9: remove /temp 21\n"])

    def test_without_a_diff_the_new_state_and_acknowledgements_are_shown(self):
        event = json.loads(compact(ACKNOWLEDGING))
        event["data"]["reported"] = {"version": 8, "new": {"sp": 22, "long": "x" * 100}}
        event["data"]["desired"] = {"version": 2}
        self.assertEqual(self.lines_of(event, 3), [
            "2026-11-23T12:00:02Z updated My House#main reported v8 desired v2\n",
            '  reported now {"sp":22,"long":"' + "x" * 40 + "...\n",
            "  acknowledged /sp 22\n"])

    def test_a_truncated_event_says_so(self):
        event = {"specversion": "1.0", "id": "1#R1", "type": "deviceshadow.shadow.updated", "time": "t",
                 "data": {"thing": "a", "name": "main", "reported": {"version": 1}, "truncated": True}}
        self.assertEqual(self.lines_of(event, 1), ["t updated a#main reported v1 [truncated: no old/new states]\n"])

    def test_control_characters_a_device_wrote_are_escaped(self):
        event = json.loads(compact(REPORT))
        event["data"]["clientToken"] = "a\x1b]0;pwned\x07\nforged line"
        event["data"]["reported"]["diff"][0]["path"] = "/t\x1b[2J"
        self.assertEqual(self.lines_of(event, 1), [
            "2026-11-23T12:00:00.123Z updated My House#main reported v7: update /t\\x1b[2J 20 -> 21 "
            "(clientToken a\\x1b]0;pwned\\x07\\x0aforged line)\n"])

    def test_another_cloudevent_is_shown_by_type_and_subject(self):
        event = {"specversion": "1.0", "id": "x", "type": "com.example.ping", "subject": "thermostat", "time": "t"}
        self.assertEqual(self.lines_of(event, 1), ["t com.example.ping thermostat\n"])


if __name__ == "__main__":
    unittest.main()
