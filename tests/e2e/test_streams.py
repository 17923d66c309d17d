"""Live change streams (docs/streams.md) with a real SSE client reading the raw stream: live events
with old/new, resume (Last-Event-ID, after) with replay then live and no gap under concurrent
writers and across a kill -9, gap, overflow for a slow reader, --max-streams, token patterns,
heartbeats, shutdown; shadowctl watch."""
import hashlib
import http.client
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from urllib.parse import quote

from contract import CONTRACT
from harness import SHADOWCTL, ApiTestCase, Server, eventually, shadow_path


class SSE:
    """One stream, read as a browser's EventSource would: messages of `id`, `event`, `data`
    fields and comments, split at blank lines. Its headers are checked against
    docs/openapi.yaml."""

    def __init__(self, server, path, headers=None, token=None):
        self.path = path
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        self.conn.request("GET", path, headers=headers)
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = dict(self.response.getheaders())
        body = b"" if self.status == 200 else self.response.read()
        if self.status != 200:
            self.close()
        problems = CONTRACT.check("GET", path, self.status, self.headers, body)
        if problems:
            raise AssertionError("\n".join(problems))
        self.body = body

    def next(self):
        """The next message ({"id", "event", "data"} or {"comment"}), or None at the end."""
        fields = {}
        while True:
            line = self.response.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line == "":
                if fields:
                    return fields
                continue
            if line.startswith(":"):
                return {"comment": line[1:].strip()}
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value

    def events(self, count, within=120):
        """The next `count` change or deleted messages (comments skipped), data parsed; fails
        when they have not come `within` seconds (a bound on liveness, checked as heartbeats and
        messages arrive), rather than waiting on a stream kept open by heartbeats."""
        out = []
        deadline = time.monotonic() + within
        while len(out) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(out)} of {count} events came within {within} s")
            m = self.next()
            if m is None:
                raise AssertionError(f"the stream ended after {len(out)} of {count} events")
            if "data" in m and m.get("event") in ("change", "deleted"):
                m["data"] = json.loads(m["data"])
                out.append(m)
        return out

    def close(self):
        self.response.close()
        self.conn.close()


def report(server, thing, state, name="main", token=None):
    r = server.post(shadow_path(thing, name, "reported"), {"state": state}, token=token)
    assert r.status_code == 200, r.text
    return r.json()


def history_ids(server, thing, name="main"):
    ids, cursor = [], None
    while True:
        q = "?order=asc&limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = server.get(shadow_path(thing, name, "history") + q).json()
        ids += [e["id"] for e in page["events"]]
        cursor = page.get("cursor")
        if not cursor:
            return ids


def metric(server, name):
    text = server.get("/metrics").text
    m = re.search(rf"^{name} (\d+)$", text, re.M)
    return int(m.group(1)) if m else None


