"""Mosquitto for the MQTT suites: a broker on a free port (scripts/mosquitto.sh) that can be stopped
and started again on the same port, and a mosquitto_sub subscriber recording what it receives."""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from harness import eventually

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
HAVE_MOSQUITTO = shutil.which("mosquitto") and shutil.which("mosquitto_sub")
if not HAVE_MOSQUITTO and os.environ.get("DS_REQUIRE_MQTT"):
    raise RuntimeError("DS_REQUIRE_MQTT is set but mosquitto or mosquitto_sub is not installed")


def parsed(payload):
    """The payload as JSON, or as the text it is when it is none (or empty)."""
    try:
        return json.loads(payload)
    except ValueError:
        return payload


class Broker:
    """A Mosquitto on a free port; stop() and start() keep the port and the stored sessions."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mqtt-e2e-")
        self.port = None
        self.start()

    def start(self):
        args = [os.path.join(SCRIPTS, "mosquitto.sh"), "start", self.dir] + ([str(self.port)] if self.port else [])
        subprocess.run(args, check=True)
        with open(os.path.join(self.dir, "url")) as f:
            self.url = f.read().strip()
        self.port = int(self.url.rsplit(":", 1)[1])

    def pid(self):
        with open(os.path.join(self.dir, "pid")) as f:
            return int(f.read())

    def stop(self):
        pid = self.pid()
        os.kill(pid, 15)  # SIGTERM: Mosquitto saves its sessions and queued messages first
        while True:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split()[2] == "Z":
                        return
            except OSError:
                return
            time.sleep(0.05)

    def close(self):
        subprocess.run([os.path.join(SCRIPTS, "mosquitto.sh"), "stop", self.dir])
        shutil.rmtree(self.dir, ignore_errors=True)


class Subscriber:
    """mosquitto_sub at QoS 1 with a persistent session, recording (topic, payload) pairs."""

    def __init__(self, broker, topic_filter, client_id="e2e-sub"):
        self.messages = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(broker.port), "-q", "1", "-c",
                                      "-i", client_id, "-t", topic_filter, "-F", "%j"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     errors="replace")  # payloads that are not UTF-8 (tests send some)
        threading.Thread(target=self._read, daemon=True).start()
        # Subscribed once a probe published to the filter arrives (probes are left out of events()).
        self.probe = topic_filter.replace("#", "probe")
        for _ in range(50):
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(broker.port), "-q", "1", "-t", self.probe,
                            "-m", "{}"], check=True)
            if eventually(lambda: self.messages, timeout=0.5):
                break

    def _read(self):
        for line in self.proc.stdout:
            m = json.loads(line)
            with self.lock:
                self.messages.append((m["topic"], m["payload"] if isinstance(m["payload"], str) else json.dumps(m["payload"])))

    def events(self):
        with self.lock:
            return [(topic, parsed(payload)) for topic, payload in self.messages if topic != self.probe]

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        self.proc.stdout.close()
