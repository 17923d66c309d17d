"""Bulk jobs through shadowd (docs/jobs.md): start, dry run, progress, list, cancel, bad input,
limits, roles; resumed after a restart and after kill -9 with every target written exactly once;
on DynamoDB, taken over by a second shadowd when the first dies."""
import base64
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import unittest

import requests

from harness import SHADOWCTL, ApiTestCase, Server, eventually, shadow_path
from test_dynamodb import ENDPOINT, ddb, dynamo_server, new_table


def populate(server, things, state):
    """Reports `state` for each thing, 100 to a batch."""
    for i in range(0, len(things), 100):
        ops = [{"thing": t, "section": "reported", "state": state} for t in things[i:i + 100]]
        r = server.post("/v1/batch/update", {"operations": ops})
        assert r.status_code == 200 and "error" not in r.text, r.text


def finished(server, job_id, timeout=120.0):
    """The job once it has finished (a bound on liveness, not a timing test)."""
    def done():
        body = server.get(f"/v1/jobs/{job_id}").json()
        return body if body["status"] != "running" else None
    body = eventually(done, timeout)
    assert body, f"job {job_id} did not finish"
    return body


def events_with(server, thing, token):
    """The history events of thing/main written with clientToken `token`."""
    events = server.get(shadow_path(thing, "main", "history"), params={"limit": 1000}).json()["events"]
    return [e for e in events if e.get("clientToken") == token]