class Streams(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--stream-heartbeat", "1s")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_live_events_carry_the_cloud_event_in_version_order(self):
        s = SSE(self.server, shadow_path("live-1", "main", "events"))
        self.assertEqual(s.status, 200)
        self.assertEqual(s.headers["Content-Type"], "text/event-stream")
        for i in range(5):
            report(self.server, "live-1", {"n": i})
        self.server.delete(shadow_path("live-1"))
        events = s.events(6)
        s.close()
        for i, m in enumerate(events[:5]):
            data = m["data"]
            self.assertEqual(m["event"], "change")
            self.assertEqual(m["id"], data["id"])
            self.assertEqual(data["type"], "deviceshadow.shadow.updated")
            self.assertEqual(data["subject"], "live-1#main")
            self.assertNotIn("registration", data["data"])
            self.assertEqual(data["data"]["reported"]["version"], i + 1)
            self.assertEqual(data["data"]["reported"]["new"], {"n": i})
            self.assertEqual(data["data"]["reported"]["old"], {} if i == 0 else {"n": i - 1})
        self.assertEqual(events[5]["event"], "deleted")
        self.assertEqual(events[5]["data"]["type"], "deviceshadow.shadow.deleted")

    def test_selection_as_registrations_select(self):
        s = SSE(self.server, "/v1/events?match=" + quote("^sel-.*#main$") + "&sections=desired&paths=/sp&include=new")
        report(self.server, "sel-1", {"sp": 1})  # reported: not selected
        self.server.post(shadow_path("other-1", "main", "desired"), {"state": {"sp": 2}})  # not matched
        self.server.post(shadow_path("sel-1", "main", "desired"), {"state": {"other": 3}})  # not at /sp
        self.server.post(shadow_path("sel-1", "main", "desired"), {"state": {"sp": 4}})
        [m] = s.events(1)
        s.close()
        desired = m["data"]["data"]["desired"]
        self.assertEqual(desired["new"], {"other": 3, "sp": 4})
        self.assertNotIn("old", desired)
        self.assertNotIn("diff", desired)
        self.assertNotIn("reported", m["data"]["data"])

    def test_a_filter_passes_only_writes_after_which_the_shadow_passes(self):
        s = SSE(self.server, "/v1/events?match=" + quote("^flt-.*") + "&filter=" + quote("gt(reported/v,10)"))
        one = SSE(self.server, shadow_path("flt-1", "main", "events") + "?filter=" + quote("gt(reported/v,10)"))
        self.assertEqual((s.status, one.status), (200, 200))
        report(self.server, "flt-1", {"v": 5})
        report(self.server, "flt-1", {"v": 11})
        report(self.server, "flt-1", {"w": 1})  # v is still 11 after it
        report(self.server, "flt-1", {"v": 3})
        report(self.server, "flt-2", {"v": 1})
        report(self.server, "flt-1", {"v": 12})
        for stream in (s, one):
            got = [m["data"]["data"]["reported"]["version"] for m in stream.events(3)]
            stream.close()
            self.assertEqual(got, [2, 3, 5])

    def test_resume_with_last_event_id_replays_then_goes_live(self):
        s = SSE(self.server, shadow_path("resume-1", "main", "events"))
        for i in range(3):
            report(self.server, "resume-1", {"n": i})
        seen = s.events(3)
        s.close()
        for i in range(3, 6):  # while no one listens
            report(self.server, "resume-1", {"n": i})
        s = SSE(self.server, shadow_path("resume-1", "main", "events"), headers={"Last-Event-ID": seen[-1]["id"]})
        replayed = s.events(3)
        self.assertEqual([m["data"]["data"]["reported"]["version"] for m in replayed], [4, 5, 6])
        for m in replayed:  # from history: the changes, not whole states
            self.assertTrue(m["data"]["data"]["truncated"])
            self.assertNotIn("old", m["data"]["data"]["reported"])
            self.assertEqual(m["data"]["data"]["reported"]["diff"][0]["path"], "/n")
        report(self.server, "resume-1", {"n": 6})
        [live] = s.events(1)
        s.close()
        self.assertEqual(live["data"]["data"]["reported"]["version"], 7)
        self.assertEqual(live["data"]["data"]["reported"]["new"], {"n": 6})
        self.assertEqual(metric(self.server, "shadowd_stream_replays_total") >= 1, True)

    def test_resume_after_a_time(self):
        report(self.server, "time-1", {"n": 0})
        time.sleep(0.01)
        now = time.time_ns()
        point = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now // 10**9)) + ".%09dZ" % (now % 10**9)
        time.sleep(0.01)
        report(self.server, "time-1", {"n": 1})
        s = SSE(self.server, shadow_path("time-1", "main", "events") + "?after=" + quote(point))
        [m] = s.events(1)
        s.close()
        self.assertEqual(m["data"]["data"]["reported"]["version"], 2)

    def test_a_point_older_than_history_gives_a_gap_then_everything_kept(self):
        report(self.server, "gap-1", {"n": 0})
        report(self.server, "gap-1", {"n": 1})
        ids = history_ids(self.server, "gap-1")
        s = SSE(self.server, shadow_path("gap-1", "main", "events") + "?after=2000-01-01T00:00:00Z")
        first = s.next()
        self.assertEqual(first["event"], "gap")
        self.assertEqual(json.loads(first["data"]), {"oldest": ids[0]})
        self.assertEqual([m["id"] for m in s.events(2)], ids)
        s.close()

    def test_a_point_past_the_servers_clock_or_empty_parameters_go_live(self):
        one = shadow_path("future-1", "main", "events")
        for n, (path, headers) in enumerate([(one + "?after=2100-01-01T00:00:00Z", None),
                                             (one, {"Last-Event-ID": "02795926001918876016#R4"}),
                                             ("/v1/events?match=future-1%23main&after=2100-01-01T00:00:00Z", None),
                                             ("/v1/events?match=&sections=&paths=&include=&filter=&after=", None)]):
            s = SSE(self.server, path, headers=headers)
            report(self.server, "future-1", {"n": n})
            [m] = s.events(1)
            s.close()
            self.assertEqual(m["data"]["data"]["reported"]["new"], {"n": n}, path)

    def test_heartbeats_keep_an_idle_stream_open(self):
        s = SSE(self.server, shadow_path("quiet-1", "main", "events"))
        self.assertEqual(s.next(), {"comment": "keep-alive"})
        self.assertEqual(s.next(), {"comment": "keep-alive"})
        s.close()

    def test_bad_requests_are_refused_before_the_stream_starts(self):
        for query, field in [("?nope=1", "nope"), ("?after=yesterday", "after"),
                             ("?match=(", "match"), ("?sections=all", "sections"), ("?include=everything", "include"),
                             ("?paths=nope", "paths")]:
            r = self.server.get("/v1/events" + query)
            self.assertEqual(self.assertError(r, 400, "invalid_request")["field"], field, query)
        for path in ("/v1/events", shadow_path("t", "main", "events")):
            r = self.server.get(path + "?filter=" + quote("gt(reported/v,10"))
            error = self.assertError(r, 400, "invalid_filter")
            self.assertEqual(error["offset"], 16, path)
            self.assertTrue(error["expected"], path)
        r = self.server.get(shadow_path("t", "main", "events") + "?match=.*")
        self.assertEqual(self.assertError(r, 400, "invalid_request")["field"], "match")
        s = SSE(self.server, "/v1/events", headers={"Last-Event-ID": "12#R1"})
        self.assertEqual(s.status, 400)
        self.assertEqual(json.loads(s.body)["error"]["field"], "Last-Event-ID")


class ReplayUnderConcurrentWriters(ApiTestCase):
    """Writers keep writing while a client resumes: it gets every event at least once, each
    shadow's in version order, across the replay-to-live switch."""

    def run_writers(self, server, things, count):
        def write(thing):
            for i in range(count):
                report(server, thing, {"n": i})
        threads = [threading.Thread(target=write, args=(t,)) for t in things]
        for t in threads:
            t.start()
        return threads

    def check_complete(self, server, things, received):
        by_shadow = {}
        for m in received:
            by_shadow.setdefault(m["data"]["subject"], []).append(m["id"])
        for thing in things:
            got = by_shadow.get(thing + "#main", [])
            expected = history_ids(server, thing)
            self.assertEqual(sorted(set(got)), expected, thing)  # every one, none invented
            firsts = []
            for i in got:
                if i not in firsts:
                    firsts.append(i)
            self.assertEqual(firsts, expected, thing)  # in version order

    def test_every_shadow_resumed_by_time(self):
        with Server("--store", "memory") as server:
            things = [f"w-{i}" for i in range(4)]
            start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))
            threads = self.run_writers(server, things, 150)
            time.sleep(0.2)  # the writers are under way: part replayed, part live
            s = SSE(server, "/v1/events?after=" + start)
            for t in threads:
                t.join()
            total = sum(len(history_ids(server, t)) for t in things)
            received, ids = [], set()
            while len(ids) < total:
                [m] = s.events(1)
                received.append(m)
                ids.add((m["data"]["subject"], m["id"]))
            s.close()
            self.check_complete(server, things, received)

    def test_one_shadow_resumed_by_id_on_sqlite(self):
        with Server() as server:
            report(server, "one-1", {"n": -1})
            first = history_ids(server, "one-1")[0]
            threads = self.run_writers(server, ["one-1"], 200)
            time.sleep(0.2)
            s = SSE(server, shadow_path("one-1", "main", "events"), headers={"Last-Event-ID": first})
            for t in threads:
                t.join()
            expected = history_ids(server, "one-1")[1:]
            received, ids = [], set()
            while len(ids) < len(expected):
                [m] = s.events(1)
                received.append(m)
                ids.add(m["id"])
            s.close()
            self.assertEqual(sorted(ids), expected)
            self.assertEqual(list(dict.fromkeys(m["id"] for m in received)), expected)


