"""shadowd on AWS's DynamoDB Local: create-table and the item layout checked with boto3 (both
ways, both layouts), two servers on one table, and faults injected by a proxy."""
import http.client
import http.server
import json
import os
import random
import re
import subprocess
import threading
import time
import unittest
import uuid

import boto3

from harness import SHADOWD, Server, checked_session, eventually, shadow_path

ENDPOINT = os.environ.get("DS_DYNAMODB_ENDPOINT", "")
if not ENDPOINT and os.environ.get("DS_REQUIRE_DYNAMODB"):
    raise RuntimeError("DS_REQUIRE_DYNAMODB is set but DS_DYNAMODB_ENDPOINT is not")


def ddb():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local")


def new_table(time_index=True):
    """A table in shadowd's layout, made with boto3 (streams off: DynamoDB Local decays with them);
    without `time_index`, as shadowd made them before history's time index (GSI2)."""
    name = "e2e-" + uuid.uuid4().hex[:12]
    keys = ("PK", "SK", "GSI1PK", "GSI1SK") + (("GSI2PK", "GSI2SK") if time_index else ())
    index = lambda name, pk, sk, attributes: {
        "IndexName": name, "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": attributes}}
    kw = dict(TableName=name, BillingMode="PAY_PER_REQUEST",
              AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in keys],
              KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
              GlobalSecondaryIndexes=[index("GSI1", "GSI1PK", "GSI1SK", ["liveCount"])] +
              ([index("GSI2", "GSI2PK", "GSI2SK", ["timestamp", "expires", "event"])] if time_index else []))
    ddb().create_table(**kw)
    return name


