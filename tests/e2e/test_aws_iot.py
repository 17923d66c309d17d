"""The AWS IoT Device Shadow REST API, through AWS's own clients: boto3's iot-data client and
the AWS CLI, signing with keys of a credentials file (--aws-credentials)."""
import datetime
import hashlib
import json
import os
import subprocess
import tempfile
import time
import unittest
from unittest import mock

import boto3
import botocore.auth
import botocore.exceptions
import requests
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from harness import ApiTestCase, Server, shadow_path
from test_dynamodb import ENDPOINT as DYNAMODB, new_table

KEYS = {
    "admin": ("AKIAADMINEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
    "app": ("app-key", "app-secret"),
    "device": ("house-device", "device-secret"),
}
REGION = "eu-west-1"


def write_credentials(directory):
    path = os.path.join(directory, "aws-credentials")
    with open(path, "w") as f:
        f.write("# keys of the AWS IoT API tests\n")
        f.write(f"{KEYS['admin'][0]} {KEYS['admin'][1]} admin\n")
        f.write(f"{KEYS['app'][0]} {KEYS['app'][1]} app\n")
        f.write(f"{KEYS['device'][0]} {KEYS['device'][1]} device house-*\n")
    os.chmod(path, 0o600)
    return path


def payload(response):
    return json.loads(response["payload"].read())


class AwsIotTestCase(ApiTestCase):
    shared_version = False  # the DynamoDB combined layout: one version for both sections

    @classmethod
    def server_args(cls):
        return []

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="shadowd-aws-")
        cls.credentials = write_credentials(cls.dir)
        cls.server = Server("--aws-credentials", cls.credentials, *cls.server_args())

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def client(self, role="admin"):
        key, secret = KEYS[role]
        return boto3.client("iot-data", endpoint_url=self.server.url, region_name=REGION,
                            aws_access_key_id=key, aws_secret_access_key=secret)

    def assertAwsError(self, call, exception, message=None):
        with self.assertRaises(botocore.exceptions.ClientError) as caught:
            call()
        error = caught.exception.response["Error"]
        self.assertEqual(error["Code"], exception, caught.exception.response)
        if message is not None:
            self.assertEqual(error["Message"], message)
        return caught.exception.response

    def update(self, thing, body, name=None, role="admin"):
        kw = {"thingName": thing, "payload": json.dumps(body).encode()}
        if name:
            kw["shadowName"] = name
        return payload(self.client(role).update_thing_shadow(**kw))

    def get(self, thing, name=None, role="admin"):
        kw = {"thingName": thing}
        if name:
            kw["shadowName"] = name
        return payload(self.client(role).get_thing_shadow(**kw))