class KillNine(ApiTestCase):
    def test_a_client_that_resumes_after_kill_9_misses_nothing(self):
        data = tempfile.mkdtemp(prefix="shadowd-e2e-")
        self.addCleanup(shutil.rmtree, data, True)
        server = Server(data_dir=data)
        s = SSE(server, shadow_path("k9-1", "main", "events"))
        stop, written = threading.Event(), []

        def write():
            n = 0
            while not stop.is_set():
                try:
                    report(server, "k9-1", {"n": n})
                    written.append(n)
                except Exception:  # the server is gone: the write may or may not have landed
                    return
                n += 1
        writer = threading.Thread(target=write)
        writer.start()
        received = []
        while len(received) < 20:
            received += [m["id"] for m in s.events(1)]
        server.stop(signal.SIGKILL)
        stop.set()
        writer.join()
        try:
            while (m := s.next()) is not None:  # what was sent before the kill
                if m.get("event") == "change":
                    received.append(m["id"])
        except (http.client.HTTPException, OSError):  # cut in the middle of a chunk
            pass
        s.close()
        server = Server(data_dir=data, port=server.port)
        try:
            expected = history_ids(server, "k9-1")
            self.assertGreaterEqual(len(expected), len(written))  # every acknowledged write was kept
            s = SSE(server, shadow_path("k9-1", "main", "events"), headers={"Last-Event-ID": received[-1]})
            missing = expected[expected.index(received[-1]) + 1:]
            received += [m["id"] for m in s.events(len(missing))]
            s.close()
            self.assertEqual(sorted(set(received)), expected)
        finally:
            server.close()


