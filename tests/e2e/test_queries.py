"""Fleet queries through shadowd (docs/queries.md): search, count, fields, cursors (tampered,
another filter, another token), token patterns, bad filters with their offsets, the query budget,
byte-bounded pages, cursors across a restart; on SQLite and on DynamoDB Local (allowScan)."""
import functools
import hashlib
import json
import os
import subprocess
import tempfile
import unittest
from urllib.parse import quote

from harness import SHADOWCTL, ApiTestCase, Server, eventually, shadow_path
from test_dynamodb import ENDPOINT, ddb, dynamo_server, new_table

# thing -> reported state; plant-7/s1 also has a shadow "aux" and a pending desired fw.
FLEET = {
    "plant-7/s0": {"temp": {"value": 19.5, "ts": "2026-11-27T01:00:00Z"}, "fw": "1.2.0", "tags": ["a"]},
    "plant-7/s1": {"temp": {"value": 21.0, "ts": "2026-11-27T02:00:00Z"}, "fw": "1.2.0", "tags": ["a", "b"]},
    "plant-7/s2": {"temp": {"value": 23.5, "ts": "2026-11-27T03:00:00Z"}, "fw": "1.3.0"},
    "plant-8/s0": {"temp": {"value": 30, "ts": "2026-11-27T03:00:00Z"}, "fw": "1.3.0"},
    "office": {"temp": {"value": 21, "ts": "2026-11-27T03:00:00Z"}},
}
ALL = sorted([(t, "main") for t in FLEET] + [("plant-7/s1", "aux")])


def populate(server, token=None):
    for thing, state in FLEET.items():
        r = server.post(shadow_path(thing, "main", "reported"), {"state": state}, token=token)
        assert r.status_code == 200, r.text
    server.post(shadow_path("plant-7/s1", "aux", "reported"), {"state": {"battery": 80}}, token=token)
    server.post(shadow_path("plant-7/s1", "main", "desired"), {"state": {"fw": "1.3.0"}}, token=token)


def keys(body):
    return [(s["thing"], s["name"]) for s in body["shadows"]]