class Boto3Operations(AwsIotTestCase):
    def test_update_then_get_the_classic_shadow(self):
        accepted = self.update("boto-1", {"state": {"desired": {"color": "red", "n": {"a": 1}},
                                                     "reported": {"color": "blue"}},
                                           "clientToken": "tok-1"})
        self.assertEqual(accepted["state"], {"desired": {"color": "red", "n": {"a": 1}}, "reported": {"color": "blue"}})
        self.assertEqual(accepted["clientToken"], "tok-1")
        self.assertEqual(accepted["version"], 1 if self.shared_version else 2)  # a version per section written
        self.assertIsInstance(accepted["timestamp"], int)
        self.assertEqual(set(accepted["metadata"]["desired"]["n"]["a"]), {"timestamp"})
        doc = self.get("boto-1")
        self.assertEqual(doc["state"]["desired"], {"color": "red", "n": {"a": 1}})
        self.assertEqual(doc["state"]["reported"], {"color": "blue"})
        self.assertEqual(doc["state"]["delta"], {"color": "red", "n": {"a": 1}})
        self.assertEqual(doc["version"], accepted["version"])
        self.assertEqual(doc["metadata"]["desired"]["color"]["timestamp"], accepted["timestamp"])
        self.assertNotIn("delta", doc["metadata"])

    def test_metadata_tells_when_each_leaf_last_changed(self):
        first = self.update("meta-1", {"state": {"reported": {"a": 1, "b": {"c": 1}}}})["timestamp"]
        time.sleep(1.1)  # metadata is in whole seconds
        second = self.update("meta-1", {"state": {"reported": {"b": {"c": 2}}}})["timestamp"]
        self.assertGreater(second, first)
        self.assertEqual(self.get("meta-1")["metadata"]["reported"],
                         {"a": {"timestamp": first}, "b": {"c": {"timestamp": second}}})

    def test_a_missing_shadow_is_resource_not_found_naming_it(self):
        self.assertAwsError(lambda: self.get("nobody"), "ResourceNotFoundException", "No shadow exists with name: 'nobody'")
        self.assertAwsError(lambda: self.get("nobody", "cfg"), "ResourceNotFoundException", "No shadow exists with name: 'cfg'")
        self.assertAwsError(lambda: self.client().delete_thing_shadow(thingName="nobody"), "ResourceNotFoundException")

    def test_version_pins_the_whole_shadow(self):
        self.update("pin-1", {"state": {"reported": {"a": 1}}})
        self.update("pin-1", {"state": {"desired": {"a": 2}}})
        self.assertAwsError(lambda: self.update("pin-1", {"state": {"reported": {"a": 3}}, "version": 1}),
                            "ConflictException", "Version conflict")
        self.assertEqual(self.update("pin-1", {"state": {"reported": {"a": 3}}, "version": 2})["version"], 3)
        self.assertEqual(self.get("pin-1")["state"]["reported"], {"a": 3})

    def test_every_accepted_update_moves_the_version(self):
        first = self.update("ver-1", {"state": {"reported": {"a": 1}}})["version"]
        again = self.update("ver-1", {"state": {"reported": {"a": 1}}})["version"]
        self.assertEqual(again, first + 1)

    def test_null_removes_a_key_a_section_or_the_whole_state(self):
        self.update("null-1", {"state": {"desired": {"a": 1, "b": 2}, "reported": {"c": 3}}})
        self.update("null-1", {"state": {"desired": {"a": None}}})
        self.assertEqual(self.get("null-1")["state"]["desired"], {"b": 2})
        self.update("null-1", {"state": {"desired": None}})
        doc = self.get("null-1")
        self.assertNotIn("desired", doc["state"])
        self.assertEqual(doc["state"]["reported"], {"c": 3})
        self.update("null-1", {"state": None})
        doc = self.get("null-1")  # the shadow is still there, empty, as on AWS
        self.assertEqual(doc["state"], {})
        self.assertEqual(doc["metadata"], {})

    def test_arrays_are_replaced_whole(self):
        self.update("arr-1", {"state": {"reported": {"l": [{"id": 1, "v": 1}, {"id": 2, "v": 2}], "s": [1, 2, 3]}}})
        self.update("arr-1", {"state": {"reported": {"l": [{"id": 2, "v": 3}], "s": [4]}}})
        doc = self.get("arr-1")
        self.assertEqual(doc["state"]["reported"], {"l": [{"id": 2, "v": 3}], "s": [4]})
        self.assertEqual(doc["metadata"]["reported"]["l"], [{"id": {"timestamp": doc["metadata"]["reported"]["s"][0]["timestamp"]},
                                                             "v": {"timestamp": doc["metadata"]["reported"]["s"][0]["timestamp"]}}])

    def test_desired_stays_when_reported_reaches_it(self):
        self.update("ack-1", {"state": {"desired": {"sp": 22}}})
        self.update("ack-1", {"state": {"reported": {"sp": 22}}})
        doc = self.get("ack-1")
        self.assertEqual(doc["state"]["desired"], {"sp": 22})
        self.assertNotIn("delta", doc["state"])

    def test_timestamped_values_keep_their_protection(self):
        self.update("ts-1", {"state": {"reported": {"t": {"value": 2, "ts": "2026-01-01T00:00:10Z"}}}})
        self.update("ts-1", {"state": {"reported": {"t": {"value": 1, "ts": "2026-01-01T00:00:05Z"}}}})
        self.assertEqual(self.get("ts-1")["state"]["reported"]["t"]["value"], 2)

    def test_delete_answers_version_and_timestamp(self):
        self.update("del-1", {"state": {"reported": {"a": 1}}}, name="cfg")
        answer = payload(self.client().delete_thing_shadow(thingName="del-1", shadowName="cfg"))
        self.assertEqual(set(answer), {"version", "timestamp"})
        self.assertAwsError(lambda: self.get("del-1", "cfg"), "ResourceNotFoundException")

    def test_named_shadows_are_listed_in_pages_without_the_classic_one(self):
        names = [f"s{i}" for i in range(5)]
        for name in names:
            self.update("list-1", {"state": {"reported": {"a": 1}}}, name=name)
        self.update("list-1", {"state": {"reported": {"a": 1}}})  # classic
        seen, token = [], None
        while True:
            kw = {"thingName": "list-1", "pageSize": 2}
            if token:
                kw["nextToken"] = token
            page = self.client().list_named_shadows_for_thing(**kw)
            self.assertLessEqual(len(page["results"]), 2)
            self.assertIsInstance(page["timestamp"], int)
            seen += page["results"]
            token = page.get("nextToken")
            if not token:
                break
        self.assertEqual(seen, names)
        self.assertEqual(self.client().list_named_shadows_for_thing(thingName="nothing-here")["results"], [])

    def test_names_that_need_percent_encoding(self):
        for thing, name in [("my:thing", "$package"), ("a b", "x:y"), ("100%;é#?", "v1.2_-")]:
            self.update(thing, {"state": {"reported": {"k": thing}}}, name=name)
            self.assertEqual(self.get(thing, name)["state"]["reported"], {"k": thing})
            self.assertIn(name, self.client().list_named_shadows_for_thing(thingName=thing)["results"])

    def test_writes_are_seen_through_api_v1_and_back(self):
        self.update("cross-1", {"state": {"desired": {"sp": 20}}}, name="climate")
        v1 = self.server.get(shadow_path("cross-1", "climate")).json()
        self.assertEqual(v1["desired"]["state"], {"sp": 20})
        self.server.post(shadow_path("cross-1", "climate", "reported"), {"state": {"sp": 19}})
        doc = self.get("cross-1", "climate")
        self.assertEqual(doc["state"]["reported"], {"sp": 19})
        self.assertEqual(doc["state"]["delta"], {"sp": 20})
        self.assertEqual(doc["version"], v1["desired"]["version"] + 1)

    def test_bad_requests_name_the_problem(self):
        c = self.client()
        for body, message in [(b"{}", "Missing required node: state"),
                              (b"not json", "Payload contains invalid json"),
                              (b'{"state":{"delta":{}}}', None),
                              (b'{"state":{"desired":5}}', None),
                              (b'{"state":5}', None),
                              (b'{"state":{"reported":{}},"version":-1}', None),
                              (b'{"state":{"reported":{"t":{"ts":"garbage"}}}}', None),
                              (b'{"state":{}}', None)]:
            self.assertAwsError(lambda: c.update_thing_shadow(thingName="bad-1", payload=body),
                                "InvalidRequestException", message)
        for payload in [json.dumps({"state": {"reported": {"x": 1}}}).encode("utf-16"),  # with its byte order mark
                        '{"state":{"reported":{"s":"café"}}}'.encode("latin-1")]:
            self.assertAwsError(lambda: c.update_thing_shadow(thingName="bad-1", payload=payload),
                                "UnsupportedDocumentEncodingException")
        self.assertAwsError(lambda: self.get("bad-1", "n" * 300), "InvalidRequestException")
        big = {"state": {"reported": {"x": "y" * 70000}}}
        self.assertAwsError(lambda: self.update("bad-1", big), "RequestEntityTooLargeException")
        self.assertAwsError(lambda: self.get("bad-1"), "ResourceNotFoundException")  # nothing stored

    def test_error_responses_have_aws_shape(self):
        r = requests.get(self.server.url + "/things/x/shadow")  # unsigned
        self.assertEqual(r.status_code, 403)
        self.assertEqual(r.headers["x-amzn-ErrorType"], "ForbiddenException:")
        self.assertEqual(r.json()["code"], 403)
        self.assertIn("message", r.json())


