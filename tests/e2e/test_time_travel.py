"""Time travel over HTTP (docs/semantics.md, "Time travel"): as-of reads, history bounds, diff and
series, their errors and token rules, on SQLite and on DynamoDB Local."""
import hashlib
import os
import tempfile
import time
import unittest
from urllib.parse import quote

from harness import ApiTestCase, Server, eventually, shadow_path
from test_dynamodb import ENDPOINT, dynamo_server, new_table
from test_notify_dynamodb import stream_table

TOKENS = {"admin": "tt-admin", "app": "tt-app", "device": "tt-device"}


def token_file():
    fd, path = tempfile.mkstemp()
    with os.fdopen(fd, "w") as f:
        for role, token in TOKENS.items():
            f.write(f"{hashlib.sha256(token.encode()).hexdigest()} {role}\n")
    return path


def without_times(body):
    """A GET body without what an as-of read adds."""
    return {k: v for k, v in body.items() if k not in ("asOf", "event")}


class TimeTravel:
    """The scenario, on the store of the subclass's server (cls.server, admin token)."""

    thing = "tt-plant"
    shared = False  # the sections share one version (DynamoDB's combined layout)

    @classmethod
    def version(cls, write, section="reported"):
        """The version the scenario's write number `write` gave the section."""
        return cls.seen[write]["versions"][section]

    @classmethod
    def write(cls, method, path, body=None):
        r = cls.server.request(method, path, token=TOKENS["admin"], **({"json": body} if body is not None else {}))
        assert r.status_code == 200, r.text

        def newest_event():  # with --history stream the event appears once the stream is read
            events = cls.get(shadow_path(cls.thing, "main", "history") + "?limit=1").json()["events"]
            return events and (not cls.seen or events[0]["id"] != cls.seen[-1]["event"]) and events[0]
        newest = eventually(newest_event)
        assert newest, "the write's history event never appeared"
        get = cls.get(shadow_path(cls.thing))
        cls.seen.append({"event": newest["id"], "timestamp": newest["timestamp"],
                         "versions": {s: newest[s]["version"] for s in ("reported", "desired") if s in newest},
                         "body": get.json() if get.status_code == 200 else None,
                         "metadata": cls.get(shadow_path(cls.thing) + "?metadata=true").json() if get.status_code == 200 else None})
        time.sleep(0.01)  # distinct server times

    @classmethod
    def get(cls, path, token="admin"):
        return cls.server.get(path, token=TOKENS.get(token, token))

    @classmethod
    def write_scenario(cls):
        cls.seen = []
        p = shadow_path(cls.thing)
        cls.write("POST", p + "/reported", {"state": {"temp": 21.5, "nest": {"x": 1}, "list": [{"id": 1, "v": 1}]}})
        cls.write("POST", p + "/desired", {"state": {"temp": 20}, "clientToken": "set-1"})
        cls.write("POST", p + "/reported", {"state": {"temp": 20, "nest": {"x": None}, "list": [{"id": 2, "v": 2}]}})
        cls.write("POST", p + "/reported", {"state": {"nest": {"y": {"value": 3, "ts": "2026-01-01T00:00:00Z"}}},
                                            "tz": "Europe/Stockholm"})
        cls.write("DELETE", p + "/reported")
        cls.write("POST", p + "/reported", {"state": {"temp": 19}})

    def test_as_of_reads_give_what_a_get_gave(self):
        p = shadow_path(self.thing)
        for seen in self.seen:
            with self.subTest(event=seen["event"]):
                r = self.get(p + "?asOfEvent=" + quote(seen["event"]))
                if seen["body"] is None:
                    self.assertError(r, 404, "not_found")
                    continue
                self.assertEqual(r.status_code, 200, r.text)
                self.assertEqual(r.json()["event"], seen["event"])
                self.assertEqual(r.json()["asOf"], seen["timestamp"])
                self.assertEqual(without_times(r.json()), seen["body"])
                r = self.get(p + "?metadata=true&asOf=" + seen["timestamp"])
                self.assertEqual(without_times(r.json()), seen["metadata"])
                # RFC 3339 allows a lower-case t and z.
                r = self.get(p + "?metadata=true&asOf=" + seen["timestamp"].replace("T", "t").replace("Z", "z"))
                self.assertEqual(without_times(r.json()), seen["metadata"])

    def test_an_emptied_object_is_kept_in_the_past(self):
        after = self.seen[2]["body"]
        self.assertEqual(after["reported"]["state"]["nest"], {})
        r = self.get(shadow_path(self.thing) + f"?reportedVersion={self.version(2)}")
        self.assertEqual(r.json()["reported"]["state"]["nest"], {})

    def test_versions_name_the_write_that_gave_them(self):
        r = self.get(shadow_path(self.thing) + f"?desiredVersion={self.version(1, 'desired')}")
        self.assertEqual(r.json()["event"], self.seen[1]["event"])
        self.assertEqual(r.json()["desired"]["clientToken"], "set-1")
        r = self.get(shadow_path(self.thing) + f"?reportedVersion={self.version(2)}")
        self.assertEqual(r.json()["event"], self.seen[2]["event"])

    def test_bounds(self):
        r = self.get(shadow_path(self.thing, "main", "history", "bounds"))
        self.assertEqual(r.status_code, 200, r.text)
        b = r.json()
        self.assertTrue(b["complete"])
        self.assertEqual(b["oldest"]["id"], self.seen[0]["event"])
        self.assertEqual(b["newest"]["id"], self.seen[-1]["event"])
        # both sections show the one version in DynamoDB's combined layout
        self.assertEqual((b["oldest"]["reportedVersion"], b["oldest"]["desiredVersion"]), (1, 1) if self.shared else (1, 0))
        self.assertEqual((b["newest"]["reportedVersion"], b["newest"]["desiredVersion"]), (6, 6) if self.shared else (5, 2))

    def test_diff(self):
        r = self.get(shadow_path(self.thing, "main", "diff") + f"?from={quote(self.seen[0]['event'])}&to={self.seen[2]['timestamp']}")
        self.assertEqual(r.status_code, 200, r.text)
        d = r.json()
        self.assertEqual(d["from"]["id"], self.seen[0]["event"])
        self.assertEqual(d["to"]["id"], self.seen[2]["event"])
        self.assertEqual(d["changes"], [
            {"section": "reported", "op": "update", "path": "/list", "old": [{"id": 1, "v": 1}],
             "new": [{"id": 1, "v": 1}, {"id": 2, "v": 2}]},
            {"section": "reported", "op": "add", "path": "/nest", "new": {}},
            {"section": "reported", "op": "remove", "path": "/nest/x", "old": 1},
            {"section": "reported", "op": "update", "path": "/temp", "old": 21.5, "new": 20}])
        # to defaults to now; a value changed and changed back is no entry
        r = self.get(shadow_path(self.thing, "main", "diff") + f"?from={quote(self.seen[-1]['event'])}")
        self.assertEqual(r.json()["changes"], [])

    def series(self, query, token="admin"):
        return self.get(shadow_path(self.thing, "main", "history") + "?format=series&" + query, token=token)

    def test_series_of_a_leaf_and_of_an_object(self):
        r = self.series("path=/temp")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json(), {"series": [
            {"timestamp": self.seen[0]["timestamp"], "version": self.version(0), "value": 21.5},
            {"timestamp": self.seen[2]["timestamp"], "version": self.version(2), "value": 20},
            {"timestamp": self.seen[4]["timestamp"], "version": self.version(4)},
            {"timestamp": self.seen[5]["timestamp"], "version": self.version(5), "value": 19}]})
        nest = [point.get("value") for point in self.series("path=/nest").json()["series"]]
        self.assertEqual(nest, [{"x": 1}, {}, {"y": {"value": 3, "ts": "2026-01-01T00:00:00Z"}}, None])
        y = self.series("path=/nest/y").json()["series"][0]
        self.assertEqual(y["ts"], "2026-01-01T00:00:00.000000000Z")
        self.assertEqual(self.series("path=/temp&section=desired").json()["series"][0]["value"], 20)

    def test_series_pages(self):
        values, cursor = [], None
        while True:
            r = self.series("path=/temp&limit=1" + (f"&cursor={quote(cursor)}" if cursor else ""))
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(len(r.json()["series"]), 1)
            values.append(r.json()["series"][0].get("value"))
            cursor = r.json().get("cursor")
            if not cursor:
                break
        self.assertEqual(values, [21.5, 20, None, 19])
        since = self.series("path=/temp&since=" + self.seen[2]["timestamp"] + "&until=" + self.seen[4]["timestamp"])
        self.assertEqual([p["version"] for p in since.json()["series"]], [self.version(2), self.version(4)])

    def test_series_errors(self):
        for query in ("", "path=temp", "path=/a~2", "path=/temp&section=both", "path=/temp&order=desc",
                      "path=/temp&limit=0", "path=/temp&cursor=!!", "path=/temp&since=soon"):
            with self.subTest(query=query):
                self.assertError(self.series(query), 400, "invalid_request")
        self.assertError(self.get(shadow_path(self.thing, "main", "history") + "?format=table"), 400, "invalid_request")
        self.assertError(self.get(shadow_path(self.thing, "main", "history") + "?path=/temp"), 400, "invalid_request")
        self.assertError(self.series("path=/temp", token="device"), 403, "forbidden")
        self.assertEqual(self.series("path=/temp", token="app").status_code, 200)

    def test_errors(self):
        p = shadow_path(self.thing)
        first = self.seen[0]
        self.assertError(self.get(p + f"?asOfEvent={quote(first['event'])}&reportedVersion=1"), 400, "invalid_request")
        self.assertError(self.get(p + "?asOf=2999-01-01T00:00:00Z"), 400, "invalid_request")
        self.assertError(self.get(p + "?asOf=yesterday"), 400, "invalid_request")
        self.assertError(self.get(p + "?asOfEvent=00000000000000000001%23R1"), 404, "not_found")
        self.assertError(self.get(p + "?desiredVersion=99"), 404, "not_found")
        self.assertError(self.get(p + "?asOf=2000-01-01T00:00:00Z"), 404, "not_found")
        self.assertError(self.get(shadow_path(self.thing, "main", "diff")), 400, "invalid_request")
        self.assertError(self.get(shadow_path(self.thing, "main", "diff") + "?from=junk"), 400, "invalid_request")
        self.assertError(self.get(shadow_path("nobody", "main", "history", "bounds")), 404, "not_found")
        # A name no shadow may have is refused as such, not looked for.
        at = quote(first["timestamp"])
        for name in ("n" * 65, "a%00b", "a b"):
            for rest in (f"?asOf={at}", f"/diff?from={at}", "/history?format=series&path=/temp", "/history/bounds"):
                with self.subTest(name=name, rest=rest):
                    self.assertError(self.get(f"/v1/things/{quote(self.thing)}/shadows/{quote(name, safe='%')}{rest}"),
                                     400, "invalid_name")

    def test_token_rules(self):
        p = shadow_path(self.thing)
        at = "?asOfEvent=" + quote(self.seen[0]["event"])
        self.assertEqual(self.get(p, token="device").status_code, 200)
        for path in (p + at, shadow_path(self.thing, "main", "history", "bounds"),
                     shadow_path(self.thing, "main", "diff") + "?from=" + quote(self.seen[0]["event"])):
            self.assertError(self.get(path, token="device"), 403, "forbidden")
            self.assertEqual(self.get(path, token="app").status_code, 200)
            self.assertError(self.get(path, token="wrong"), 401, "unauthorized")


