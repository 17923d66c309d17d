"""SQS and SNS targets end to end: registrations over REST on a real shadowd, events delivered
to moto_server (scripts/with-services.sh starts it) and read back with boto3, AWS's own client:
bodies, message attributes, FIFO group and deduplication ids, SNS -> SQS fan-out, truncation
beyond the queue's MaximumMessageSize, dead letters for an unreachable endpoint, bad fields."""
import json
import os
import time
import unittest
import uuid

import boto3

from harness import ApiTestCase, Server, eventually, shadow_path

ENDPOINT = os.environ.get("DS_MOTO_ENDPOINT", "")
if not ENDPOINT and os.environ.get("DS_REQUIRE_MOTO"):
    raise RuntimeError("DS_REQUIRE_MOTO is set but DS_MOTO_ENDPOINT is not")

AWS = dict(endpoint_url=ENDPOINT, region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local")


def unique(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


@unittest.skipUnless(ENDPOINT, "moto_server is not running (scripts/with-services.sh starts it)")
class AwsTargetTest(ApiTestCase):
    def setUp(self):
        self.sqs = boto3.client("sqs", **AWS)
        self.sns = boto3.client("sns", **AWS)
        self.server = Server()

    def tearDown(self):
        self.server.close()

    def register(self, rid, target, **extra):
        r = self.server.request("PUT", f"/v1/registrations/{rid}", json={"target": target, **extra})
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def write(self, thing, section, state, name="main"):
        r = self.server.post(shadow_path(thing, name, section), {"state": state})
        self.assertEqual(r.status_code, 200, r.text)

    def receive(self, queue_url, count, timeout=30.0):
        """Reads `count` messages (with every attribute) and deletes them."""
        messages = []
        deadline = time.time() + timeout
        while len(messages) < count and time.time() < deadline:
            answer = self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                              AttributeNames=["All"], MessageAttributeNames=["All"])
            for m in answer.get("Messages", []):
                messages.append(m)
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return messages

    def status(self, rid):
        return self.server.get(f"/v1/registrations/{rid}").json()["status"]

    def test_sqs_gets_each_event_with_its_attributes(self):
        url = self.sqs.create_queue(QueueName=unique("events"))["QueueUrl"]
        self.register("q", {"type": "sqs", "queueUrl": url, "endpoint": ENDPOINT})
        self.write("My House", "reported", {"temp": 20}, name="climate")
        self.write("My House", "desired", {"temp": 22}, name="climate")
        self.assertEqual(self.server.delete(shadow_path("My House", "climate")).status_code, 200)
        messages = self.receive(url, 3)
        self.assertEqual(len(messages), 3)
        events = sorted((json.loads(m["Body"]) for m in messages), key=lambda e: e["id"])
        self.assertEqual([e["type"] for e in events],
                         ["deviceshadow.shadow.updated", "deviceshadow.shadow.updated", "deviceshadow.shadow.deleted"])
        self.assertEqual(events[0]["subject"], "My House#climate")
        self.assertEqual(events[0]["data"]["reported"]["new"], {"temp": 20})
        for m in messages:
            event = json.loads(m["Body"])
            attributes = {k: v["StringValue"] for k, v in m["MessageAttributes"].items()}
            self.assertEqual(attributes, {"thing": "My House", "name": "climate", "type": event["type"]})
            self.assertEqual({v["DataType"] for v in m["MessageAttributes"].values()}, {"String"})
        self.assertTrue(eventually(lambda: self.status("q")["delivered"] == 3))

    def test_sqs_fifo_groups_by_shadow_and_deduplicates_by_event_id(self):
        url = self.sqs.create_queue(QueueName=unique("ordered") + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        self.register("fifo", {"type": "sqs", "queueUrl": url, "endpoint": ENDPOINT, "region": "us-east-1"},
                      sections="reported")
        for i in range(1, 6):
            self.write("t1", "reported", {"n": i})
            self.write("t2", "reported", {"n": i}, name="aux")
        messages = self.receive(url, 10)
        self.assertEqual(len(messages), 10)
        by_group = {}
        for m in messages:
            event = json.loads(m["Body"])
            self.assertEqual(m["Attributes"]["MessageDeduplicationId"], event["id"])
            by_group.setdefault(m["Attributes"]["MessageGroupId"], []).append(event["data"]["reported"]["version"])
        self.assertEqual(by_group, {"t1#main": [1, 2, 3, 4, 5], "t2#aux": [1, 2, 3, 4, 5]})

    def test_an_event_over_the_queues_maximum_size_arrives_truncated(self):
        url = self.sqs.create_queue(QueueName=unique("small"), Attributes={"MaximumMessageSize": "4096"})["QueueUrl"]
        self.register("small", {"type": "sqs", "queueUrl": url, "endpoint": ENDPOINT}, sections="reported")
        self.write("t", "reported", {"small": 1})
        self.write("t", "reported", {"big": "x" * 2000})  # "new" and "diff" hold it: over 3 KiB
        small, big = sorted((json.loads(m["Body"]) for m in self.receive(url, 2)), key=lambda e: e["id"])
        self.assertNotIn("truncated", small["data"])
        self.assertEqual(small["data"]["reported"]["new"], {"small": 1})
        self.assertTrue(big["data"]["truncated"])
        self.assertNotIn("new", big["data"]["reported"])
        self.assertNotIn("old", big["data"]["reported"])
        self.assertEqual(big["data"]["reported"]["diff"][0]["path"], "/big")

    def test_sns_fans_out_to_a_subscribed_queue(self):
        for fifo in (False, True):
            with self.subTest(fifo=fifo):
                suffix = ".fifo" if fifo else ""
                fifo_attributes = {"FifoQueue": "true"} if fifo else {}
                topic = self.sns.create_topic(Name=unique("changes") + suffix,
                                              Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
                url = self.sqs.create_queue(QueueName=unique("fanout") + suffix, Attributes=fifo_attributes)["QueueUrl"]
                arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                self.sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
                rid = "sns-fifo" if fifo else "sns"
                self.register(rid, {"type": "sns", "topicArn": topic, "endpoint": ENDPOINT}, sections="reported")
                for i in range(1, 13):
                    self.write("lamp", "reported", {"on": i % 2 == 0}, name=rid)
                messages = self.receive(url, 12)
                self.assertEqual(len(messages), 12)
                events = [json.loads(m["Body"]) for m in messages]
                self.assertEqual(sorted(e["data"]["reported"]["version"] for e in events), list(range(1, 13)))
                for m, event in zip(messages, events):
                    attributes = {k: v["StringValue"] for k, v in m["MessageAttributes"].items()}
                    self.assertEqual(attributes, {"thing": "lamp", "name": rid, "type": "deviceshadow.shadow.updated"})
                    if fifo:
                        self.assertEqual(m["Attributes"]["MessageGroupId"], f"lamp#{rid}")
                self.assertTrue(eventually(lambda: self.status(rid)["delivered"] == 12))

    def test_an_unreachable_endpoint_is_retried_then_dead_lettered(self):
        for target in ({"type": "sqs", "queueUrl": "http://127.0.0.1:9/123456789012/q", "region": "us-east-1"},
                       {"type": "sns", "topicArn": "arn:aws:sns:us-east-1:123456789012:t", "endpoint": "http://127.0.0.1:9"}):
            with self.subTest(type=target["type"]):
                rid = "down-" + target["type"]
                self.register(rid, target, maxAttempts=3, sections="reported")
                self.write("t", "reported", {"n": 1}, name=rid)
                self.assertTrue(eventually(lambda: self.status(rid)["deadLetters"] == 1), self.status(rid))
                status = self.status(rid)
                self.assertEqual(status["failed"], 3)
                self.assertIn(target["type"] + ":", status["lastError"])
                letters = self.server.get(f"/v1/registrations/{rid}/dead-letters").json()["deadLetters"]
                self.assertEqual(letters[0]["attempts"], 3)

    def test_a_missing_queue_dead_letters_at_once(self):
        self.register("gone", {"type": "sqs", "queueUrl": ENDPOINT + "/123456789012/" + unique("nothing"),
                               "endpoint": ENDPOINT}, sections="reported")
        self.write("t", "reported", {"n": 1})
        self.assertTrue(eventually(lambda: self.status("gone")["deadLetters"] == 1))
        self.assertEqual(self.status("gone")["failed"], 1)
        self.assertIn("QueueDoesNotExist", self.status("gone")["lastError"])

    def test_bad_targets_are_refused_naming_the_field(self):
        cases = [
            ({"type": "sqs"}, "target.queueUrl"),
            ({"type": "sqs", "queueUrl": "not a url"}, "target.queueUrl"),
            ({"type": "sqs", "queueUrl": "https://sqs.us-east-1.amazonaws.com/1/q", "endpoint": "ftp://x"}, "target.endpoint"),
            ({"type": "sqs", "queueUrl": "https://sqs.us-east-1.amazonaws.com/1/q", "region": 5}, "target.region"),
            ({"type": "sqs", "queueUrl": "https://sqs.us-east-1.amazonaws.com/1/q", "queue": "x"}, "target.queue"),
            ({"type": "sns"}, "target.topicArn"),
            ({"type": "sns", "topicArn": "arn:aws:sqs:us-east-1:1:q"}, "target.topicArn"),
            ({"type": "sns", "topicArn": "arn:aws:sns:us-east-1:1:t", "endpoint": "nowhere"}, "target.endpoint"),
        ]
        for target, field in cases:
            with self.subTest(field=field, target=target):
                r = self.server.request("PUT", "/v1/registrations/bad", json={"target": target})
                self.assertEqual(self.assertError(r, 400, "invalid_request").get("field"), field)


if __name__ == "__main__":
    unittest.main()
