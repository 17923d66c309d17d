"""Every endpoint of the REST API v1 over real HTTP, with its status codes and errors."""
import unittest
from urllib.parse import quote

from harness import ServerTestCase, shadow_path

TS1 = "2025-01-01T00:00:00Z"
TS2 = "2025-01-01T00:00:01Z"


class ShadowEndpoints(ServerTestCase):
    def test_report_get_and_delta(self):
        s = self.server
        r = s.post(shadow_path("api-1", "main", "reported"),
                   {"state": {"temp": {"value": 21.5, "ts": TS1}}, "clientToken": "c-1", "tz": "Europe/Stockholm"})
        self.assertEqual(r.status_code, 200, r.text)
        body = r.json()
        self.assertTrue(body["changed"])
        self.assertEqual(body["reported"]["version"], 1)
        self.assertEqual(body["reported"]["clientToken"], "c-1")
        self.assertEqual(body["reported"]["tz"], "Europe/Stockholm")
        self.assertEqual(body["changes"], [{"section": "reported", "op": "add", "path": "/temp",
                                            "new": {"value": 21.5, "ts": TS1}}])
        self.assertEqual(body["desired"], {"state": {}, "version": 0})
        r = s.post(shadow_path("api-1", "main", "desired"), {"state": {"sp": 22}})
        self.assertEqual(r.json()["delta"], {"sp": 22})
        g = s.get(shadow_path("api-1"))
        self.assertEqual(g.status_code, 200)
        self.assertEqual(set(g.json()), {"thing", "name", "reported", "desired", "delta"})
        self.assertEqual(g.json()["delta"], {"sp": 22})
        self.assertRegex(g.json()["reported"]["timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")

    def test_metadata_gives_each_leafs_change_time(self):
        s = self.server
        p = shadow_path("api-meta")
        s.post(shadow_path("api-meta", "main", "reported"),
               {"state": {"temp": {"value": 21, "ts": TS1}, "fan": {"on": True, "speed": 2}, "tags": ["a"], "e": {}}})
        first = s.get(p).json()["reported"]["timestamp"]
        s.post(shadow_path("api-meta", "main", "reported"), {"state": {"fan": {"speed": 3}, "tags": ["a"]}})
        s.post(shadow_path("api-meta", "main", "desired"), {"state": {"sp": 22}})
        g = s.get(p + "?metadata=true")
        self.assertEqual(g.status_code, 200, g.text)
        body = g.json()
        second = body["reported"]["timestamp"]
        self.assertLess(first, second)
        self.assertEqual(body["reported"]["metadata"],
                         {"temp": first, "fan": {"on": first, "speed": second}, "tags": first, "e": first})
        self.assertEqual(body["desired"]["metadata"], {"sp": body["desired"]["timestamp"]})
        self.assertNotIn("metadata", s.get(p + "?metadata=false").json()["reported"])
        self.assertNotIn("metadata", s.get(p).json()["reported"])
        s.delete(shadow_path("api-meta", "main", "desired"))
        self.assertEqual(s.get(p + "?metadata=true").json()["desired"]["metadata"], {})
        for bad in ("1", "yes", "TRUE", ""):
            e = self.assertError(s.get(p + "?metadata=" + bad), 400, "invalid_request")
            self.assertEqual(e.get("field"), "metadata", bad)

    def test_numbers_round_trip_in_shortest_form(self):
        r = self.server.post(shadow_path("api-num", "main", "reported"),
                             {"state": {"a": 22.5, "b": 0.1, "c": 1.0, "big": 18446744073709551615}})
        self.assertIn('"a":22.5', r.text)
        self.assertIn('"b":0.1', r.text)
        self.assertIn('"c":1.0', r.text)
        self.assertIn('"big":18446744073709551615', r.text)

    def test_acknowledgement_and_stale(self):
        s = self.server
        s.post(shadow_path("api-ack", "main", "desired"), {"state": {"sp": 22, "mode": "eco"}})
        r = s.post(shadow_path("api-ack", "main", "reported"), {"state": {"sp": 22, "h": {"v": 1, "ts": TS2}}}).json()
        self.assertEqual(r["acknowledged"], [{"path": "/sp", "value": 22}])
        self.assertEqual(r["desired"]["state"], {"mode": "eco"})
        self.assertEqual(r["desired"]["version"], 2)
        r = s.post(shadow_path("api-ack", "main", "reported"), {"state": {"h": {"v": 0, "ts": TS1}}}).json()
        self.assertFalse(r["changed"])
        self.assertEqual(r["stale"], ["/h"])
        self.assertEqual(r["reported"]["version"], 1)

    def test_names_are_percent_decoded_after_splitting(self):
        thing = "My House#Basement/Lightning Controller é"
        r = self.server.post(shadow_path(thing, "main", "reported"), {"state": {"on": True}})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json()["thing"], thing)
        self.assertEqual(self.server.get(shadow_path(thing)).json()["thing"], thing)
        things = self.server.get("/v1/things?prefix=" + quote("My House#", safe="")).json()["things"]
        self.assertIn(thing, things)

    def test_missing_shadow_is_404(self):
        self.assertError(self.server.get(shadow_path("api-nobody")), 404, "not_found")
        self.assertError(self.server.delete(shadow_path("api-nobody")), 404, "not_found")

    def test_pinned_version_conflict_is_409_with_current_version(self):
        s = self.server
        s.post(shadow_path("api-pin", "main", "reported"), {"state": {"a": 1}})
        e = self.assertError(s.post(shadow_path("api-pin", "main", "reported"), {"state": {"a": 2}, "version": 0}),
                             409, "version_conflict")
        self.assertEqual(e["current_version"], 1)
        r = s.post(shadow_path("api-pin", "main", "reported"), {"state": {"a": 2}, "version": 1})
        self.assertEqual(r.json()["reported"]["version"], 2)

    def test_delete_whole_shadow_and_one_section(self):
        s = self.server
        s.post(shadow_path("api-del", "main", "reported"), {"state": {"a": 1}})
        s.post(shadow_path("api-del", "main", "desired"), {"state": {"b": 1}})
        self.assertError(s.delete(shadow_path("api-del", "main", "desired") + "?version=7"), 409, "version_conflict")
        r = s.delete(shadow_path("api-del", "main", "desired") + "?version=1")
        self.assertEqual(r.json(), {"thing": "api-del", "name": "main", "deleted": ["desired"], "desired": {"version": 2}})
        r = s.delete(shadow_path("api-del"))
        self.assertEqual(r.json()["deleted"], ["reported"])
        self.assertError(s.get(shadow_path("api-del")), 404, "not_found")
        r = s.post(shadow_path("api-del", "main", "reported"), {"state": {"a": 2}})
        self.assertEqual(r.json()["reported"]["version"], 3)  # numbering continues past the tombstone

    def test_list_shadows_and_things_with_cursors(self):
        s = self.server
        for name in ["c", "a", "b"]:
            s.post(shadow_path("api-list", name, "reported"), {"state": {"n": name}})
        page = s.get("/v1/things/api-list/shadows?limit=2").json()
        self.assertEqual([x["name"] for x in page["shadows"]], ["a", "b"])
        self.assertEqual(set(page["shadows"][0]), {"name", "reportedVersion", "desiredVersion", "timestamp"})
        rest = s.get("/v1/things/api-list/shadows?limit=2&cursor=" + page["cursor"]).json()
        self.assertEqual([x["name"] for x in rest["shadows"]], ["c"])
        self.assertNotIn("cursor", rest)
        for i in range(5):
            s.post(shadow_path(f"api-things-{i}", "main", "reported"), {"state": {"i": i}})
        seen, cursor = [], ""
        while True:
            page = s.get("/v1/things?prefix=api-things-&limit=2" + (f"&cursor={cursor}" if cursor else "")).json()
            seen += page["things"]
            cursor = page.get("cursor")
            if not cursor:
                break
        self.assertEqual(seen, [f"api-things-{i}" for i in range(5)])

    def test_history_with_order_range_and_cursor(self):
        s = self.server
        for i in range(5):
            s.post(shadow_path("api-hist", "main", "reported"), {"state": {"n": i}, "clientToken": f"t{i}"})
        events = s.get(shadow_path("api-hist", "main", "history")).json()["events"]
        self.assertEqual([e["clientToken"] for e in events], ["t4", "t3", "t2", "t1", "t0"])
        e = events[0]
        self.assertEqual(set(e), {"id", "thing", "name", "op", "timestamp", "clientToken", "reported"})
        self.assertEqual(e["reported"]["changes"], [{"op": "update", "path": "/n", "old": 3, "new": 4}])
        page = s.get(shadow_path("api-hist", "main", "history") + "?order=asc&limit=2").json()
        self.assertEqual([x["clientToken"] for x in page["events"]], ["t0", "t1"])
        page = s.get(shadow_path("api-hist", "main", "history") + f"?order=asc&limit=2&cursor={page['cursor']}").json()
        self.assertEqual([x["clientToken"] for x in page["events"]], ["t2", "t3"])
        since = quote(events[2]["timestamp"])
        until = quote(events[1]["timestamp"])
        window = s.get(shadow_path("api-hist", "main", "history") + f"?since={since}&until={until}").json()["events"]
        self.assertEqual([x["clientToken"] for x in window], ["t3", "t2"])
        self.assertError(s.get(shadow_path("api-hist", "main", "history") + "?order=sideways"), 400, "invalid_request")
        self.assertError(s.get(shadow_path("api-hist", "main", "history") + "?since=yesterday"), 400, "invalid_request")

    def test_batch_get_and_update_keep_request_order(self):
        s = self.server
        s.post(shadow_path("api-b1", "main", "reported"), {"state": {"v": 1}})
        r = s.post("/v1/batch/get", {"shadows": [{"thing": "api-b1", "name": "main"}, {"thing": "api-missing"},
                                                 {"thing": "", "name": "main"}]})
        out = r.json()["shadows"]
        self.assertEqual(out[0]["reported"]["state"], {"v": 1})
        self.assertEqual(out[1]["error"]["code"], "not_found")
        self.assertEqual(out[2]["error"]["code"], "invalid_name")
        ops = [{"thing": f"api-bu-{i}", "name": "main", "section": "reported", "state": {"i": i}} for i in range(10)]
        ops[3]["state"] = {"x": {"ts": "never"}}
        ops[5] = {"thing": "api-bu-5", "section": "sideways", "state": {}}
        results = s.post("/v1/batch/update", {"operations": ops}).json()["results"]
        self.assertEqual([x.get("thing") for x in results], [f"api-bu-{i}" for i in range(10)])
        self.assertEqual(results[3]["error"]["code"], "invalid_timestamp")
        self.assertEqual(results[5]["error"]["code"], "invalid_request")
        self.assertTrue(results[9]["changed"])
        self.assertError(s.post("/v1/batch/update", {"operations": ops * 11}), 400, "invalid_request")

    def test_batch_bodies_name_the_field_they_reject(self):
        s = self.server
        for path, field in (("/v1/batch/get", "shadows"), ("/v1/batch/update", "operations")):
            for items in ({"a": 1}, [{"thing": "t"}] * 101):
                error = self.assertError(s.post(path, {field: items}), 400, "invalid_request")
                self.assertEqual(error["field"], field)

    def test_health_ready_and_metrics(self):
        s = self.server
        self.assertEqual(s.get("/healthz").json(), {"status": "ok"})
        self.assertEqual(s.get("/readyz").status_code, 200)
        s.post(shadow_path("api-metrics", "main", "reported"), {"state": {"a": {"v": 1, "ts": TS2}}})
        s.post(shadow_path("api-metrics", "main", "reported"), {"state": {"a": {"v": 0, "ts": TS1}}})
        m = s.get("/metrics")
        self.assertTrue(m.headers["Content-Type"].startswith("text/plain"))
        text = m.text
        for needle in ['shadowd_http_requests_total{route="/v1/things/{thing}/shadows/{name}/{section}",method="POST",status="200"}',
                       "shadowd_http_request_duration_seconds_bucket", 'shadowd_store_operation_duration_seconds_count{operation="write"}',
                       "shadowd_http_requests_in_flight 1", "shadowd_write_retries_total", "shadowd_version_conflicts_total",
                       "shadowd_acknowledgements_total"]:
            self.assertIn(needle, text)
        stale = [l for l in text.splitlines() if l.startswith("shadowd_stale_values_total ")]
        self.assertGreaterEqual(int(stale[0].split()[1]), 1)