def dynamo_server(table, *args, endpoint=None):
    return Server("--store", f"dynamodb:{table}", "--dynamodb-endpoint", endpoint or ENDPOINT, *args)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class CreateTable(unittest.TestCase):
    def test_create_table_makes_the_documented_table(self):
        name = "ct-" + uuid.uuid4().hex[:12]
        r = subprocess.run([SHADOWD, "dynamodb", "create-table", "--table", name, "--dynamodb-endpoint", ENDPOINT],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = ddb().describe_table(TableName=name)["Table"]
        self.assertEqual(t["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        self.assertEqual([(k["AttributeName"], k["KeyType"]) for k in t["KeySchema"]], [("PK", "HASH"), ("SK", "RANGE")])
        gsi = {g["IndexName"]: g for g in t["GlobalSecondaryIndexes"]}
        self.assertEqual(sorted(gsi), ["GSI1", "GSI2"])
        self.assertEqual([k["AttributeName"] for k in gsi["GSI1"]["KeySchema"]], ["GSI1PK", "GSI1SK"])
        self.assertEqual([k["AttributeName"] for k in gsi["GSI2"]["KeySchema"]], ["GSI2PK", "GSI2SK"])
        self.assertEqual(sorted(gsi["GSI2"]["Projection"]["NonKeyAttributes"]), ["event", "expires", "timestamp"])
        self.assertEqual(t["StreamSpecification"], {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
        ttl = ddb().describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        self.assertEqual(ttl["AttributeName"], "ttl")
        again = subprocess.run([SHADOWD, "dynamodb", "create-table", "--table", name, "--dynamodb-endpoint", ENDPOINT],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(again.returncode, 1)
        self.assertIn("ResourceInUse", again.stderr)
        ddb().delete_table(TableName=name)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class Layout(unittest.TestCase):
    def setUp(self):
        self.table = new_table()

    def tearDown(self):
        ddb().delete_table(TableName=self.table)

    def test_separate_items_read_by_boto3(self):
        server = dynamo_server(self.table)
        try:
            thing = "My House#Basement"
            server.post(shadow_path(thing, "main", "desired"), {"state": {"sp": 22}})
            server.post(shadow_path(thing, "main", "reported"),
                        {"state": {"temp": {"value": 21.5, "ts": "2025-01-22T13:22:26.5+01:00"}, "big": 18446744073709551615,
                                   "list": [1, "two", None, True], "nested": {"e": {}}}, "clientToken": "dev-1", "tz": "UTC"})
            item = ddb().get_item(TableName=self.table, Key={"PK": {"S": "DS#" + thing}, "SK": {"S": "DSR#main"}},
                                  ConsistentRead=True)["Item"]
            self.assertEqual(item["version"], {"N": "1"})
            self.assertEqual(item["clientToken"], {"S": "dev-1"})
            self.assertEqual(item["deleted"], {"BOOL": False})
            self.assertRegex(item["writeId"]["S"], r"^[0-9a-f]{32}$")
            self.assertGreater(int(item["timestamp"]["N"]), 1_700_000_000 * 10**9)
            state = item["state"]["M"]
            self.assertEqual(state["temp"], {"M": {"value": {"N": "21.5"}, "ts": {"S": "2025-01-22T13:22:26.5+01:00"}}})
            self.assertEqual(state["big"], {"N": "18446744073709551615"})
            self.assertEqual(state["list"], {"L": [{"N": "1"}, {"S": "two"}, {"NULL": True}, {"BOOL": True}]})
            self.assertEqual(state["nested"], {"M": {"e": {"M": {}}}})
            desired = ddb().get_item(TableName=self.table, Key={"PK": {"S": "DS#" + thing}, "SK": {"S": "DSD#main"}},
                                     ConsistentRead=True)["Item"]
            self.assertEqual(desired["state"], {"M": {"sp": {"N": "22"}}})
            index = ddb().get_item(TableName=self.table, Key={"PK": {"S": "DS#" + thing}, "SK": {"S": "T#"}})["Item"]
            self.assertRegex(index["GSI1PK"]["S"], r"^THINGS#([0-9]|1[0-5])$")
            self.assertEqual(index["GSI1SK"], {"S": thing})
            history = ddb().query(TableName=self.table, KeyConditionExpression="PK = :pk",
                                  ExpressionAttributeValues={":pk": {"S": f"DH#{thing}#main"}})["Items"]
            self.assertEqual(len(history), 2)
            for h in history:
                self.assertRegex(h["SK"]["S"], r"^\d{20}#[RDCX]\d+$")
                self.assertEqual(h["GSI2SK"], h["SK"])  # history's time index
                self.assertRegex(h["GSI2PK"]["S"], r"^HT#[0-3]$")
                self.assertEqual(json.loads(h["event"]["S"])["thing"], thing)
        finally:
            server.close()

    def test_items_written_by_boto3_are_read_by_shadowd(self):
        client = ddb()
        client.put_item(TableName=self.table, Item={
            "PK": {"S": "DS#boto"}, "SK": {"S": "DSR#main"}, "version": {"N": "3"}, "timestamp": {"N": "1737548546000000000"},
            "clientToken": {"S": "from-boto3"}, "writeId": {"S": "w"}, "deleted": {"BOOL": False},
            "state": {"M": {"temp": {"M": {"value": {"N": "21.25"}, "ts": {"N": "1737548546"}}}, "mode": {"S": "eco"},
                            "flags": {"L": [{"BOOL": False}]}}}})
        client.put_item(TableName=self.table, Item={
            "PK": {"S": "DS#boto"}, "SK": {"S": "T#"}, "GSI1PK": {"S": "THINGS#0"}, "GSI1SK": {"S": "boto"},
            "liveCount": {"N": "1"}})
        server = dynamo_server(self.table)
        try:
            body = server.get(shadow_path("boto")).json()
            self.assertEqual(body["reported"]["version"], 3)
            self.assertEqual(body["reported"]["clientToken"], "from-boto3")
            self.assertEqual(body["reported"]["timestamp"], "2025-01-22T12:22:26.000000000Z")
            self.assertEqual(body["reported"]["state"], {"temp": {"value": 21.25, "ts": 1737548546}, "mode": "eco",
                                                         "flags": [False]})
            r = server.post(shadow_path("boto", "main", "reported"), {"state": {"temp": {"value": 22, "ts": 1737548547}}})
            self.assertEqual(r.json()["reported"]["version"], 4)
            self.assertIn("boto", server.get("/v1/things").json()["things"])
        finally:
            server.close()

    def test_combined_item_holds_both_sections_under_one_version(self):
        server = dynamo_server(self.table, "--layout", "combined")
        try:
            server.post(shadow_path("comb", "main", "reported"), {"state": {"a": 1}})
            r = server.post(shadow_path("comb", "main", "desired"), {"state": {"b": 2}}).json()
            self.assertEqual((r["reported"]["version"], r["desired"]["version"]), (2, 2))
            item = ddb().get_item(TableName=self.table, Key={"PK": {"S": "DS#comb"}, "SK": {"S": "DSC#main"}},
                                  ConsistentRead=True)["Item"]
            self.assertEqual(item["version"], {"N": "2"})
            self.assertEqual(item["reported"], {"M": {"a": {"N": "1"}}})
            self.assertEqual(item["desired"], {"M": {"b": {"N": "2"}}})
            self.assertIn("reportedMeta", item)  # written by the write before: metadata of its own
            self.assertNotIn("desiredMeta", item)
            body = server.get(shadow_path("comb")).json()
            self.assertLess(body["reported"]["timestamp"], body["desired"]["timestamp"])
            for attribute in ("timestamp", "writeId"):
                self.assertIn(attribute, item)
        finally:
            server.close()

    def test_combined_items_written_by_boto3_keep_the_section_a_write_leaves_alone(self):
        ddb().put_item(TableName=self.table, Item={
            "PK": {"S": "DS#cboto"}, "SK": {"S": "DSC#main"}, "version": {"N": "5"},
            "timestamp": {"N": "1737548546000000000"}, "writeId": {"S": "w5"},
            "reported": {"M": {"temp": {"N": "21.5"}}},  # no reportedMeta: the item's metadata is its own
            "desired": {"M": {"mode": {"S": "eco"}, "fan": {"L": [{"N": "1"}, {"BOOL": True}]}}},
            "desiredMeta": {"M": {"timestamp": {"N": "1737548500000000000"}, "clientToken": {"S": "app-1"},
                                  "tz": {"S": "Europe/Oslo"}, "deleted": {"BOOL": False}}}})
        server = dynamo_server(self.table, "--layout", "combined")
        try:
            before = server.get(shadow_path("cboto")).json()
            self.assertEqual(before["reported"]["state"], {"temp": 21.5})
            self.assertEqual(before["reported"]["timestamp"], "2025-01-22T12:22:26.000000000Z")
            self.assertEqual(before["reported"]["version"], 5)
            r = server.post(shadow_path("cboto", "main", "reported"), {"state": {"temp": 22}})
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual((r.json()["reported"]["version"], r.json()["desired"]["version"]), (6, 6))
            body = server.get(shadow_path("cboto")).json()
            self.assertEqual(body["reported"]["state"], {"temp": 22})
            self.assertEqual(body["desired"]["state"], {"mode": "eco", "fan": [1, True]})
            self.assertEqual(body["desired"]["clientToken"], "app-1")
            self.assertEqual(body["desired"]["timestamp"], "2025-01-22T12:21:40.000000000Z")
            item = ddb().get_item(TableName=self.table, Key={"PK": {"S": "DS#cboto"}, "SK": {"S": "DSC#main"}},
                                  ConsistentRead=True)["Item"]
            self.assertEqual(item["version"], {"N": "6"})
            self.assertEqual(item["desired"], {"M": {"mode": {"S": "eco"}, "fan": {"L": [{"N": "1"}, {"BOOL": True}]}}})
            self.assertEqual(item["desiredMeta"]["M"]["tz"], {"S": "Europe/Oslo"})
            self.assertEqual(item["reported"], {"M": {"temp": {"N": "22"}}})
            self.assertNotIn("reportedMeta", item)  # written now: the item's timestamp and writeId are its own
        finally:
            server.close()


class TwoServers(unittest.TestCase):
    def test_two_servers_on_one_table_lose_no_update(self):
        table = new_table()
        servers = [dynamo_server(table), dynamo_server(table)]
        try:
            acknowledged = {f"shared-{i}": [] for i in range(3)}
            lock = threading.Lock()

            def writer(w):
                session = checked_session()
                for i in range(25):
                    thing = f"shared-{i % 3}"
                    key = f"w{w}-{i}"
                    r = session.post(servers[(w + i) % 2].url + shadow_path(thing, "main", "reported"),
                                     json={"state": {key: i}}, timeout=60)
                    self.assertEqual(r.status_code, 200, r.text)
                    with lock:
                        acknowledged[thing].append(key)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for thing, keys in acknowledged.items():
                body = servers[0].get(shadow_path(thing)).json()
                self.assertEqual(sorted(body["reported"]["state"]), sorted(keys))
                self.assertEqual(body["reported"]["version"], len(keys))
        finally:
            for s in servers:
                s.close()
            ddb().delete_table(TableName=table)


WRITE_FAULTS = {"throttle": 0.08, "500": 0.06, "drop-before": 0.04, "drop-after": 0.04, "late": 0.03}


class FaultyProxy(http.server.ThreadingHTTPServer):
    """Forwards to DynamoDB Local, injecting faults at random (seeded) with the given rates:
    throttling answers, 500s, connections dropped before or after forwarding, answers delayed
    past the timeout, and BatchGetItem answers that leave keys unprocessed."""

    daemon_threads = True

    def __init__(self, upstream, seed, delay=1.5, rates=None):
        self.upstream = upstream.replace("http://", "")
        self.rng = random.Random(seed)
        self.delay = delay
        self.rates = WRITE_FAULTS if rates is None else rates
        self.faults = {}
        self.lock = threading.Lock()
        self.conflict_once = False  # every transaction first cancelled as if by a conflict (conflicts())
        self.transactions = set()
        self.hold_key = None  # the next PutItem naming it is held (held())
        self.held = False
        self.looked = threading.Event()  # the shadow was read while a PutItem was held
        self.landed = threading.Event()  # the held PutItem was forwarded
        super().__init__(("127.0.0.1", 0), FaultyHandler)

    def conflicts(self, body):
        """With conflict_once: the kind of transaction this is the first sending of, to cancel."""
        with self.lock:
            if not self.conflict_once or body in self.transactions:
                return None
            self.transactions.add(body)
            text = body.decode()
            kind = ("write" if '"DH#' in text else "job" if '"JR#"' in text else
                    "declaration" if '"IX#G' in text else "entries" if '"IX#' in text else "other")
            self.faults[kind] = self.faults.get(kind, 0) + 1
            return kind

    def holds(self, target, body):
        """Whether this is the PutItem to hold: it lands only once the shadow has been read after
        shadowd gave up waiting for it, and PutItems after it wait until it has landed."""
        with self.lock:
            if self.held or not self.hold_key or not target.endswith(".PutItem") or self.hold_key not in body:
                return False
            self.held = True
            return True

    def pick(self, target):
        with self.lock:
            roll, total = self.rng.random(), 0.0
            for fault, rate in self.rates.items():
                total += rate
                if roll < total and (fault != "unprocessed" or target.endswith("BatchGetItem")):
                    self.faults[fault] = self.faults.get(fault, 0) + 1
                    return fault
            return None

    def leave_unprocessed(self, data):
        """Moves part of a BatchGetItem answer into UnprocessedKeys, as DynamoDB may."""
        answer = json.loads(data)
        for table, items in answer.get("Responses", {}).items():
            keep = [item for item in items if self.rng.random() < 0.5]
            dropped = [{"PK": item["PK"], "SK": item["SK"]} for item in items if item not in keep]
            answer["Responses"][table] = keep
            if dropped:
                answer.setdefault("UnprocessedKeys", {})[table] = {"Keys": dropped, "ConsistentRead": True}
        return json.dumps(answer).encode()


class FaultyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("X-Amz-Target", "").endswith("TransactWriteItems") and self.server.conflicts(body):
            items = len(json.loads(body)["TransactItems"])
            return self.answer(400, {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
                "CancellationReasons": [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}] * items})
        target = self.headers.get("X-Amz-Target", "")
        if self.server.holds(target, body):
            self.server.looked.wait(30)
            self.forward(body)  # shadowd no longer waits for this answer
            self.server.landed.set()
            self.close_connection = True
            return
        if self.server.held and target.endswith(".PutItem"):
            self.server.landed.wait(30)
        fault = self.server.pick(target)
        if fault == "drop-before":
            self.close_connection = True
            return
        if fault == "throttle":
            return self.answer(400, {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"})
        if fault == "500":
            return self.answer(500, {"__type": "InternalServerError", "message": "boom"})
        response, data = self.forward(body)
        if self.server.held and not target.endswith(".PutItem") and self.server.hold_key in body:
            self.server.looked.set()
        if fault == "drop-after":  # applied, but the client never learns
            self.close_connection = True
            return
        if fault == "late":
            time.sleep(self.server.delay)
        if fault == "unprocessed" and response.status == 200:
            data = self.server.leave_unprocessed(data)
        try:
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # a late answer: the client has given up

    def forward(self, body):
        conn = http.client.HTTPConnection(self.server.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request("POST", self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response, data

    def answer(self, status, body):
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class Faults(unittest.TestCase):
    def test_no_lost_or_duplicated_write_and_versions_stay_sequential(self):
        table = new_table()
        proxy = FaultyProxy(ENDPOINT, seed=7)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        server = dynamo_server(table, "--dynamodb-timeout-ms", "1000", "--max-attempts", "20",
                               endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        try:
            acknowledged, failed = [], []
            for i in range(120):
                r = server.post(shadow_path(f"faulty-{i % 4}", "main", "reported"), {"state": {f"k{i}": i}})
                (acknowledged if r.status_code == 200 else failed).append((i, r.status_code))
            self.assertGreater(len(acknowledged), 100, failed)
            self.assertGreaterEqual(sum(proxy.faults.values()), 20, proxy.faults)
            for fault in ("throttle", "500", "drop-before", "drop-after", "late"):
                self.assertIn(fault, proxy.faults)
            # Read straight from DynamoDB Local, past the proxy.
            client = ddb()
            for t in range(4):
                item = client.get_item(TableName=table, Key={"PK": {"S": f"DS#faulty-{t}"}, "SK": {"S": "DSR#main"}},
                                       ConsistentRead=True)["Item"]
                keys = set(item["state"]["M"])
                mine = {f"k{i}" for i, _ in acknowledged if i % 4 == t}
                self.assertTrue(mine <= keys, f"lost: {mine - keys}")
                events = client.query(TableName=table, KeyConditionExpression="PK = :pk",
                                      ExpressionAttributeValues={":pk": {"S": f"DH#faulty-{t}#main"}}, ConsistentRead=True)["Items"]
                versions = sorted(int(re.search(r"#R(\d+)$", e["SK"]["S"]).group(1)) for e in events)
                self.assertEqual(versions, list(range(1, int(item["version"]["N"]) + 1)), "versions are not sequential")
                added = [c["path"] for e in events for c in json.loads(e["event"]["S"])["reported"]["changes"]]
                self.assertEqual(len(added), len(set(added)), "a write was applied twice")
                self.assertEqual(set(p[1:] for p in added), keys)
        finally:
            server.close()
            proxy.shutdown()
            ddb().delete_table(TableName=table)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class LateLanding(unittest.TestCase):
    def test_a_write_landing_after_shadowd_gave_up_on_it_is_not_called_a_conflict(self):
        """With --history false and every write reading its shadow first (--cache-entries 0), a
        write is one conditional PutItem, sent again when its outcome is unknown. Its first sending lands only after shadowd timed out and read the shadow (which
        did not show it yet): the second then fails its condition on the write itself, which is
        stored, so the pinned write answers 200, not 409."""
        table = new_table()
        proxy = FaultyProxy(ENDPOINT, seed=1, rates={})
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        server = dynamo_server(table, "--history", "false", "--cache-entries", "0", "--dynamodb-timeout-ms", "1000",
                               endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        try:
            path = shadow_path("late-landing", "main", "reported")
            self.assertEqual(server.post(path, {"state": {"a": 1}}).status_code, 200)
            proxy.hold_key = b'"DS#late-landing"'
            r = server.post(path, {"state": {"a": 2}, "version": 1})
            self.assertTrue(proxy.held and proxy.looked.is_set() and proxy.landed.is_set())
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(r.json()["reported"]["version"], 2)
            item = ddb().get_item(TableName=table, Key={"PK": {"S": "DS#late-landing"}, "SK": {"S": "DSR#main"}},
                                  ConsistentRead=True)["Item"]
            self.assertEqual((item["version"]["N"], item["state"]["M"]["a"]["N"]), ("2", "2"))
        finally:
            server.close()
            proxy.shutdown()
            ddb().delete_table(TableName=table)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class TransactionConflicts(unittest.TestCase):
    def test_every_transaction_cancelled_by_a_conflict_goes_through_when_sent_again(self):
        """Each transaction is first answered as DynamoDB answers one that conflicts with another
        (TransactionCanceledException, every item TransactionConflict), then goes through when
        sent again: an index declaration, the entries built for shadows already there, a job's
        creation and end, and the job's shadow writes."""
        table = new_table()
        direct = dynamo_server(table)
        proxy = FaultyProxy(ENDPOINT, seed=1, rates={})
        proxy.conflict_once = True
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        server = dynamo_server(table, endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        try:
            for i in range(5):
                direct.post(shadow_path(f"conflict-{i}", "main", "reported"), {"state": {"fw": "1.0"}})
            r = server.request("PUT", "/v1/index", json={"fields": ["reported/fw"]})
            self.assertEqual(r.status_code, 200, r.text)
            ready = lambda: server.get("/v1/index").json()["fields"][0]["state"] == "ready"
            self.assertTrue(eventually(ready, 60))
            fw = {"filter": 'eq(reported/fw,"1.0")'}
            self.assertEqual(server.get("/v1/shadows/count", params=fw).json(), {"count": 5})
            r = server.post("/v1/jobs", {"filter": fw["filter"], "desired": {"fw": "2.0"}})
            self.assertEqual(r.status_code, 202, r.text)
            job = r.json()["id"]
            done = eventually(lambda: server.get(f"/v1/jobs/{job}").json()["status"] != "running", 120)
            self.assertTrue(done)
            body = server.get(f"/v1/jobs/{job}").json()
            self.assertEqual((body["status"], body["succeeded"]), ("succeeded", 5), body)
            for i in range(5):
                self.assertEqual(direct.get(shadow_path(f"conflict-{i}")).json()["desired"]["state"], {"fw": "2.0"})
            for kind in ("declaration", "entries", "job", "write"):
                self.assertGreaterEqual(proxy.faults.get(kind, 0), 1, proxy.faults)
        finally:
            server.close()
            direct.close()
            proxy.shutdown()
            ddb().delete_table(TableName=table)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class Readiness(unittest.TestCase):
    def test_readiness_answers_within_one_request_timeout_when_dynamodb_hangs(self):
        """/readyz makes one DescribeTable: with DynamoDB answering nothing in time, it says so
        after one --dynamodb-timeout-ms, not after the client's retries (8 attempts)."""
        table = new_table()
        proxy = FaultyProxy(ENDPOINT, seed=1, rates={}, delay=5)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        server = dynamo_server(table, "--dynamodb-timeout-ms", "1000",
                               endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        try:
            self.assertEqual(server.get("/readyz").status_code, 200)
            proxy.rates = {"late": 1.0}  # every answer from now on comes after 5 s
            started = time.monotonic()
            r = server.get("/readyz")
            self.assertEqual(r.status_code, 503, r.text)
            self.assertIn("not reachable", r.text)
            self.assertLess(time.monotonic() - started, 4)  # one 1 s timeout, not eight
            proxy.rates = {}
            self.assertTrue(eventually(lambda: server.get("/readyz").status_code == 200, 30))
        finally:
            server.close()
            proxy.shutdown()
            ddb().delete_table(TableName=table)


@unittest.skipUnless(ENDPOINT, "DynamoDB Local is not running")
class UnprocessedKeys(unittest.TestCase):
    def test_batch_reads_retry_the_keys_left_unprocessed(self):
        table = new_table()
        direct = dynamo_server(table)
        proxy = FaultyProxy(ENDPOINT, seed=3, rates={"unprocessed": 0.7})
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        through_proxy = dynamo_server(table, "--cache-entries", "0",
                                      endpoint=f"http://127.0.0.1:{proxy.server_address[1]}")
        try:
            things = [f"unprocessed-{i}" for i in range(30)]
            for i, thing in enumerate(things):
                direct.post(shadow_path(thing, "main", "reported"), {"state": {"i": i}})
                direct.post(shadow_path(thing, "main", "desired"), {"state": {"want": i}})
            for _ in range(3):
                batch = through_proxy.post("/v1/batch/get", {"shadows": [{"thing": t} for t in things]}).json()["shadows"]
                self.assertEqual([s["reported"]["state"]["i"] for s in batch], list(range(30)))
                self.assertEqual([s["desired"]["state"]["want"] for s in batch], list(range(30)))
            for i, thing in enumerate(things[:10]):
                self.assertEqual(through_proxy.get(shadow_path(thing)).json()["delta"], {"want": i})
            self.assertGreater(proxy.faults.get("unprocessed", 0), 10, proxy.faults)
        finally:
            through_proxy.close()
            direct.close()
            proxy.shutdown()
            ddb().delete_table(TableName=table)


if __name__ == "__main__":
    unittest.main()
