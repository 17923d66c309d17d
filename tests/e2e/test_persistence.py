"""Persistence across restarts, and kill -9 under write load: no acknowledged write lost."""
import functools
import threading
import unittest

import requests

from harness import Server, checked_session, kill_9_under_load, shadow_path


class Persistence(unittest.TestCase):
    def test_state_and_history_survive_a_restart(self):
        server = Server()
        try:
            server.post(shadow_path("p-1", "main", "reported"), {"state": {"a": 1.5}, "clientToken": "c"})
            server.post(shadow_path("p-1", "main", "desired"), {"state": {"b": True}})
            self.assertEqual(server.stop(), 0)  # graceful: SIGTERM exits 0
            self.assertTrue(any("stopped" in l for l in server.log))
            server.start()
            body = server.get(shadow_path("p-1")).json()
            self.assertEqual(body["reported"]["state"], {"a": 1.5})
            self.assertEqual(body["reported"]["clientToken"], "c")
            self.assertEqual(body["desired"]["state"], {"b": True})
            self.assertEqual(len(server.get(shadow_path("p-1", "main", "history")).json()["events"]), 2)
        finally:
            server.close()

    def test_kill_9_under_write_load_loses_no_acknowledged_write(self):
        server = Server()
        try:
            acknowledged = []
            lock = threading.Lock()

            def writer(w, stop):
                session = checked_session()
                i = 0
                while not stop.is_set():
                    key = f"w{w}-{i}"
                    try:
                        r = session.post(server.url + shadow_path(f"kill-{i % 10}", "main", "reported"),
                                         json={"state": {key: i}}, timeout=5)
                    except requests.RequestException:
                        return
                    if r.status_code == 200:
                        with lock:
                            acknowledged.append((f"kill-{i % 10}", key))
                    i += 1

            kill_9_under_load(server, [functools.partial(writer, w) for w in range(8)], 2.0)
            self.assertGreater(len(acknowledged), 100)
            server.start()
            states = {f"kill-{i}": server.get(shadow_path(f"kill-{i}")).json()["reported"]["state"] for i in range(10)}
            lost = [key for thing, key in acknowledged if key not in states[thing]]
            self.assertEqual(lost, [], f"{len(lost)} of {len(acknowledged)} acknowledged writes lost")
        finally:
            server.close()


if __name__ == "__main__":
    unittest.main()