class TransportRefusals(AwsIotTestCase):
    """What the transport refuses before any API reads the request is answered in the format of
    the API the request's path belongs to."""

    @classmethod
    def server_args(cls):
        return ["--max-body-bytes", "4096"]

    def test_an_oversized_body_is_an_aws_error_for_boto3(self):
        big = {"state": {"reported": {"x": "y" * 10000}}}
        response = self.assertAwsError(lambda: self.client().update_thing_shadow(thingName="big-1",
                                                                                  payload=json.dumps(big).encode()),
                                       "RequestEntityTooLargeException")
        self.assertEqual(response["ResponseMetadata"]["HTTPStatusCode"], 413)
        self.assertEqual(response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"],
                         "RequestEntityTooLargeException:")

    def test_oversized_headers_answer_431_with_431_in_the_body(self):
        r = requests.get(self.server.url + "/things/x/shadow", headers={"X-Big": "a" * 20000})
        self.assertEqual(r.status_code, 431)
        self.assertEqual(r.json()["code"], 431)
        self.assertEqual(r.headers["x-amzn-ErrorType"], "InvalidRequestException:")

    def test_the_same_body_on_api_v1_is_a_v1_error(self):
        r = requests.post(self.server.url + shadow_path("big-1", "main", "reported"),
                          json={"state": {"x": "y" * 10000}})
        self.assertEqual(r.status_code, 413)
        self.assertEqual(r.json()["error"]["code"], "document_too_large")
        self.assertNotIn("x-amzn-ErrorType", r.headers)


