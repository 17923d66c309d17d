"""Persistence across restarts, and kill -9 under write load: no acknowledged write lost."""
import functools
import os
import re
import signal
import threading
import time
import unittest

import requests

from harness import Server, checked_session, eventually, kill_9_under_load, shadow_path


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

    def test_a_second_shadowd_on_the_database_is_refused_until_the_first_exits(self):
        first = Server()
        try:
            first.post(shadow_path("lock-1", "main", "reported"), {"state": {"a": 1}})
            with self.assertRaisesRegex(RuntimeError, "another shadowd has .*shadows.db open"):
                Server(data_dir=first.data_dir)
            link = os.path.join(first.data_dir, "link.db")  # the same file by another name
            os.symlink(os.path.join(first.data_dir, "shadows.db"), link)
            with self.assertRaisesRegex(RuntimeError, "one shadowd serves a SQLite database"):
                Server("--store", f"sqlite:{link}", data_dir=first.data_dir)
            hard = os.path.join(first.data_dir, "hard.db")  # and by a hard link, with its own log's name
            os.link(os.path.join(first.data_dir, "shadows.db"), hard)
            with self.assertRaisesRegex(RuntimeError, "one shadowd serves a SQLite database"):
                Server("--store", f"sqlite:{hard}", data_dir=first.data_dir)
            os.unlink(hard)
            self.assertTrue(first.alive())
            self.assertEqual(first.get(shadow_path("lock-1")).json()["reported"]["state"], {"a": 1})
            first.stop(signal.SIGKILL)  # the lock goes with the process, however it ends
            second = Server(data_dir=first.data_dir)
            try:
                self.assertEqual(second.get(shadow_path("lock-1")).json()["reported"]["state"], {"a": 1})
            finally:
                second.stop()
        finally:
            first.close()

    def test_a_removed_database_file_refuses_writes_and_readiness(self):
        server = Server()
        try:
            path = shadow_path("gone-1", "main", "reported")
            server.post(path, {"state": {"a": 1}})
            for suffix in ("", "-wal", "-shm"):
                os.unlink(os.path.join(server.data_dir, "shadows.db" + suffix))
            r = server.post(path, {"state": {"a": 2}})
            self.assertEqual(r.status_code, 503, r.text)
            self.assertIn("removed or replaced", r.json()["error"]["message"])
            r = server.get("/readyz")
            self.assertEqual(r.status_code, 503, r.text)
            self.assertIn("removed or replaced", r.text)
            # Every write fails now, and is logged at most 10 times a second.
            started = time.monotonic()
            for _ in range(100):
                self.assertEqual(server.post(path, {"state": {"a": 3}}).status_code, 503)
            seconds = time.monotonic() - started
            failed = [line for line in server.log if "request failed" in line]
            self.assertLessEqual(len(failed), 10 * (int(seconds) + 2), failed)
            def told_what_was_left_out():
                server.post(path, {"state": {"a": 4}})  # the first line admitted in a new second tells
                return any(re.search(r"suppressed=[1-9]", line) for line in server.log)
            if seconds < 5:  # more than 10 a second failed: some were left out
                self.assertTrue(eventually(told_what_was_left_out, 5))
            self.assertTrue(server.alive())
        finally:
            server.close()

    def test_a_stored_state_gone_bad_is_the_servers_error_not_the_clients(self):
        import sqlite3
        server = Server()
        try:
            # Text that is no JSON, and JSON that is no object.
            for thing, stored in (("bad-state-1", '{"a":'), ("bad-state-2", "[1]")):
                path = shadow_path(thing, "main")
                server.post(path + "/reported", {"state": {"a": 1}})
                server.stop()
                with sqlite3.connect(os.path.join(server.data_dir, "shadows.db")) as db:
                    db.execute("UPDATE sections SET state = ? WHERE thing = ?", (stored, thing))
                server.start()
                for r in (server.get(path), server.post(path + "/reported", {"state": {"q": 1}}),
                          server.get("/v1/shadows", params={"filter": "exists(reported/a)"})):
                    self.assertEqual(r.status_code, 500, r.text)
                    self.assertEqual(r.json()["error"]["code"], "internal")
            self.assertTrue(server.alive())
        finally:
            server.close()


if __name__ == "__main__":
    unittest.main()
