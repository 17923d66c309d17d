"""AWS's IoT Device SDK v2 for JavaScript (npm aws-iot-device-sdk-v2, installed under .cache/ by
scripts/aws-iot-sdk.sh) as a device against shadowd --mqtt through Mosquitto: get (404), update,
the delta after a desired change made through REST and through MQTT, a stale version (409),
delete, for a named and the classic shadow (aws_iot_sdk_client.js)."""
import os
import shutil
import subprocess
import unittest

from harness import Server, eventually
from mqtt_broker import HAVE_MOSQUITTO, Broker

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")


@unittest.skipUnless(HAVE_MOSQUITTO, "mosquitto is not installed (scripts/setup.sh installs it)")
class AwsIotSdkTest(unittest.TestCase):
    def setUp(self):
        if not shutil.which("node") or not shutil.which("npm"):
            self.fail("node and npm are needed for the AWS IoT Device SDK test")
        self.node_path = subprocess.run([os.path.join(SCRIPTS, "aws-iot-sdk.sh")], check=True, capture_output=True,
                                        text=True).stdout.strip()
        self.broker = Broker()
        self.server = Server("--mqtt", self.broker.url)
        self.assertTrue(eventually(lambda: any("mqtt: connected" in line for line in self.server.log)))

    def tearDown(self):
        self.server.close()
        self.broker.close()

    def test_device_sdk_v2_shadow_client(self):
        env = dict(os.environ, NODE_PATH=self.node_path, BROKER_PORT=str(self.broker.port), SHADOWD_URL=self.server.url)
        r = subprocess.run(["node", os.path.join(HERE, "aws_iot_sdk_client.js")], env=env, capture_output=True,
                           text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + "".join(self.server.log[-30:]))
        self.assertEqual(r.stdout.count("\nok ") + r.stdout.startswith("ok "), 16, r.stdout)


if __name__ == "__main__":
    unittest.main()