class Jobs(ApiTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-jobs", "2", "--max-job-targets", "50")
        populate(cls.server, [f"fleet-{i:02}" for i in range(30)], {"fw": "1.2.0", "on": True})
        populate(cls.server, [f"other-{i:02}" for i in range(60)], {"fw": "1.1.0"})

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def start(self, body, status=202):
        r = self.server.post("/v1/jobs", body)
        self.assertEqual(r.status_code, status, r.text)
        return r.json()

    def test_a_job_writes_each_matching_shadow_once_as_an_ordinary_desired_write(self):
        job = self.start({"filter": 'and(like(thing,"fleet-*"),eq(reported/fw,"1.2.0"))', "desired": {"fw": "1.3.0"}})
        self.assertEqual(job["targets"], 30)
        self.assertEqual(job["clientToken"], "job:" + job["id"])
        body = finished(self.server, job["id"])
        self.assertEqual((body["status"], body["succeeded"], body["failed"], body["skipped"]), ("succeeded", 30, 0, 0))
        self.assertIn("finishedAt", body)
        self.assertEqual(body["errors"], [])
        for i in range(30):
            shadow = self.server.get(shadow_path(f"fleet-{i:02}")).json()
            self.assertEqual(shadow["desired"]["state"], {"fw": "1.3.0"})
            self.assertEqual(shadow["delta"], {"fw": "1.3.0"})
            self.assertEqual(len(events_with(self.server, f"fleet-{i:02}", job["clientToken"])), 1)
        self.assertIn(job["id"], [j["id"] for j in self.server.get("/v1/jobs").json()["jobs"]])
        # The device reports the new firmware: acknowledged as for any desired write.
        self.server.post(shadow_path("fleet-00", "main", "reported"), {"state": {"fw": "1.3.0"}})
        self.assertEqual(self.server.get(shadow_path("fleet-00")).json()["desired"]["state"], {})

    def test_a_dry_run_counts_and_samples_and_writes_nothing(self):
        before = self.server.get("/v1/jobs", params={"limit": 1000}).json()["jobs"]
        r = self.server.post("/v1/jobs", {"filter": 'like(thing,"fleet-0*")', "delete": "desired", "dryRun": True})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.json(), {"dryRun": True, "targets": 10,
                                    "sample": [{"thing": f"fleet-0{i}", "name": "main"} for i in range(10)]})
        self.assertEqual(self.server.get("/v1/jobs", params={"limit": 1000}).json()["jobs"], before)

    def test_bad_requests_are_refused_before_anything_is_written(self):
        cases = [
            ({"desired": {"a": 1}}, "invalid_request", "filter"),
            ({"filter": "eq(thing,", "desired": {"a": 1}}, "invalid_filter", None),
            ({"filter": 'like(thing,"fleet-*")'}, "invalid_request", "desired"),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "delete": "desired"}, "invalid_request", "delete"),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": {"value": 1, "ts": "soon"}}}, "invalid_timestamp", None),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "ratePerSecond": 0}, "invalid_request", "ratePerSecond"),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "ratePerSecond": 1e9}, "invalid_request", "ratePerSecond"),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "abortAfterFailures": -1}, "invalid_request", "abortAfterFailures"),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "clientToken": "x" * 65}, "invalid_request", None),
            ({"filter": 'like(thing,"fleet-*")', "desired": {"a": 1}, "dryrun": True}, "invalid_request", "dryrun"),
            ({"filter": 'like(thing,"other-*")', "desired": {"a": 1}}, "invalid_request", "filter"),  # 60 > 50 targets
        ]
        for body, code, field in cases:
            with self.subTest(body=body):
                error = self.assertError(self.server.post("/v1/jobs", body), 400, code)
                if field:
                    self.assertEqual(error.get("field"), field)
        self.assertError(self.server.post("/v1/jobs", data=b"{"), 400, "invalid_json")
        error = self.assertError(self.server.post("/v1/jobs", {"filter": 'like(thing,"other-*")', "desired": {"a": 1}, "dryRun": True}), 400, "invalid_request")
        self.assertEqual(error["limit"], 50)
        for i in range(60):
            self.assertEqual(self.server.get(shadow_path(f"other-{i:02}")).json()["desired"]["version"], 0)

    def test_a_filter_matching_nothing_succeeds_with_no_targets(self):
        job = self.start({"filter": 'eq(thing,"nowhere")', "delete": "desired"})
        self.assertEqual((job["status"], job["targets"]), ("succeeded", 0))

    def test_cancel_stops_a_job_and_too_many_running_jobs_are_refused(self):
        slow = [self.start({"filter": 'like(thing,"fleet-1*")', "desired": {"slow": n}, "ratePerSecond": 0.2}) for n in (1, 2)]
        self.assertError(self.server.post("/v1/jobs", {"filter": 'like(thing,"fleet-2*")', "desired": {"a": 1}}), 429, "throttled")
        for job in slow:
            r = self.server.post(f"/v1/jobs/{job['id']}/cancel")
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["status"], "cancelled")
            body = finished(self.server, job["id"])
            self.assertEqual(body["status"], "cancelled")
            self.assertLess(body["succeeded"], 10)
        self.assertEqual(self.server.post(f"/v1/jobs/{slow[0]['id']}/cancel").json()["status"], "cancelled")

    def test_unknown_and_malformed_job_ids(self):
        self.assertError(self.server.get("/v1/jobs/0000000000000000-00000000"), 404, "not_found")
        self.assertError(self.server.post("/v1/jobs/0000000000000000-00000000/cancel"), 404, "not_found")
        for malformed in ("nope", "0123456789abcdef-0123-567", "-" * 25, "0123456789abcdef-0123456g"):
            self.assertError(self.server.get(f"/v1/jobs/{malformed}"), 400, "invalid_request")
        self.assertError(self.server.request("DELETE", "/v1/jobs"), 405, "method_not_allowed")

    def test_jobs_are_listed_newest_first_in_pages(self):
        for n in range(3):
            finished(self.server, self.start({"filter": 'eq(thing,"fleet-29")', "desired": {"page": n}})["id"])
        first = self.server.get("/v1/jobs", params={"limit": 2}).json()
        self.assertEqual(len(first["jobs"]), 2)
        self.assertEqual(first["jobs"][0]["errors"], [])  # each as GET /v1/jobs/{id} shows it
        second = self.server.get("/v1/jobs", params={"limit": 2, "cursor": first["cursor"]}).json()
        ids = [j["id"] for j in first["jobs"] + second["jobs"]]
        self.assertEqual(ids, sorted(ids, reverse=True))
        self.assertEqual(len(set(ids)), len(ids))


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Roles(ApiTestCase):
    def test_devices_may_not_start_jobs_and_scoped_apps_target_only_their_things(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as f:
            f.write(f"{sha256('admin')} admin\n{sha256('device')} device\n{sha256('scoped')} app house-*\n"
                    f"{sha256('barn')} app barn-*\n{sha256('one')} device house-1\n{sha256('star')} app *\n")
        server = Server("--tokens", f.name)
        try:
            for thing in ("house-1", "house-2", "barn-1"):
                server.post(shadow_path(thing, "main", "reported"), {"state": {"a": 1}}, token="admin")
            body = {"filter": "eq(reported/a,1)", "desired": {"b": 2}}
            self.assertError(server.post("/v1/jobs", body, token="device"), 403, "forbidden")
            r = server.post("/v1/jobs", body, token="scoped")
            self.assertEqual(r.status_code, 202, r.text)
            self.assertEqual(r.json()["targets"], 2)
            self.assertEqual(finished_with(server, r.json()["id"], "admin")["succeeded"], 2)
            self.assertEqual(server.get(shadow_path("barn-1"), token="admin").json()["desired"]["version"], 0)
            # A scoped token sees and cancels only the jobs started within its things: the
            # house-* job is the admin's and house-*'s, not barn-*'s nor house-1's alone.
            admin_job = server.post("/v1/jobs", {**body, "ratePerSecond": 0.5}, token="admin").json()
            scoped_job = r.json()
            listed = lambda token: [j["id"] for j in server.get("/v1/jobs", token=token).json()["jobs"]]
            self.assertEqual(listed("admin"), [admin_job["id"], scoped_job["id"]])
            self.assertEqual(listed("star"), [admin_job["id"], scoped_job["id"]])
            self.assertEqual(listed("scoped"), [scoped_job["id"]])
            self.assertEqual(listed("barn"), [])
            self.assertEqual(listed("one"), [])
            self.assertNotIn("scope", server.get(f"/v1/jobs/{scoped_job['id']}", token="scoped").json())
            for token, job in (("barn", scoped_job), ("scoped", admin_job), ("one", scoped_job)):
                self.assertError(server.get(f"/v1/jobs/{job['id']}", token=token), 404, "not_found")
            self.assertError(server.post(f"/v1/jobs/{admin_job['id']}/cancel", {}, token="scoped"), 404, "not_found")
            self.assertEqual(server.get(f"/v1/jobs/{admin_job['id']}", token="admin").json()["status"], "running")
            self.assertEqual(server.post(f"/v1/jobs/{admin_job['id']}/cancel", {}, token="admin").json()["status"], "cancelled")
        finally:
            server.close()
            os.unlink(f.name)

    def test_a_scoped_listing_examines_a_bounded_number_of_jobs(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as f:
            f.write(f"{sha256('admin')} admin\n{sha256('scoped')} app house-*\n")
        server = Server("--tokens", f.name)
        try:
            nothing = {"filter": "eq(reported/a,2)", "desired": {"b": 2}}  # finishes at once
            mine = [server.post("/v1/jobs", nothing, token="scoped").json()["id"] for _ in range(3)][::-1]
            for _ in range(1000):
                self.assertEqual(server.post("/v1/jobs", nothing, token="admin").status_code, 202)
            page = server.get("/v1/jobs", token="scoped").json()
            self.assertEqual(page["jobs"], [])  # the 1,000 newest are the admin's
            # Its cursor does not name the last job examined, which this token cannot see.
            admins = [j["id"] for j in server.get("/v1/jobs", params={"limit": 1000}, token="admin").json()["jobs"]]
            self.assertFalse(any(i.encode() in base64.urlsafe_b64decode(page["cursor"] + "===") for i in admins))
            page = server.get("/v1/jobs", params={"cursor": page["cursor"], "limit": 2}, token="scoped").json()
            self.assertEqual([j["id"] for j in page["jobs"]], mine[:2])
            page = server.get("/v1/jobs", params={"cursor": page["cursor"], "limit": 2}, token="scoped").json()
            self.assertEqual([j["id"] for j in page["jobs"]], mine[2:])
            self.assertNotIn("cursor", page)
            page = server.get("/v1/jobs", params={"limit": 1000}, token="admin").json()
            self.assertEqual(len(page["jobs"]), 1000)
            page = server.get("/v1/jobs", params={"cursor": page["cursor"]}, token="admin").json()
            self.assertEqual([j["id"] for j in page["jobs"]], mine)
            self.assertNotIn("cursor", page)
        finally:
            server.close()
            os.unlink(f.name)


def finished_with(server, job_id, token):
    def done():
        body = server.get(f"/v1/jobs/{job_id}", token=token).json()
        return body if body["status"] != "running" else None
    return eventually(done, 60)


class Resume(ApiTestCase):
    """A job interrupted by a restart or by kill -9 resumes and writes every target exactly once."""

    def check_exactly_once(self, server, things, job, desired_version=1):
        body = finished(server, job["id"], 300)
        self.assertEqual((body["status"], body["succeeded"], body["failed"], body["skipped"]),
                         ("succeeded", len(things), 0, 0), body)
        twice = [t for t in things if len(events_with(server, t, job["clientToken"])) != 1]
        self.assertEqual(twice, [], "targets not written exactly once")
        for t in things[:: max(1, len(things) // 50)]:
            self.assertEqual(server.get(shadow_path(t)).json()["desired"]["version"], desired_version)
        return body

    def interrupt(self, server, job, sig, at_least, ahead=0):
        """Stops the server with `sig` once the job has recorded `at_least` targets written and
        devices have acknowledged `ahead` more than it recorded, and restarts it."""
        def ready():
            recorded = server.get(f"/v1/jobs/{job['id']}").json()["succeeded"]
            if recorded < at_least or not ahead:
                return recorded >= at_least
            acknowledged = server.get("/v1/shadows/count", params={"filter": "eq(reported/go,1)"}).json()["count"]
            return acknowledged >= recorded + ahead
        self.assertTrue(eventually(ready, 120))
        server.stop(sig)
        server.start()

    def test_a_restart_resumes_a_running_job(self):
        server = Server()
        try:
            things = [f"r-{i:04}" for i in range(400)]
            populate(server, things, {"v": 1})
            job = server.post("/v1/jobs", {"filter": "eq(reported/v,1)", "desired": {"go": 1}, "ratePerSecond": 200}).json()
            self.interrupt(server, job, signal.SIGTERM, 50)
            self.assertTrue(any("listening" in l for l in server.log))
            body = self.check_exactly_once(server, things, job)
            self.assertGreater(body["succeeded"], 0)
        finally:
            server.close()

    def test_kill_9_twice_writes_no_target_twice_and_forgets_none(self):
        server = Server()
        stop = threading.Event()
        try:
            things = [f"k-{i:04}" for i in range(3000)]
            populate(server, things, {"v": 1})
            job = server.post("/v1/jobs", {"filter": "eq(reported/v,1)", "desired": {"go": 1}, "ratePerSecond": 600}).json()
            self.assertEqual(job["targets"], 3000)
            # Devices acknowledge the job's writes as they land, so that writing a target again
            # (a resumed job forgetting it had written it) would show as a second event.
            device = threading.Thread(target=acknowledge_until, args=(server, stop))
            device.start()
            # Killed while writes the job has not recorded yet are stored (and acknowledged).
            self.interrupt(server, job, signal.SIGKILL, 300, ahead=100)
            self.interrupt(server, job, signal.SIGKILL, 1500, ahead=100)
            finished(server, job["id"], 300)
            acknowledged = lambda: server.get("/v1/shadows/count", params={"filter": "exists(delta/go)"}).json()["count"] == 0
            self.assertTrue(eventually(acknowledged, 60))
            stop.set()
            device.join()
            self.check_exactly_once(server, things, job, desired_version=2)  # the job's write, the acknowledgement
        finally:
            stop.set()
            server.close()


def acknowledge_until(server, stop, allow_scan=False):
    """Reports go=1 for every shadow with go pending in desired, until `stop` (the server may be
    down meanwhile, and comes back on another port). `allow_scan`: the search may scan (DynamoDB)."""
    session = requests.Session()
    while not stop.is_set():
        try:
            if not acknowledge_pending(session, server.url, allow_scan):
                stop.wait(0.01)
        except (requests.RequestException, ValueError):
            stop.wait(0.05)


def acknowledge_pending(session, url, allow_scan=False):
    """Reports go=1 for every shadow (up to 1,000) with go pending in desired; returns how many."""
    params = {"filter": "exists(delta/go)", "fields": "thing", "limit": 1000}
    if allow_scan:
        params["allowScan"] = "true"
    r = session.get(url + "/v1/shadows", params=params, timeout=10)
    pending = [s["thing"] for s in r.json()["shadows"]] if r.status_code == 200 else []
    for i in range(0, len(pending), 100):
        ops = [{"thing": t, "section": "reported", "state": {"go": 1}} for t in pending[i:i + 100]]
        session.post(url + "/v1/batch/update", json={"operations": ops}, timeout=10)
    return len(pending)


class Cli(ApiTestCase):
    """shadowctl jobs start|get|list|cancel."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        populate(cls.server, [f"cli-{i}" for i in range(12)], {"fw": "1.0"})

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def ctl(self, *args, stdin=None):
        return subprocess.run([SHADOWCTL, "--server", self.server.url, *args], input=stdin, capture_output=True,
                              text=True, timeout=120)

    def test_start_waits_for_the_job_and_get_list_cancel_show_it(self):
        r = self.ctl("jobs", "start", 'like(thing,"cli-*")', "--dry-run", "--desired", '{"fw":"2.0"}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("12 targets\n  cli-0  main\n"), r.stdout)
        r = self.ctl("jobs", "start", 'like(thing,"cli-*")', "--desired", "-", "--rate", "100", "--wait", stdin='{"fw":"2.0"}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^[0-9a-f]{16}-[0-9a-f]{8}  succeeded  12 targets: 12 succeeded, 0 failed, 0 skipped\n")
        self.assertIn('desired {"fw":"2.0"}', r.stdout)
        self.assertNotIn("[", r.stderr)  # no progress bar when stderr is not a terminal
        job_id = r.stdout.split()[0]
        r = self.ctl("--json", "jobs", "get", job_id)
        self.assertEqual(json.loads(r.stdout)["succeeded"], 12)
        r = self.ctl("jobs", "list", "--limit", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(job_id + "  succeeded"), r.stdout)
        slow = self.ctl("--json", "jobs", "start", 'like(thing,"cli-*")', "--delete-desired", "--rate", "0.2")
        slow_id = json.loads(slow.stdout)["id"]
        r = self.ctl("jobs", "cancel", slow_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("cancelled", r.stdout)
        r = self.ctl("jobs", "get", slow_id, "--wait")
        self.assertEqual(r.returncode, 1)  # waited for, and it did not succeed
        self.assertIn("cancelled", r.stdout)

    def test_mistakes_are_reported_with_a_nonzero_exit_status(self):
        r = self.ctl("jobs", "start", 'like(thing,"cli-*")')
        self.assertEqual(r.returncode, 1)
        self.assertIn("--desired STATE or --delete-desired", r.stderr)
        r = self.ctl("jobs", "start", "eq(thing,", "--desired", "{}")
        self.assertEqual(r.returncode, 1)
        self.assertIn("invalid_filter", r.stderr)
        r = self.ctl("jobs", "get", "0000000000000000-00000000")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not_found", r.stderr)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class OnDynamoDb(ApiTestCase):
    """Two shadowd on one table: a job started on A, A killed with kill -9 mid-job, B takes the
    job over once A's lease has expired and ends it with every target written exactly once."""

    def test_a_job_whose_runner_died_is_taken_over_by_another_shadowd(self):
        table = new_table()
        a = dynamo_server(table, "--job-lease", "6s")
        b = dynamo_server(table, "--job-lease", "6s")
        stop = threading.Event()
        device = threading.Thread(target=acknowledge_until, args=(b, stop, True))
        try:
            things = [f"d-{i:04}" for i in range(600)]
            populate(a, things, {"v": 1})
            # The selection scans the table before the answer: slow on DynamoDB Local under load.
            job = a.session.post(a.url + "/v1/jobs", json={"filter": "eq(reported/v,1)", "desired": {"go": 1},
                                                           "ratePerSecond": 100}, timeout=120).json()
            self.assertEqual(job["targets"], 600, job)
            self.assertEqual(b.get(f"/v1/jobs/{job['id']}").json()["status"], "running")

            def recorded():
                return a.get(f"/v1/jobs/{job['id']}").json()["succeeded"] >= 100
            self.assertTrue(eventually(recorded, 120))
            a.stop(signal.SIGKILL)  # mid-job: it has written targets it has not recorded yet
            # Devices acknowledge every write A made before B takes the job over (the lease is
            # 6 s), then each of B's as it lands: writing a target again would show as a second
            # history event.
            acknowledge_pending(requests.Session(), b.url, True)
            device.start()
            body = finished(b, job["id"], 300)
            self.assertEqual((body["status"], body["succeeded"], body["failed"], body["skipped"]),
                             ("succeeded", 600, 0, 0), body)
            pending = lambda: b.get("/v1/shadows/count", params={"filter": "exists(delta/go)", "allowScan": "true"}).json()["count"] == 0
            self.assertTrue(eventually(pending, 60))
            stop.set()
            device.join()
            twice = [t for t in things if len(events_with(b, t, job["clientToken"])) != 1]
            self.assertEqual(twice, [], "targets not written exactly once")
            # The job's item as AWS's own client reads it: run twice (A, then B), finished, and
            # out of the index of active jobs.
            item = ddb().get_item(TableName=table, Key={"PK": {"S": "JB#"}, "SK": {"S": job["id"]}}, ConsistentRead=True)["Item"]
            self.assertEqual(json.loads(item["progress"]["S"])["runs"], 2)
            self.assertEqual(item["active"], {"BOOL": False})
            self.assertNotIn("GSI1PK", item)
            pages = ddb().query(TableName=table, KeyConditionExpression="PK = :pk",
                                ExpressionAttributeValues={":pk": {"S": "JT#" + job["id"]}})["Items"]
            self.assertEqual(pages, [], "a finished job's target pages are deleted")
        finally:
            stop.set()
            if device.is_alive():
                device.join()
            a.close()
            b.close()
            ddb().delete_table(TableName=table)

    def test_max_jobs_holds_across_the_shadowd_on_a_table(self):
        """Two jobs started at once, one on each shadowd, each with --max-jobs 1: one runs, the
        other is refused with 429, whichever shadowd it went to; once the running one ends
        another may start. An id left of a job that no longer runs takes no place."""
        table = new_table()
        a = dynamo_server(table, "--max-jobs", "1")
        b = dynamo_server(table, "--max-jobs", "1")
        try:
            populate(a, [f"m-{i}" for i in range(4)], {"v": 1})
            # The id of a job that no longer runs, as a shadowd from before the running jobs'
            # item leaves it when it finishes a job: the first creation refused drops it.
            ddb().put_item(TableName=table, Item={"PK": {"S": "JR#"}, "SK": {"S": "ids"},
                                                  "ids": {"SS": ["0000000000000000-00000000"]}})
            answers = {}

            def start(server):
                answers[server.url] = server.session.post(server.url + "/v1/jobs", timeout=120, json={
                    "filter": 'like(thing,"m-*")', "desired": {"slow": 1}, "ratePerSecond": 0.2})
            threads = [threading.Thread(target=start, args=(s,)) for s in (a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            codes = sorted(r.status_code for r in answers.values())
            self.assertEqual(codes, [202, 429], [r.text for r in answers.values()])
            [running] = [r.json() for r in answers.values() if r.status_code == 202]
            # The running jobs' item as AWS's own client reads it.
            item = ddb().get_item(TableName=table, Key={"PK": {"S": "JR#"}, "SK": {"S": "ids"}}, ConsistentRead=True)["Item"]
            self.assertEqual(item["ids"], {"SS": [running["id"]]})
            self.assertEqual(b.post(f"/v1/jobs/{running['id']}/cancel").status_code, 200)
            self.assertEqual(finished(b, running["id"])["status"], "cancelled")
            item = ddb().get_item(TableName=table, Key={"PK": {"S": "JR#"}, "SK": {"S": "ids"}}, ConsistentRead=True)["Item"]
            self.assertNotIn("ids", item)
            r = b.post("/v1/jobs", {"filter": 'like(thing,"m-*")', "delete": "desired"})
            self.assertEqual(r.status_code, 202, r.text)
            self.assertEqual(finished(b, r.json()["id"])["status"], "succeeded")
        finally:
            a.close()
            b.close()
            ddb().delete_table(TableName=table)


if __name__ == "__main__":
    unittest.main()
