"""MQTT target end to end: registrations over REST on a real shadowd publishing to Mosquitto
(started per test by scripts/mosquitto.sh), read back with mosquitto_sub: topics from the
template with names percent-encoded, payloads, QoS 0 and 1, a broker stopped and restarted
mid-stream (nothing lost at QoS 1), an unreachable broker (retries, then dead letters)."""
import time
import unittest

from harness import ApiTestCase, Server, eventually, shadow_path
from mqtt_broker import HAVE_MOSQUITTO, Broker, Subscriber


@unittest.skipUnless(HAVE_MOSQUITTO, "mosquitto is not installed (scripts/setup.sh installs it)")
class MqttTargetTest(ApiTestCase):
    def setUp(self):
        self.broker = Broker()
        self.server = Server()
        self.subscribers = []

    def tearDown(self):
        self.server.close()
        for s in self.subscribers:
            s.close()
        self.broker.close()

    def subscribe(self, topic_filter, client_id="e2e-sub"):
        s = Subscriber(self.broker, topic_filter, client_id)
        self.subscribers.append(s)
        return s

    def register(self, rid, target, **extra):
        r = self.server.request("PUT", f"/v1/registrations/{rid}", json={"target": {"type": "mqtt", **target}, **extra})
        self.assertEqual(r.status_code, 200, r.text)
        return r.json()

    def write(self, thing, section, state, name="main"):
        r = self.server.post(shadow_path(thing, name, section), {"state": state})
        self.assertEqual(r.status_code, 200, r.text)

    def status(self, rid):
        return self.server.get(f"/v1/registrations/{rid}").json()["status"]

    def test_topics_from_the_template_with_names_percent_encoded(self):
        sub = self.subscribe("dev/#")
        body = self.register("m", {"broker": self.broker.url, "topic": "dev/{thing}/{name}/{section}/{type}"})
        self.assertEqual(body["target"]["qos"], 1)
        self.write("My House/a+b#c%d", "reported", {"temp": 20}, name="climate")
        self.write("t1", "desired", {"on": True})
        self.assertEqual(self.server.delete(shadow_path("t1")).status_code, 200)
        self.assertTrue(eventually(lambda: len(sub.events()) == 3), sub.events())
        topics = [t for t, _ in sub.events()]
        self.assertEqual(sorted(topics), sorted(["dev/My House%2Fa%2Bb%23c%25d/climate/reported/updated",
                                                 "dev/t1/main/desired/updated", "dev/t1/main/desired/deleted"]))
        events = {t: e for t, e in sub.events()}
        first = events["dev/My House%2Fa%2Bb%23c%25d/climate/reported/updated"]
        self.assertEqual(first["subject"], "My House/a+b#c%d#climate")
        self.assertEqual(first["data"]["reported"]["new"], {"temp": 20})
        self.assertTrue(eventually(lambda: self.status("m")["delivered"] == 3))

    def test_qos_0_and_two_registrations_on_one_broker(self):
        sub = self.subscribe("#")
        self.register("zero", {"broker": self.broker.url, "topic": "q0/{thing}", "qos": 0}, sections="reported")
        self.register("one", {"broker": self.broker.url, "topic": "q1/{thing}"}, sections="reported")
        for i in range(20):
            self.write(f"t{i}", "reported", {"n": i})
        self.assertTrue(eventually(lambda: len(sub.events()) == 40), len(sub.events()))
        self.assertEqual(sorted(t for t, _ in sub.events()), sorted([f"q0/t{i}" for i in range(20)] + [f"q1/t{i}" for i in range(20)]))
        self.assertTrue(eventually(lambda: self.status("zero")["delivered"] == 20 and self.status("one")["delivered"] == 20))

    def test_a_broker_restarted_mid_stream_loses_nothing_at_qos_1(self):
        sub = self.subscribe("s/#", client_id="restart-sub")
        self.register("r", {"broker": self.broker.url, "topic": "s/{thing}"}, sections="reported")
        total = 60
        for i in range(total):
            if i == 20:
                self.broker.stop()
            if i == 40:
                self.broker.start()
            self.write(f"t{i % 6}", "reported", {"n": i})
            time.sleep(0.02)
        ids = lambda: {e["id"] for _, e in sub.events()}
        self.assertTrue(eventually(lambda: len(ids()) == total, timeout=90), (len(ids()), self.status("r")))
        versions = {}
        for topic, e in sub.events():
            versions.setdefault(topic, set()).add(e["data"]["reported"]["version"])
        self.assertEqual({t: sorted(v) for t, v in versions.items()}, {f"s/t{k}": list(range(1, 11)) for k in range(6)})
        self.assertTrue(eventually(lambda: self.status("r")["delivered"] >= total))
        self.assertEqual(self.status("r")["deadLetters"], 0)
        self.assertGreater(self.status("r")["failed"], 0)  # the outage was seen, and recovered from

    def test_an_unreachable_broker_is_retried_then_dead_lettered(self):
        self.register("down", {"broker": "mqtt://127.0.0.1:9", "username": "u", "password": "p"}, maxAttempts=2,
                      sections="reported")
        self.assertEqual(self.server.get("/v1/registrations/down").json()["target"]["password"], "***")
        self.write("t", "reported", {"n": 1})
        self.assertTrue(eventually(lambda: self.status("down")["deadLetters"] == 1, timeout=60), self.status("down"))
        status = self.status("down")
        self.assertEqual(status["failed"], 2)
        self.assertIn("mqtt:", status["lastError"])

    def test_bad_targets_are_refused_naming_the_field(self):
        cases = [
            ({}, "target.broker"),
            ({"broker": "http://127.0.0.1:1883"}, "target.broker"),
            ({"broker": self.broker.url, "topic": "a/+/b"}, "target.topic"),
            ({"broker": self.broker.url, "topic": ""}, "target.topic"),
            ({"broker": self.broker.url, "qos": 2}, "target.qos"),
            ({"broker": self.broker.url, "username": 7}, "target.username"),
            ({"broker": self.broker.url, "retain": True}, "target.retain"),
            # credentials or a path in the URL were dropped: refused, pointing to username/password
            ({"broker": self.broker.url.replace("mqtt://", "mqtt://user:pw@")}, "target.broker"),
            ({"broker": self.broker.url + "/topic"}, "target.broker"),
        ]
        for target, field in cases:
            with self.subTest(field=field):
                r = self.server.request("PUT", "/v1/registrations/bad", json={"target": {"type": "mqtt", **target}})
                self.assertEqual(self.assertError(r, 400, "invalid_request").get("field"), field)


if __name__ == "__main__":
    unittest.main()