@unittest.skipUnless(DYNAMODB, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class Boto3OperationsOnDynamoDB(Boto3Operations):
    @classmethod
    def server_args(cls):
        return ["--store", f"dynamodb:{new_table()}", "--dynamodb-endpoint", DYNAMODB]


@unittest.skipUnless(DYNAMODB, "DynamoDB Local is not running (scripts/with-services.sh starts it)")
class Boto3OperationsOnDynamoDBCombined(Boto3Operations):
    shared_version = True

    @classmethod
    def server_args(cls):
        return ["--store", f"dynamodb:{new_table()}", "--dynamodb-endpoint", DYNAMODB, "--layout", "combined"]


class Signatures(AwsIotTestCase):
    def signed(self, method, path, body=b"", key=KEYS["admin"], service="iotdata", when=None, tamper=None):
        request = AWSRequest(method=method, url=self.server.url + path, data=body)
        signer = botocore.auth.SigV4Auth(Credentials(*key), service, REGION)
        if when:
            with mock.patch("botocore.auth.get_current_datetime", return_value=when):
                signer.add_auth(request)
        else:
            signer.add_auth(request)
        prepared = request.prepare()
        return requests.request(method, prepared.url, headers=dict(prepared.headers),
                                data=tamper if tamper is not None else body)

    def test_a_good_signature_passes_for_both_service_names(self):
        for service in ("iotdata", "iotdevicegateway"):
            r = self.signed("POST", "/things/sig-1/shadow", b'{"state":{"reported":{"a":1}}}', service=service)
            self.assertEqual(r.status_code, 200, r.text)

    def test_bad_signatures_are_forbidden(self):
        body = b'{"state":{"reported":{"a":1}}}'
        stale = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=20)
        cases = {
            "wrong secret": dict(key=(KEYS["admin"][0], "not-the-secret")),
            "unknown key": dict(key=("AKIANOBODY", "x")),
            "wrong service": dict(service="dynamodb"),
            "stale date": dict(when=stale),
            "tampered body": dict(tamper=b'{"state":{"reported":{"a":2}}}'),
        }
        for what, kw in cases.items():
            with self.subTest(what):
                r = self.signed("POST", "/things/sig-2/shadow", body, **kw)
                self.assertEqual(r.status_code, 403, r.text)
                self.assertEqual(r.headers["x-amzn-ErrorType"], "ForbiddenException:")
        self.assertEqual(self.signed("GET", "/things/sig-2/shadow").status_code, 404)  # nothing was written

    def test_roles_and_patterns_limit_keys(self):
        self.update("house-1", {"state": {"reported": {"t": 20}}}, role="device")
        self.assertAwsError(lambda: self.update("house-1", {"state": {"desired": {"t": 21}}}, role="device"),
                            "ForbiddenException")
        self.assertAwsError(lambda: self.update("garage-1", {"state": {"reported": {"t": 20}}}, role="device"),
                            "ForbiddenException")
        self.assertAwsError(lambda: self.update("house-1", {"state": None}, role="device"), "ForbiddenException")
        self.update("house-1", {"state": {"desired": {"t": 21}}}, role="app")
        self.assertAwsError(lambda: self.update("house-1", {"state": {"reported": {"t": 21}}}, role="app"),
                            "ForbiddenException")
        self.assertEqual(self.get("house-1", role="device")["state"]["desired"], {"t": 21})
        self.assertAwsError(lambda: self.client("device").delete_thing_shadow(thingName="house-1"), "ForbiddenException")