class Queries:
    """The tests every store passes; a subclass starts `server` with the fleet written."""
    token = None

    def search(self, token=None, **params):
        return self.server.get("/v1/shadows", params=params, token=token or self.token)

    def found(self, **params):
        r = self.search(**params)
        self.assertEqual(r.status_code, 200, r.text)
        return keys(r.json())

    def count(self, **params):
        r = self.server.get("/v1/shadows/count", params=params, token=self.token)
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()["count"]

    def test_search_matches_in_thing_then_name_order(self):
        self.assertEqual(self.found(filter='like(thing,"plant-7/*")'), [k for k in ALL if k[0].startswith("plant-7/")])
        self.assertEqual(self.found(filter="and(exists(delta/fw),like(thing,\"plant-7/*\"))"), [("plant-7/s1", "main")])
        self.assertEqual(self.found(filter='eq(reported/fw,"1.3.0")', **self.scan), [("plant-7/s2", "main"), ("plant-8/s0", "main")])
        self.assertEqual(self.found(filter='in(thing,"office","plant-8/s0","nowhere")'), [("office", "main"), ("plant-8/s0", "main")])

    def test_results_are_whole_shadows_unless_fields_are_given(self):
        r = self.search(filter='eq(thing,"plant-7/s1")')
        whole = self.server.get(shadow_path("plant-7/s1", "main"), token=self.token).json()
        self.assertEqual(r.json()["shadows"][1], whole)
        r = self.search(filter='eq(thing,"plant-7/s1")', fields="reported/temp,reported/temp@ts,_pending,desired/fw")
        self.assertEqual(r.json()["shadows"], [
            {"thing": "plant-7/s1", "name": "aux", "_pending": False},
            {"thing": "plant-7/s1", "name": "main", "reported/temp": {"value": 21.0, "ts": "2026-11-27T02:00:00Z"},
             "reported/temp@ts": "2026-11-27T02:00:00.000000000Z", "_pending": True, "desired/fw": "1.3.0"}])

    def test_post_search_takes_the_same_members_as_json(self):
        body = {"filter": 'like(thing,"plant-7/*")', "fields": ["reported/fw"], "limit": 2}
        r = self.server.post("/v1/shadows/search", body, token=self.token)
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(keys(r.json()), [("plant-7/s0", "main"), ("plant-7/s1", "aux")])
        r2 = self.server.post("/v1/shadows/search", {**body, "cursor": r.json()["cursor"]}, token=self.token)
        self.assertEqual(keys(r2.json()), [("plant-7/s1", "main"), ("plant-7/s2", "main")])
        self.assertError(self.server.post("/v1/shadows/search", {"filter": 1}, token=self.token), 400, "invalid_request")
        self.assertError(self.server.post("/v1/shadows/search", {"where": "x"}, token=self.token), 400, "invalid_request")
        r3 = self.server.post("/v1/shadows/search", {**body, "limit": 2.0}, token=self.token)  # a whole number
        self.assertEqual(keys(r3.json()), keys(r.json()), r3.text)
        for limit in ("2", 2.5, 0, 1001, True):
            e = self.assertError(self.server.post("/v1/shadows/search", {**body, "limit": limit}, token=self.token),
                                 400, "invalid_request")
            self.assertEqual(e["field"], "limit", limit)
        r4 = self.server.post("/v1/shadows/search", {"filter": None, "limit": 1, **({"allowScan": True} if self.scan else {})},
                              token=self.token)
        self.assertEqual(r4.status_code, 200, r4.text)  # null: no filter

    def test_count(self):
        self.assertEqual(self.count(filter='like(thing,"plant-*")'), 5)
        self.assertEqual(self.count(filter='and(like(thing,"plant-7/*"),lt(reported/temp,22))'), 2)
        self.assertEqual(self.count(filter="eq(_pending,true)", **self.scan), 1)

    def test_cursors_page_through_everything_once(self):
        seen, cursor = [], None
        while True:
            params = {"limit": 2, **self.scan}
            if cursor:
                params["cursor"] = cursor
            body = self.search(**params).json()
            seen += keys(body)
            self.assertLessEqual(len(body["shadows"]), 2)
            cursor = body.get("cursor")
            if not cursor:
                break
        self.assertEqual(seen, ALL)

    def test_a_cursor_works_only_for_its_own_query(self):
        filt = 'like(thing,"plant-*")'
        cursor = self.search(filter=filt, limit=1).json()["cursor"]
        for thing, _ in ALL:
            self.assertNotIn(quote(thing, safe=""), cursor)
        self.assertEqual(self.search(filter=filt, limit=1, cursor=cursor).status_code, 200)
        e = self.assertError(self.search(filter='like(thing,"plant-7*")', limit=1, cursor=cursor), 400, "invalid_request")
        self.assertEqual(e["field"], "cursor")
        tampered = cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]
        self.assertError(self.search(filter=filt, limit=1, cursor=tampered), 400, "invalid_request")
        self.assertError(self.search(filter=filt, limit=1, cursor="!!"), 400, "invalid_request")

    def test_bad_filters_name_the_offset_and_what_was_expected(self):
        for filt, offset, expected in [
            ('eq(thing,"a"', 12, "')'"),
            ("eq(reported/temp,)", 17, "a value"),
            ("lt(reported/temp@ts,time:now-P1.5M)", 31, "whole years and months"),
            ("gt(repotred/x,1)", 3, "a property"),
            ('and(eq(thing,"a") eq(name,"b"))', 18, "',' or ')'"),
            ("like(thing,1)", 11, '"string" pattern'),
        ]:
            for r in (self.search(filter=filt), self.server.get("/v1/shadows/count", params={"filter": filt}, token=self.token)):
                e = self.assertError(r, 400, "invalid_filter")
                self.assertEqual(e["offset"], offset, filt)
                self.assertIn(expected, e["expected"], filt)
        self.assertEqual(self.search(filter="x" * 5000).json()["error"]["offset"], 4096)
        self.assertEqual(self.search(filter="gt(reported/temp@ts,time:now-P1Y2M)", **self.scan).status_code, 200)

    def test_aggregate(self):
        body = {"filter": 'like(thing,"plant-7/*")', "groupBy": ["reported/fw"],
                "metrics": {"n": "count()", "avg": "avg(reported/temp)", "p": "percentiles(reported/temp,50,100)",
                            "oldest": "min(reported/temp@ts)"}}
        r = self.server.post("/v1/shadows/aggregate", body, token=self.token)
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json(), {"groups": [
            {"key": {"reported/fw": "1.2.0"}, "n": 2, "avg": 20.25, "p": {"50": 19.5, "100": 21},
             "oldest": "2026-11-27T01:00:00.000000000Z"},
            {"key": {"reported/fw": "1.3.0"}, "n": 1, "avg": 23.5, "p": {"50": 23.5, "100": 23.5},
             "oldest": "2026-11-27T03:00:00.000000000Z"},
            {"key": {"reported/fw": None}, "n": 1, "avg": None, "p": None, "oldest": None}]})
        r = self.server.post("/v1/shadows/aggregate", {**body, "maxGroups": 1.0}, token=self.token)  # a whole number
        self.assertEqual(r.json()["other"], {"groups": 2, "n": 2, "avg": 23.5, "p": {"50": 23.5, "100": 23.5},
                                             "oldest": "2026-11-27T03:00:00.000000000Z"})
        r = self.server.post("/v1/shadows/aggregate", {"metrics": {"n": "count()"}, **({"allowScan": True} if self.scan else {})}, token=self.token)
        self.assertEqual(r.json(), {"groups": [{"key": {}, "n": len(ALL)}]})
        for bad, field in [({"metrics": {"m": "median(reported/temp)"}}, "metrics.m"), ({}, "metrics"),
                           ({"metrics": {"n": "count()"}, "groupBy": ["nope"]}, "groupBy"),
                           ({"metrics": {"n": "count()"}, "groupBy": ["reported/fw", "reported/fw"]}, "groupBy"),
                           ({"metrics": {"n": "count()"}, "maxGroups": 0}, "maxGroups"),
                           ({"metrics": {"n": "count()"}, "maxGroups": 1.5}, "maxGroups"),
                           ({"metrics": {"n": "count()"}, "maxGroups": 1001}, "maxGroups"),
                           ({"metrics": {"n": "count()"}, "maxGroups": "2"}, "maxGroups")]:
            e = self.assertError(self.server.post("/v1/shadows/aggregate", bad, token=self.token), 400, "invalid_request")
            self.assertEqual(e["field"], field)
        self.assertError(self.server.post("/v1/shadows/aggregate", {"metrics": {"n": "count()"}, "filter": "eq("},
                                          token=self.token), 400, "invalid_filter")

    def test_bad_parameters(self):
        for params, field in [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"sort": "-reported/temp"}, "sort"),
                              ({"sort": "+name"}, "sort"), ({"fields": "reportd/x"}, "fields"), ({"order": "asc"}, "order"),
                              ({"allowScan": "yes"}, "allowScan"), ({"fields": "reported/a,reported/a"}, "fields"),
                              ({"fields": "reported/a,"}, "fields"), ({"fields": ",reported/a"}, "fields"),
                              ({"fields": ",".join(f"reported/f{i}" for i in range(33))}, "fields")]:
            e = self.assertError(self.search(filter='eq(thing,"office")', **params), 400, "invalid_request")
            self.assertEqual(e["field"], field, params)
        self.assertEqual(self.found(filter='eq(thing,"office")', sort="+thing,+name"), [("office", "main")])
        self.assertEqual(self.found(filter='eq(thing,"office")', fields=",".join(f"reported/f{i}" for i in range(32))),
                         [("office", "main")])
        # A '+' typed into the URL unencoded arrives as a space: taken as the '+' it was.
        r = self.server.get('/v1/shadows?filter=eq(thing,"office")&sort=+thing,+name', token=self.token)
        self.assertEqual((r.status_code, keys(r.json())), (200, [("office", "main")]), r.text)