class OnSqlite(TimeTravel, ApiTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tokens = token_file()
        cls.server = Server("--tokens", cls.tokens)
        cls.write_scenario()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        os.unlink(cls.tokens)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class OnDynamoDB(TimeTravel, ApiTestCase):

    @classmethod
    def setUpClass(cls):
        cls.tokens = token_file()
        cls.server = dynamo_server(new_table(), "--tokens", cls.tokens)
        cls.write_scenario()

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        os.unlink(cls.tokens)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class OnDynamoDBCombined(OnDynamoDB):
    """Both sections in one item under one shared version."""

    shared = True

    @classmethod
    def setUpClass(cls):
        cls.tokens = token_file()
        cls.server = dynamo_server(new_table(), "--layout", "combined", "--tokens", cls.tokens)
        cls.write_scenario()


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class OnDynamoDBHistoryFromStream(OnDynamoDB):
    """History written from the table's stream (--history stream): the past is readable once the
    stream has been read."""

    @classmethod
    def setUpClass(cls):
        cls.tokens = token_file()
        cls.server = dynamo_server(stream_table(), "--history", "stream", "--tokens", cls.tokens)
        cls.write_scenario()


class HistoryOffAndExpired(ApiTestCase):
    def test_history_off_refuses_as_of_reads(self):
        with Server("--history", "false") as server:
            server.post(shadow_path("t1", "main", "reported"), {"state": {"a": 1}})
            self.assertError(server.get(shadow_path("t1") + "?asOf=2020-01-01T00:00:00Z"), 400, "invalid_request")
            self.assertError(server.get(shadow_path("t1", "main", "history", "bounds")), 400, "invalid_request")

    def test_a_moment_older_than_the_history_kept_is_410(self):
        with Server("--history-retention", "3s", "--purge-interval", "1s") as server:
            server.post(shadow_path("t1", "main", "reported"), {"state": {"a": 1}})
            first = server.get(shadow_path("t1", "main", "history")).json()["events"][0]
            time.sleep(3.5)
            server.post(shadow_path("t1", "main", "reported"), {"state": {"a": 2}})
            expired = eventually(lambda: server.get(shadow_path("t1") + "?asOf=" + first["timestamp"]).status_code == 410)
            self.assertTrue(expired)
            r = server.get(shadow_path("t1") + "?asOfEvent=" + quote(first["id"]))
            error = self.assertError(r, 410, "history_expired")
            self.assertNotEqual(error["oldest"]["id"], first["id"])
            self.assertFalse(server.get(shadow_path("t1", "main", "history", "bounds")).json()["complete"])


if __name__ == "__main__":
    unittest.main()