class ErrorResponses(ServerTestCase):
    def test_invalid_json_has_line_and_column(self):
        e = self.assertError(self.server.post(shadow_path("err-1", "main", "reported"), data='{\n "state": {"a": tru}\n}'),
                             400, "invalid_json")
        self.assertEqual(e["line"], 2)
        self.assertGreater(e["column"], 1)

    def test_invalid_requests(self):
        p = shadow_path("err-2", "main", "reported")
        for body, field in [({}, "state"), ({"state": [1]}, "state"), ({"state": {}, "State": {}}, "State"),
                            ({"state": {}, "version": -1}, "version"), ({"state": {}, "version": "1"}, "version"),
                            ({"state": {}, "mode": "anarchy"}, "mode"), ({"state": {}, "acknowledge": "no"}, "acknowledge"),
                            ({"state": {}, "clientToken": "x" * 65}, "clientToken"), ({"state": {}, "tz": "Mars/Base One"}, "tz"),
                            ({"state": {}, "clientToken": 5}, "clientToken")]:
            e = self.assertError(self.server.post(p, body), 400, "invalid_request")
            self.assertEqual(e.get("field"), field, body)
        self.assertError(self.server.post(p, [1, 2]), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?limit=0"), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?limit=1001"), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?limit=ten"), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?cursor=%%%"), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?cursor=@@"), 400, "invalid_request")
        self.assertError(self.server.get("/v1/things?colour=blue"), 400, "invalid_request")

    def test_invalid_names(self):
        self.assertEqual(self.assertError(self.server.get(shadow_path("a\nb")), 400, "invalid_name")["field"], "thing")
        self.assertEqual(self.assertError(self.server.get(shadow_path("x", "bad name")), 400, "invalid_name")["field"], "name")
        self.assertError(self.server.get(shadow_path("x" * 513)), 400, "invalid_name")
        self.assertError(self.server.get("/v1/things//shadows/main"), 400, "invalid_name")
        self.assertError(self.server.get("/v1/things/%FF/shadows/main"), 400, "invalid_name")

    def test_invalid_timestamp_and_too_deep(self):
        e = self.assertError(self.server.post(shadow_path("err-3", "main", "reported"), {"state": {"t": {"ts": "noon"}}}),
                             400, "invalid_timestamp")
        self.assertEqual(e["path"], "/t/ts")
        deep = {}
        node = deep
        for _ in range(33):
            node["a"] = {}
            node = node["a"]
        node["leaf"] = 1
        e = self.assertError(self.server.post(shadow_path("err-3", "main", "reported"), {"state": deep}), 400, "too_deep")
        self.assertTrue(e["path"].startswith("/a/a/a"))
        self.assertError(self.server.get(shadow_path("err-3")), 404, "not_found")

    def test_too_large(self):
        e = self.assertError(self.server.post(shadow_path("err-4", "main", "reported"), {"state": {"blob": "x" * 70000}}),
                             413, "document_too_large")
        self.assertEqual(e["limit"], 65536)
        self.assertError(self.server.post(shadow_path("err-4", "main", "reported"),
                                          data='{"state":{"blob":"' + "y" * (1 << 20) + '"}}'), 413, "document_too_large")
        self.assertError(self.server.get(shadow_path("err-4")), 404, "not_found")

    def test_unknown_routes_and_wrong_methods(self):
        self.assertError(self.server.get("/v2/things"), 404, "not_found")
        self.assertError(self.server.get("/v1/things/t/shadows/main/sideways"), 404, "not_found")
        r = self.server.request("PUT", shadow_path("t"))
        self.assertError(r, 405, "method_not_allowed")
        self.assertEqual(r.headers["Allow"], "GET, DELETE")
        self.assertEqual(self.server.request("GET", shadow_path("t", "main", "reported")).headers["Allow"], "POST, DELETE")
        self.assertError(self.server.request("DELETE", "/v1/things"), 405, "method_not_allowed")


if __name__ == "__main__":
    unittest.main()