class Limits(ApiTestCase):
    def test_max_streams_answers_503_with_retry_after(self):
        with Server("--store", "memory", "--max-streams", "2") as server:
            a = SSE(server, "/v1/events")
            b = SSE(server, shadow_path("t", "main", "events"))
            c = SSE(server, "/v1/events")
            self.assertEqual(c.status, 503)
            self.assertEqual(c.headers["Retry-After"], "1")
            self.assertEqual(json.loads(c.body)["error"]["code"], "unavailable")
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 2))
            a.close()
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 1))
            d = SSE(server, "/v1/events")
            self.assertEqual(d.status, 200)
            b.close()
            d.close()
            self.assertGreaterEqual(metric(server, "shadowd_streams_refused_total"), 1)

    def test_a_slow_reader_is_sent_overflow_and_closed(self):
        with Server("--store", "memory", "--stream-buffer", "65536", "--read-timeout-ms", "30000") as server:
            s = SSE(server, "/v1/events")  # and it reads nothing for now: the kernel's buffers fill, then the stream's
            # Every write changes 30 values of ~1 KB: events of ~90 KiB, sent without old and new
            # (past half the buffer) but with their ~30 KiB diff.
            i = 0
            while metric(server, "shadowd_stream_overflows_total") == 0 and i < 2000:
                report(server, "big-1", {f"k{k}": f"{i}-" + "x" * 990 for k in range(30)})
                i += 1
            self.assertEqual(metric(server, "shadowd_stream_overflows_total"), 1)
            last = None
            while (m := s.next()) is not None:
                last = m
            s.close()
            self.assertEqual(last, {"event": "overflow", "data": "{}"})
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 0))

    def test_an_event_past_half_the_buffer_comes_without_old_and_new(self):
        with Server("--store", "memory", "--stream-buffer", "65536") as server:
            s = SSE(server, "/v1/events")
            report(server, "big-2", {"v": "x" * 40000})
            [m] = s.events(1)
            s.close()
            data = m["data"]["data"]
            self.assertTrue(data["truncated"])
            self.assertNotIn("new", data["reported"])
            self.assertEqual(data["reported"]["diff"][0]["path"], "/v")

    def test_shutdown_ends_streams_cleanly(self):
        server = Server("--store", "memory")
        try:
            s = SSE(server, "/v1/events")
            report(server, "bye-1", {"n": 1})
            self.assertEqual(len(s.events(1)), 1)
            server.proc.send_signal(signal.SIGTERM)
            self.assertIsNone(s.next())  # the chunked body ends properly: no error
            self.assertEqual(server.proc.wait(timeout=20), 0)
            s.close()
        finally:
            server.close()

    def test_without_history_every_resume_is_a_gap(self):
        with Server("--store", "memory", "--history", "false") as server:
            report(server, "nohist-1", {"n": 1})
            s = SSE(server, shadow_path("nohist-1", "main", "events") + "?after=" + quote("00000000000000000001#R1"))
            m = s.next()
            self.assertEqual((m["event"], json.loads(m["data"])), ("gap", {"oldest": None}))
            report(server, "nohist-1", {"n": 2})
            [live] = s.events(1)
            self.assertEqual(live["data"]["data"]["reported"]["new"], {"n": 2})
            s.close()