class SqliteQueries(Queries, ApiTestCase):
    scan = {}

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        populate(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def shadowctl(self, command, *args):
        r = subprocess.run([SHADOWCTL, "--server", self.server.url, command, *args], capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def test_shadowctl_find(self):
        ctl = functools.partial(self.shadowctl, "find")
        self.assertEqual(ctl('like(thing,"plant-7/*")', "--count")[1], "4\n")
        code, out, _ = ctl('like(thing,"plant-7/*")', "--fields", "reported/fw,_pending", "--limit", "3")
        self.assertEqual(code, 0)
        lines = out.splitlines()
        self.assertEqual(lines[:3], ['plant-7/s0  main  reported/fw="1.2.0"  _pending=false',
                                     'plant-7/s1  aux  _pending=false',
                                     'plant-7/s1  main  reported/fw="1.2.0"  _pending=true'])
        self.assertTrue(lines[3].startswith("more: --cursor "))
        code, out, _ = ctl('like(thing,"plant-7/*")', "--fields", "reported/fw", "--limit", "3",
                           "--cursor", lines[3].split()[-1], "--json")
        self.assertEqual(keys(json.loads(out)), [("plant-7/s2", "main")])
        code, out, _ = ctl('eq(thing,"office")')
        self.assertEqual(out, "office  main  reported v1  desired v0  delta={}\n")
        code, _, err = ctl("eq(thing")
        self.assertEqual(code, 1)
        self.assertIn("invalid filter at offset 8", err)

    def test_shadowctl_aggregate(self):
        ctl = functools.partial(self.shadowctl, "aggregate")
        code, out, _ = ctl('like(thing,"plant-7/*")', "--group-by", "reported/fw", "--metric", "n=count()",
                           "--metric", "avg(reported/temp)", "--metric", "p=percentiles(reported/temp,50,100)")
        self.assertEqual(code, 0)
        self.assertEqual(out.splitlines(), [
            'reported/fw="1.2.0"  n=2  avg(reported/temp)=20.25  p={"50":19.5,"100":21}',
            'reported/fw="1.3.0"  n=1  avg(reported/temp)=23.5  p={"50":23.5,"100":23.5}',
            'reported/fw=null  n=1  avg(reported/temp)=null  p=null'])
        self.assertEqual(ctl()[1], f"count={len(ALL)}\n")
        code, out, _ = ctl("--group-by", "reported/fw", "--max-groups", "1", 'like(thing,"plant-7/*")')
        self.assertEqual(out, 'reported/fw="1.2.0"  count=2\nother (2 groups)  count=2\n')
        code, out, _ = ctl('eq(thing,"office")', "--metric", "max(_reportedVersion)", "--json")
        self.assertEqual(json.loads(out), {"groups": [{"key": {}, "max(_reportedVersion)": 1}]})
        code, _, err = ctl("--metric", "m=median(reported/temp)")
        self.assertEqual(code, 1)
        self.assertIn("invalid_request: metrics.m", err)

    def test_cursors_survive_a_restart(self):
        server = Server()
        try:
            populate(server)
            cursor = server.get("/v1/shadows", params={"limit": 3}).json()["cursor"]
            server.stop()
            server.start()
            r = server.get("/v1/shadows", params={"limit": 3, "cursor": cursor})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(keys(r.json()), ALL[3:])
        finally:
            server.close()

    def test_past_the_budget_the_query_is_refused_naming_a_field(self):
        with Server("--query-budget", "3") as server:
            populate(server)
            for path in ("/v1/shadows", "/v1/shadows/count"):
                e = self.assertError(server.get(path, params={"filter": "and(gt(reported/temp,20),exists(desired))"}),
                                     400, "query_too_expensive")
                self.assertEqual(e["field"], "reported/temp")
                self.assertIn("--query-budget", e["message"])
            # A full page stands even when the budget runs out looking for one more match.
            r = server.get("/v1/shadows", params={"filter": 'eq(reported/fw,"1.2.0")', "limit": 1})
            self.assertEqual(keys(r.json()), [("plant-7/s0", "main")])
            self.assertIn("cursor", r.json())
            # A thing prefix reads only its own things.
            r = server.get("/v1/shadows/count", params={"filter": 'and(like(thing,"plant-7/s1*"),gt(reported/temp,20))'})
            self.assertEqual(r.json(), {"count": 1})

    def test_a_declared_index_serves_what_the_budget_refused(self):
        with Server("--query-budget", "3") as server:
            populate(server)
            fw = {"filter": 'eq(reported/fw,"1.3.0")'}
            e = self.assertError(server.get("/v1/shadows", params=fw), 400, "query_too_expensive")
            self.assertEqual(e["field"], "reported/fw")
            self.assertIn("declare an index on reported/fw", e["message"])
            r = server.request("PUT", "/v1/index", json={"fields": ["reported/fw", "reported/temp@ts"]})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual([f["field"] for f in r.json()["fields"]], ["reported/fw", "reported/temp@ts"])
            ready = lambda: all(f["state"] == "ready" for f in server.get("/v1/index").json()["fields"])
            self.assertTrue(eventually(ready))
            self.assertEqual(server.get("/v1/index").json()["fields"][0], {"field": "reported/fw", "state": "ready", "indexed": 6})
            self.assertEqual(keys(server.get("/v1/shadows", params=fw).json()), [("plant-7/s2", "main"), ("plant-8/s0", "main")])
            # A write is seen by the next query: the index is written in the write's transaction.
            server.post(shadow_path("office", "main", "reported"), {"state": {"fw": "1.3.0"}})
            self.assertEqual(server.get("/v1/shadows/count", params=fw).json(), {"count": 3})
            stale = {"filter": 'lt(reported/temp@ts,"2026-11-27T02:30:00Z")'}
            self.assertEqual(keys(server.get("/v1/shadows", params=stale).json()), [("plant-7/s0", "main"), ("plant-7/s1", "main")])
            # The list survives a restart; a field left out is no longer indexed.
            server.stop()
            server.start()
            self.assertTrue(eventually(ready))
            self.assertEqual(server.get("/v1/shadows/count", params=fw).json(), {"count": 3})
            r = server.request("PUT", "/v1/index", json={"fields": ["reported/temp@ts"]})
            self.assertEqual([f["field"] for f in r.json()["fields"]], ["reported/temp@ts"])
            self.assertError(server.get("/v1/shadows", params=fw), 400, "query_too_expensive")

    def test_a_declared_name_finds_one_shadow_across_things(self):
        with Server("--query-budget", "3") as server:
            populate(server)
            server.post(shadow_path("plant-8/s0", "aux", "reported"), {"state": {"battery": 40}})
            aux = {"filter": 'eq(name,"aux")'}
            e = self.assertError(server.get("/v1/shadows", params=aux), 400, "query_too_expensive")
            self.assertEqual(e["field"], "name")
            self.assertIn("declare an index on name", e["message"])
            r = server.request("PUT", "/v1/index", json={"fields": ["name"]})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertTrue(eventually(lambda: server.get("/v1/index").json()["fields"][0]["state"] == "ready"))
            self.assertEqual(server.get("/v1/index").json()["fields"][0], {"field": "name", "state": "ready", "indexed": 7})
            self.assertEqual(keys(server.get("/v1/shadows", params=aux).json()), [("plant-7/s1", "aux"), ("plant-8/s0", "aux")])
            self.assertEqual(server.get("/v1/shadows/count", params={"filter": 'like(name,"a*")'}).json(), {"count": 2})
            self.assertEqual(server.delete(shadow_path("plant-7/s1", "aux")).status_code, 200)
            self.assertEqual(keys(server.get("/v1/shadows", params=aux).json()), [("plant-8/s0", "aux")])

    def test_sort_by_a_declared_field(self):
        with Server() as server:
            populate(server)
            e = self.assertError(server.get("/v1/shadows", params={"sort": "-reported/temp"}), 400, "invalid_request")
            self.assertEqual(e["field"], "sort")
            server.request("PUT", "/v1/index", json={"fields": ["reported/temp"]})
            self.assertTrue(eventually(lambda: server.get("/v1/index").json()["fields"][0]["state"] == "ready"))
            by_temp = [("plant-8/s0", "main"), ("plant-7/s2", "main"), ("plant-7/s1", "main"), ("office", "main"),
                       ("plant-7/s0", "main")]  # 21.0 and 21 tie: thing and name, reversed with '-'
            no_temp = [("plant-7/s1", "aux")]  # last, either way
            expected = by_temp + no_temp
            r = server.get("/v1/shadows", params={"sort": "-reported/temp", "fields": "reported/temp"})
            self.assertEqual(keys(r.json()), expected, r.text)
            self.assertEqual(keys(server.get("/v1/shadows", params={"sort": "reported/temp,+thing,+name"}).json()),
                             by_temp[::-1] + no_temp)
            paged, params = [], {"sort": "-reported/temp", "limit": 2, "filter": "exists(reported)"}  # pages cross into no_temp
            while True:
                body = server.get("/v1/shadows", params=params).json()
                paged += keys(body)
                if "cursor" not in body:
                    break
                params["cursor"] = body["cursor"]
            self.assertEqual(paged, expected)
            cursor = server.get("/v1/shadows", params={"sort": "-reported/temp", "limit": 1}).json()["cursor"]
            self.assertError(server.get("/v1/shadows", params={"limit": 1, "cursor": cursor}), 400, "invalid_request")
            for bad in ("reported/fw", "-thing", "reported/temp,name", "+", "delta/fw"):
                e = self.assertError(server.get("/v1/shadows", params={"sort": bad}), 400, "invalid_request")
                self.assertEqual(e["field"], "sort")

    def test_bad_index_declarations_are_refused_and_change_nothing(self):
        with Server() as server:
            for body in ({"fields": "reported/fw"}, {"fields": ["thing"]}, {"fields": ["delta/fw"]}, {"fields": [1]},
                         {"fields": ["reported/a", "reported/a"]}, {"field": []}, {},
                         {"fields": [f"reported/f{i}" for i in range(33)]}, {"fields": ["reported/a~2"]}):
                self.assertError(server.request("PUT", "/v1/index", json=body), 400, "invalid_request")
            self.assertError(server.request("PUT", "/v1/index", data="{"), 400, "invalid_json")
            self.assertEqual(server.get("/v1/index").json(), {"fields": []})
            self.assertEqual(server.post("/v1/index", {}).status_code, 405)

    def test_shadowctl_index(self):
        with Server() as server:
            ctl = lambda *a: subprocess.run([SHADOWCTL, "--server", server.url, "index", *a], capture_output=True,
                                            text=True, timeout=30)
            r = ctl("put", "reported/fw", "_modified")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([line.split()[0] for line in r.stdout.splitlines()], ["reported/fw", "_modified"])
            self.assertTrue(eventually(lambda: ctl("get").stdout == "reported/fw  ready  0 indexed\n_modified  ready  0 indexed\n"))
            self.assertEqual(json.loads(ctl("get", "--json").stdout)["fields"][1], {"field": "_modified", "state": "ready", "indexed": 0})
            r = ctl("put", "thing")
            self.assertEqual(r.returncode, 1)
            self.assertIn("invalid_request", r.stderr)
            self.assertEqual(ctl("put").stdout, "")  # no field: every index dropped
            self.assertEqual(json.loads(ctl("get", "--json").stdout), {"fields": []})

    def test_pages_end_at_max_page_bytes(self):
        with Server("--max-page-bytes", "1024") as server:
            for i in range(6):
                server.post(shadow_path(f"big-{i}", "main", "reported"), {"state": {"blob": "x" * 400}})
            sizes, cursor = [], None
            while True:
                r = server.get("/v1/shadows", params={"cursor": cursor} if cursor else {})
                sizes.append(len(r.json()["shadows"]))
                cursor = r.json().get("cursor")
                if not cursor:
                    break
            self.assertEqual(sum(sizes), 6)
            self.assertGreater(len(sizes), 1)
            self.assertTrue(all(n >= 1 for n in sizes))


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


class TokenQueries(ApiTestCase):
    """Every answer is limited to the things the token covers; a cursor is the token's own."""

    @classmethod
    def setUpClass(cls):
        fd, cls.token_file = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(f"{sha256('admin')} admin\n{sha256('plant7')} device plant-7/*\n{sha256('other7')} app plant-7/*\n")
            f.write(f"{sha256('office')} device office plant-8/s0\n")
        cls.server = Server("--tokens", cls.token_file)
        populate(cls.server, token="admin")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        os.unlink(cls.token_file)

    def get(self, token, path="/v1/shadows", **params):
        return self.server.get(path, params=params, token=token)

    def test_answers_hold_only_the_things_the_token_covers(self):
        self.assertEqual(keys(self.get("plant7").json()), [k for k in ALL if k[0].startswith("plant-7/")])
        self.assertEqual(keys(self.get("office").json()), [("office", "main"), ("plant-8/s0", "main")])
        self.assertEqual(keys(self.get("office", filter='like(thing,"plant-*")').json()), [("plant-8/s0", "main")])
        self.assertEqual(self.get("plant7", "/v1/shadows/count", filter='eq(thing,"office")').json(), {"count": 0})
        self.assertEqual(self.get("admin", "/v1/shadows/count").json(), {"count": len(ALL)})
        self.assertEqual(self.get("nobody").status_code, 401)

    def test_only_an_admin_declares_indexes(self):
        for token in ("plant7", "other7"):
            self.assertError(self.server.request("PUT", "/v1/index", json={"fields": []}, token=token), 403, "forbidden")
            self.assertError(self.server.get("/v1/index", token=token), 403, "forbidden")
        self.assertEqual(self.server.get("/v1/index", token="admin").json(), {"fields": []})

    def test_a_cursor_of_another_token_is_refused(self):
        cursor = self.get("plant7", limit=1).json()["cursor"]
        self.assertEqual(self.get("plant7", limit=1, cursor=cursor).status_code, 200)
        self.assertError(self.get("other7", limit=1, cursor=cursor), 400, "invalid_request")
        self.assertError(self.get("admin", limit=1, cursor=cursor), 400, "invalid_request")


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class DynamoDbQueries(Queries, ApiTestCase):
    scan = {"allowScan": "true"}

    @classmethod
    def setUpClass(cls):
        cls.server = dynamo_server(new_table())
        populate(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_reading_every_thing_needs_allow_scan(self):
        for path in ("/v1/shadows", "/v1/shadows/count"):
            e = self.assertError(self.server.get(path, params={"filter": 'eq(reported/fw,"1.3.0")'}), 400, "query_too_expensive")
            self.assertEqual(e["field"], "reported/fw")
            self.assertIn("allowScan=true", e["message"])
        self.assertEqual(self.count(filter='eq(reported/fw,"1.3.0")', allowScan="true"), 2)
        self.assertEqual(self.count(filter='and(like(thing,"plant-8/*"),eq(reported/fw,"1.3.0"))'), 1)



@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class DynamoDbIndexes(ApiTestCase):
    def test_two_servers_on_one_table_keep_and_use_one_declaration(self):
        table = new_table()
        with dynamo_server(table, "--query-budget", "3") as a, dynamo_server(table) as b:
            populate(a)
            fw = {"filter": 'eq(reported/fw,"1.3.0")'}
            self.assertError(b.get("/v1/shadows/count", params=fw), 400, "query_too_expensive")
            r = a.request("PUT", "/v1/index", json={"fields": ["reported/fw"]})
            self.assertEqual(r.status_code, 200, r.text)
            # The build waits until every shadowd writes by the declaration (docs/queries.md).
            for server in (a, b):
                self.assertTrue(eventually(lambda: server.get("/v1/index").json()["fields"][0]["state"] == "ready", timeout=90))
            self.assertEqual(a.get("/v1/index").json()["fields"], [{"field": "reported/fw", "state": "ready", "indexed": 6}])
            # Served by the index on either server, without allowScan, within a's budget of 3.
            self.assertEqual(keys(a.get("/v1/shadows", params=fw).json()), [("plant-7/s2", "main"), ("plant-8/s0", "main")])
            # A write through one is seen by the next query through the other.
            b.post(shadow_path("office", "main", "reported"), {"state": {"fw": "1.3.0"}})
            self.assertEqual(a.get("/v1/shadows/count", params=fw).json(), {"count": 3})
            b.post(shadow_path("office", "main", "reported"), {"state": {"fw": "1.4.0"}})
            self.assertEqual(b.get("/v1/shadows/count", params=fw).json(), {"count": 2})
            # Declared through b, the list replaces a's; a field left out is not served any more.
            r = b.request("PUT", "/v1/index", json={"fields": ["reported/temp"]})
            self.assertEqual([f["field"] for f in r.json()["fields"]], ["reported/temp"])
            self.assertTrue(eventually(lambda: [f["field"] for f in a.get("/v1/index").json()["fields"]] == ["reported/temp"]))
            self.assertError(a.get("/v1/shadows", params=fw), 400, "query_too_expensive")
            entries = lambda field: [i for i in ddb().scan(TableName=table)["Items"]
                                     if i["PK"]["S"].startswith("IX#") and f"#{field}#" in i["PK"]["S"]]
            self.assertEqual(entries("reported/fw"), [])  # deleted with the declaration
            self.assertTrue(eventually(lambda: b.get("/v1/index").json()["fields"][0]["state"] == "ready", timeout=90))
            self.assertTrue(entries("reported/temp"))
            self.assertEqual(b.get("/v1/shadows/count", params={"filter": 'eq(reported/fw,"1.3.0")', "allowScan": "true"}).json(),
                             {"count": 2})

    def test_fields_declared_before_absent_entries_are_built_again(self):
        table = new_table()
        with dynamo_server(table) as server:
            populate(server)
            server.request("PUT", "/v1/index", json={"fields": ["reported/temp"]})
            ready = lambda: server.get("/v1/index").json()["fields"][0]["state"] == "ready"
            self.assertTrue(eventually(ready, timeout=90))
            last = lambda: keys(server.get("/v1/shadows", params={"sort": "-reported/temp"}).json())[-1]
            self.assertEqual(last(), ("plant-7/s1", "aux"))  # it holds no temp
            # The table as an earlier version left it: no absent entries, the fields not marked.
            client = ddb()
            for item in client.scan(TableName=table)["Items"]:
                if item["PK"]["S"].startswith("IX#") and item["SK"]["S"].startswith("5"):
                    client.delete_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})
            self.assertEqual(last(), ("plant-7/s0", "main"))
            declaration = client.get_item(TableName=table, Key={"PK": {"S": "IX"}, "SK": {"S": "FIELDS"}})["Item"]
            fields = json.loads(declaration["fields"]["S"])
            for f in fields:
                del f["absentEntries"]
            declaration["fields"] = {"S": json.dumps(fields)}
            client.put_item(TableName=table, Item=declaration)
            server.stop()
            server.start()
            self.assertEqual(server.get("/v1/index").json()["fields"][0]["state"], "building")
            self.assertTrue(eventually(ready, timeout=90))
            self.assertEqual(last(), ("plant-7/s1", "aux"))


if __name__ == "__main__":
    unittest.main()