class AwsCli(AwsIotTestCase):
    def aws(self, *args, role="admin", check=True):
        key, secret = KEYS[role]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION=REGION,
                   AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        r = subprocess.run(["aws", "iot-data", *args, "--endpoint-url", self.server.url], env=env,
                           capture_output=True, text=True, timeout=60)
        if check:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_the_cli_round_trip(self):
        out = os.path.join(self.dir, "out.json")
        self.aws("update-thing-shadow", "--thing-name", "cli-1", "--shadow-name", "cfg",
                 "--payload", '{"state":{"desired":{"mode":"eco"}}}', out)
        with open(out) as f:
            self.assertEqual(json.load(f)["state"], {"desired": {"mode": "eco"}})
        self.aws("get-thing-shadow", "--thing-name", "cli-1", "--shadow-name", "cfg", out)
        with open(out) as f:
            self.assertEqual(json.load(f)["state"]["delta"], {"mode": "eco"})
        listed = json.loads(self.aws("list-named-shadows-for-thing", "--thing-name", "cli-1").stdout)
        self.assertEqual(listed["results"], ["cfg"])
        self.aws("delete-thing-shadow", "--thing-name", "cli-1", "--shadow-name", "cfg", out)
        missing = self.aws("get-thing-shadow", "--thing-name", "cli-1", "--shadow-name", "cfg", out, check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("ResourceNotFoundException", missing.stderr)
        denied = self.aws("get-thing-shadow", "--thing-name", "cli-1", out, role="device", check=False)
        self.assertIn("ForbiddenException", denied.stderr)


class WithoutCredentials(unittest.TestCase):
    """Without --aws-credentials the facade is open exactly when API v1 is."""

    def test_open_server_takes_unsigned_requests(self):
        with Server() as server:
            r = requests.post(server.url + "/things/open-1/shadow", data=b'{"state":{"reported":{"a":1}}}')
            self.assertEqual(r.status_code, 200, r.text)
            self.assertEqual(requests.get(server.url + "/things/open-1/shadow").json()["state"]["reported"], {"a": 1})
            r = requests.put(server.url + "/things/open-1/shadow")
            self.assertEqual((r.status_code, r.headers["x-amzn-ErrorType"]), (405, "MethodNotAllowedException:"))
            self.assertEqual(r.headers["Allow"], "GET, POST, DELETE")

    def test_with_a_token_file_it_takes_bearer_tokens(self):
        directory = tempfile.mkdtemp(prefix="shadowd-aws-tokens-")
        tokens = os.path.join(directory, "tokens")
        with open(tokens, "w") as f:
            f.write(hashlib.sha256(b"secret-token").hexdigest() + " admin\n")
        with Server("--tokens", tokens) as server:
            iot = boto3.client("iot-data", endpoint_url=server.url, region_name=REGION,
                               aws_access_key_id="AKIAANY", aws_secret_access_key="any")
            with self.assertRaises(botocore.exceptions.ClientError) as caught:
                iot.get_thing_shadow(thingName="t")
            self.assertEqual(caught.exception.response["Error"]["Code"], "UnauthorizedException")
            r = requests.post(server.url + "/things/tok-1/shadow", data=b'{"state":{"reported":{"a":1}}}',
                              headers={"Authorization": "Bearer secret-token"})
            self.assertEqual(r.status_code, 200, r.text)


if __name__ == "__main__":
    unittest.main()