class TokenPatterns(ApiTestCase):
    store = ("--store", "memory")  # test_streams_dynamodb.py runs it on DynamoDB Local

    def test_a_stream_shows_only_the_things_a_token_covers(self):
        fd, tokens = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(hashlib.sha256(b"admin-t").hexdigest() + " admin\n")
            f.write(hashlib.sha256(b"house-t").hexdigest() + " device house-*\n")
        try:
            with Server(*self.store, "--tokens", tokens) as server:
                self.assertEqual(SSE(server, "/v1/events").status, 401)
                forbidden = SSE(server, shadow_path("garage-1", "main", "events"), token="house-t")
                self.assertEqual(forbidden.status, 403)
                s = SSE(server, "/v1/events", token="house-t")
                report(server, "garage-1", {"n": 1}, token="admin-t")
                report(server, "house-1", {"n": 2}, token="admin-t")
                [m] = s.events(1)
                self.assertEqual(m["data"]["subject"], "house-1#main")
                s.close()
        finally:
            os.unlink(tokens)


class Watch(ApiTestCase):
    """shadowctl watch: prints each change once, and reconnects with the last id."""

    def start(self, server, *args):
        proc = subprocess.Popen([SHADOWCTL, "--server", server.url, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True).start()
        self.addCleanup(proc.wait, 10)
        self.addCleanup(proc.terminate)
        return lines

    def test_watch_resumes_across_a_server_restart(self):
        data = tempfile.mkdtemp(prefix="shadowd-e2e-")
        self.addCleanup(shutil.rmtree, data, True)
        server = Server(data_dir=data)
        try:
            lines = self.start(server, "--json", "watch", "w-1")
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 1))
            report(server, "w-1", {"n": 1})
            self.assertEqual(json.loads(lines.get(timeout=30))["data"]["reported"]["version"], 1)
        finally:
            server.stop()
        server = Server(data_dir=data, port=server.port)  # where the watcher looks for it
        try:
            report(server, "w-1", {"n": 2})  # while the watcher is away, or as it comes back
            report(server, "w-1", {"n": 3})
            got = [json.loads(lines.get(timeout=30))["data"]["reported"]["version"] for _ in range(2)]
            self.assertEqual(got, [2, 3])
            report(server, "w-1", {"n": 4})
            self.assertEqual(json.loads(lines.get(timeout=30))["data"]["reported"]["version"], 4)
            self.assertTrue(lines.empty())
        finally:
            server.close()

    def test_watch_with_a_filter(self):
        with Server("--store", "memory") as server:
            lines = self.start(server, "--json", "watch", "--filter", "gt(reported/v,10)")
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 1))
            report(server, "wf-1", {"v": 5})
            report(server, "wf-1", {"v": 11})
            self.assertEqual(json.loads(lines.get(timeout=30))["data"]["reported"]["version"], 2)

    def test_watch_prints_readable_lines_for_every_shadow(self):
        with Server("--store", "memory") as server:
            lines = self.start(server, "watch", "--match", "^r-.*")
            self.assertTrue(eventually(lambda: metric(server, "shadowd_streams_open") == 1))
            report(server, "x-1", {"n": 1})
            report(server, "r-1", {"n": 1})
            self.assertRegex(lines.get(timeout=30), r" updated r-1#main reported v1: add /n 1\n$")


if __name__ == "__main__":
    unittest.main()
