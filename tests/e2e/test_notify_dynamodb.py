"""The change feed of DynamoDB Local's stream: shadowd reads its table's stream (leases in the
table) and delivers through the same registrations and webhook target as on SQLite, and with
`--history stream` writes the history from it; two shadowd share the stream, kill -9 of the
one reading it loses no acknowledged write's event or history event, and neither does an orderly
restart with events still waiting."""
import functools
import subprocess
import threading
import time
import unittest
import uuid

import requests

from harness import SHADOWD, ApiTestCase, Server, checked_session, eventually, kill_9_under_load, shadow_path
from test_dynamodb import ENDPOINT, ddb, dynamo_server, new_table
from test_notify import RawReceiver, Receiver, check_filtered_delivery, webhook

LEASE_TIMEOUT = "2s"  # shadowd's default is 10s; the failover test waits for it


def stream_table():
    """A table made by `shadowd dynamodb create-table`: the stream on (NEW_AND_OLD_IMAGES)."""
    table = "notify-" + uuid.uuid4().hex[:12]
    subprocess.run([SHADOWD, "dynamodb", "create-table", "--table", table, "--dynamodb-endpoint", ENDPOINT],
                   check=True, capture_output=True, timeout=60)
    return table


def stream_shards(server):
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("shadowd_stream_shards "):
            return int(line.split()[1])
    return None


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class StreamDeliveryTest(ApiTestCase):
    def setUp(self):
        self.table = stream_table()
        self.servers = []
        self.receiver = Receiver()

    def tearDown(self):
        for s in self.servers:
            s.close()
        self.receiver.close()
        ddb().delete_table(TableName=self.table)

    def server(self, *args):
        s = dynamo_server(self.table, "--stream-lease-timeout", LEASE_TIMEOUT, *args)
        self.servers.append(s)
        return s

    def register(self, server, rid, body):
        r = server.request("PUT", f"/v1/registrations/{rid}", json=body)
        self.assertEqual(r.status_code, 200, r.text)

    def reader_of(self, a, b):
        """(the shadowd reading the stream's shard, the other) once one holds it."""
        self.assertTrue(eventually(lambda: (stream_shards(a) or 0) + (stream_shards(b) or 0) >= 1, timeout=30))
        return (a, b) if stream_shards(a) else (b, a)

    def kill_reader_under_load(self, reader, other, prefix, also=()):
        """Writers report to four shadows through both shadowd; the reader is killed with -9 after
        2 s. Returns each shadow's highest version acknowledged."""
        acknowledged = {}
        lock = threading.Lock()

        def writer(thing, server, stop):
            client = checked_session()
            while not stop.is_set():
                try:
                    r = client.post(server.url + shadow_path(thing, "main", "reported"), json={"state": {"n": time.time()}},
                                    timeout=10)
                except Exception:
                    return  # the killed server
                if r.status_code == 200:
                    with lock:
                        acknowledged[thing] = max(acknowledged.get(thing, 0), r.json()["reported"]["version"])

        writers = [functools.partial(writer, f"{prefix}{i}", s) for i, s in enumerate([reader, other] * 2)]
        kill_9_under_load(reader, writers + list(also), 2.0)
        self.assertTrue(acknowledged)
        return acknowledged

    def test_every_kind_of_write_is_one_event_as_on_sqlite(self):
        def writes(server, receiver):
            """Registers, writes a report, a desire, both sections at once (an AWS IoT update: two
            items in the separate layout, one event) and a delete; returns the events."""
            self.register(server, "w", webhook(receiver.url, target={"secret": "s"}))
            self.assertEqual(server.post(shadow_path("lamp", "main", "reported"), {"state": {"on": True}}).status_code, 200)
            self.assertEqual(server.post(shadow_path("lamp", "main", "desired"), {"state": {"on": False}}).status_code, 200)
            r = requests.post(server.url + "/things/lamp/shadow?name=main",
                              json={"state": {"reported": {"n": 1}, "desired": {"m": 2}}}, timeout=30)
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(server.delete(shadow_path("lamp", "main")).status_code, 200)
            self.assertTrue(eventually(lambda: len(receiver.events()) == 4, timeout=30), receiver.events())
            return receiver.events()

        def timeless(event):
            """Without what differs between two runs (ids, times) and with a diff's changes in path
            order: DynamoDB keeps an object's members in an order of its own, so a delete lists
            the removed members in that order."""
            if isinstance(event, dict):
                return {k: sorted(map(timeless, v), key=lambda c: c["path"]) if k == "diff" else timeless(v)
                        for k, v in event.items() if k not in ("id", "time", "timestamp")}
            return [timeless(v) for v in event] if isinstance(event, list) else event

        server = self.server()
        events = writes(server, self.receiver)
        sqlite_receiver = Receiver()
        try:
            with Server() as sqlite:
                expected = writes(sqlite, sqlite_receiver)
        finally:
            sqlite_receiver.close()
        self.maxDiff = None
        self.assertEqual([timeless(e) for e in events], [timeless(e) for e in expected])
        both = events[2]["data"]
        self.assertEqual((both["reported"]["new"], both["desired"]["new"]), ({"on": True, "n": 1}, {"on": False, "m": 2}))
        self.assertEqual(len({e["id"] for e in events}), 4)
        self.assertTrue(eventually(lambda: server.get("/v1/registrations/w").json()["status"]["delivered"] == 4))
        self.assertEqual(stream_shards(server), 1)

    def test_a_filter_delivers_only_the_writes_that_leave_the_shadow_passing_it(self):
        """In both layouts (in the separate one a write of one section is one item's record)."""
        for layout in ("separate", "combined"):
            with self.subTest(layout=layout):
                table = self.table if layout == "separate" else stream_table()
                hot, every = Receiver(), Receiver()
                try:
                    with dynamo_server(table, "--stream-lease-timeout", LEASE_TIMEOUT, "--layout", layout) as server:
                        check_filtered_delivery(self, server, hot, every, timeout=30)
                finally:
                    hot.close()
                    every.close()
                    if table != self.table:
                        ddb().delete_table(TableName=table)

    def test_kill_9_of_the_reader_loses_no_acknowledged_write(self):
        self.receiver.delay = 0.05  # slower than the writers: a backlog builds
        a, b = self.server(), self.server()
        self.register(a, "w", webhook(self.receiver.url, sections="reported"))
        # b learns of the registration within its refresh (5 s): until then its writes carry no
        # change event. Only then does the test write through it.
        self.assertTrue(eventually(lambda: b.get("/v1/registrations/w").status_code == 200))
        reader, other = self.reader_of(a, b)
        acknowledged = self.kill_reader_under_load(reader, other, "t")
        delivered_before = len({e["id"] for e in self.receiver.events()})
        self.assertLess(delivered_before, sum(acknowledged.values()), "no backlog when the reader was killed")
        # The survivor takes the shard over once the dead one's lease expires, from its checkpoint.
        self.assertTrue(eventually(lambda: stream_shards(other) == 1, timeout=30))

        def all_arrived():
            seen = {}
            for e in self.receiver.events():
                seen.setdefault(e["data"]["thing"], set()).add(e["data"]["reported"]["version"])
            return all(set(range(1, v + 1)) <= seen.get(t, set()) for t, v in acknowledged.items())

        self.assertTrue(eventually(all_arrived, timeout=60), acknowledged)
        for thing in acknowledged:  # first deliveries in version order per shadow
            first = []
            for e in self.receiver.events():
                v = e["data"]["reported"]["version"]
                if e["data"]["thing"] == thing and v not in first:
                    first.append(v)
            self.assertEqual(first, sorted(first), thing)

    def test_an_orderly_restart_loses_no_event_still_waiting(self):
        """SIGTERM frees the leases at once, so the restarted shadowd reads the shard again before
        its registrations are up: they start at the first entry read again, not after it."""
        refusing = [True]
        receiver = Receiver(answer=lambda n: 503 if refusing[0] else 204)
        try:
            server = self.server()
            self.register(server, "w", webhook(receiver.url, sections="reported", maxAttempts=1000))
            for n in range(10):
                r = server.post(shadow_path("waiting", "main", "reported"), {"state": {"n": n}})
                self.assertEqual(r.status_code, 200, r.text)
            # the first event is refused and retried; the other nine wait behind it
            self.assertTrue(eventually(lambda: receiver.events(), timeout=30))
            self.assertEqual(server.stop(), 0)
            server.start()
            refusing[0] = False

            def versions():
                return {e["data"]["reported"]["version"] for e in receiver.events()}

            self.assertTrue(eventually(lambda: versions() >= set(range(1, 11)), timeout=60), versions())
            self.assertTrue(eventually(lambda: server.get("/v1/registrations/w").json()["status"]["delivered"] >= 10))
        finally:
            receiver.close()

    def test_history_from_the_stream_is_complete_and_in_order_after_kill_9_of_its_reader(self):
        a, b = self.server("--history", "stream"), self.server("--history", "stream")
        reader, other = self.reader_of(a, b)
        stuck = []

        def scrape(stop):  # metrics are read while the stream's reader writes history (a deadlock once)
            client = checked_session()
            while not stop.is_set():
                try:
                    client.get(reader.url + "/metrics", timeout=10)
                except requests.exceptions.ReadTimeout as e:
                    stuck.append(e)
                    return
                except requests.exceptions.ConnectionError:
                    return  # killed
                time.sleep(0.02)

        acknowledged = self.kill_reader_under_load(reader, other, "h", also=[scrape])
        self.assertEqual(stuck, [], "/metrics did not answer")

        def history(thing):
            events, cursor = [], None
            while True:
                r = other.get(shadow_path(thing, "main", "history") + "?order=asc&limit=100" +
                              (f"&cursor={cursor}" if cursor else ""))
                self.assertEqual(r.status_code, 200, r.text)
                events += r.json()["events"]
                cursor = r.json().get("cursor")
                if not cursor:
                    return events

        def complete():
            return all(len(history(t)) >= v for t, v in acknowledged.items())

        self.assertTrue(eventually(complete, timeout=60), acknowledged)
        for thing in acknowledged:
            versions = [e["reported"]["version"] for e in history(thing)]
            # Every stored write once (a write acknowledged to the killed one may have landed unseen).
            self.assertEqual(versions, list(range(1, len(versions) + 1)), thing)
            self.assertGreaterEqual(len(versions), acknowledged[thing])

    def test_history_stream_needs_a_table_with_a_stream(self):
        p = subprocess.run([SHADOWD, "--listen", "127.0.0.1:0", "--store", "memory", "--history", "stream"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--history: stream writes history from a DynamoDB table's stream", p.stderr)
        table = new_table()  # no stream
        try:
            p = subprocess.run([SHADOWD, "--listen", "127.0.0.1:0", "--store", f"dynamodb:{table}",
                                "--dynamodb-endpoint", ENDPOINT, "--history", "stream"],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("--history stream needs table", p.stderr)
        finally:
            ddb().delete_table(TableName=table)

    def test_without_a_stream_registrations_are_refused_and_start_up_names_the_fault(self):
        table = new_table()  # no stream
        try:
            server = dynamo_server(table)
            self.servers.append(server)
            r = server.request("PUT", "/v1/registrations/w", json=webhook(self.receiver.url))
            self.assertError(r, 503, "unavailable")
            self.assertIn("stream", r.json()["error"]["message"])
        finally:
            ddb().delete_table(TableName=table)
        # Registrations stored, then the stream turned off: shadowd refuses to start.
        server = self.server()
        self.register(server, "w", webhook(self.receiver.url))
        server.close()
        self.servers.remove(server)
        ddb().update_table(TableName=self.table, StreamSpecification={"StreamEnabled": False})
        p = subprocess.run([SHADOWD, "--listen", "127.0.0.1:0", "--store", f"dynamodb:{self.table}",
                            "--dynamodb-endpoint", ENDPOINT], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no stream", p.stderr)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class HungReceiverTest(ApiTestCase):
    """One receiver that never answers must not stop delivery to the others. Each shard reader
    keeps at most 10,000 records waiting for their events to be delivered by every registration;
    a write is two records or more (its section item, its history item), so 6,000 writes fill
    that for a registration whose receiver hangs. It must spill its events to dead letters."""

    WRITES = 6000

    def test_a_hung_receiver_holds_up_no_other_registration(self):
        table = stream_table()
        hung, fine = RawReceiver("hang"), Receiver()
        server = dynamo_server(table, "--stream-lease-timeout", LEASE_TIMEOUT)
        try:
            for rid, url in (("hung", hung.url), ("fine", fine.url)):
                r = server.request("PUT", f"/v1/registrations/{rid}",
                                   json=webhook(url, target={"timeoutMs": 1000}, maxAttempts=1000))
                self.assertEqual(r.status_code, 200, r.text)

            def write(first):
                client = requests.Session()
                for i in range(first, self.WRITES, 8):
                    r = client.post(server.url + shadow_path(f"hung-{i % 50}", "main", "reported"),
                                    json={"state": {"n": i}}, timeout=30)
                    self.assertEqual(r.status_code, 200, r.text)

            writers = [threading.Thread(target=write, args=(k,)) for k in range(8)]
            for w in writers:
                w.start()
            for w in writers:
                w.join()
            self.assertTrue(eventually(lambda: len(fine.events()) >= self.WRITES, timeout=180),
                            f"{len(fine.events())} of {self.WRITES} delivered to the healthy receiver; its registration: "
                            f"{server.get('/v1/registrations/fine').json()['status']}; errors logged: "
                            f"{[line for line in server.log if 'error' in line][-5:]}")
            status = server.get("/v1/registrations/hung").json()["status"]
            self.assertGreater(status["deadLetters"], 0, status)
            letters = server.get("/v1/registrations/hung/dead-letters?limit=1").json()["deadLetters"]
            self.assertTrue(letters[0]["lastError"].startswith("spilled:"), letters[0])
            self.assertTrue(any("spilling the events of the registration" in line for line in server.log))
        finally:
            server.close()
            hung.close()
            fine.close()
            ddb().delete_table(TableName=table)
