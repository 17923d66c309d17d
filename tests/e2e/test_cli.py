"""shadowctl against a real server: readable output, --json, exit status and error messages."""
import json
import subprocess
import unittest

from harness import SHADOWCTL, SHADOWD, ServerTestCase


class Cli(ServerTestCase):
    def ctl(self, *args, stdin=None):
        return subprocess.run([SHADOWCTL, "--server", self.server.url, *args], input=stdin, capture_output=True,
                              text=True, timeout=30)

    def test_report_desire_get_round_trip(self):
        r = self.ctl("desire", "cli thing#1", '{"sp":22,"mode":"eco"}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("add desired /sp", r.stdout)
        r = self.ctl("report", "cli thing#1", "main", "-", "--client-token", "dev-7", stdin='{"sp":22}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("acknowledged /sp", r.stdout)
        r = self.ctl("--json", "get", "cli thing#1")
        self.assertEqual(r.returncode, 0)
        body = json.loads(r.stdout)
        self.assertEqual(body["reported"]["state"], {"sp": 22})
        self.assertEqual(body["reported"]["clientToken"], "dev-7")
        self.assertEqual(body["delta"], {"mode": "eco"})
        r = self.ctl("get", "cli thing#1")
        self.assertIn("reported  version 1", r.stdout)
        self.assertIn('"mode": "eco"', r.stdout)

    def test_list_things_history_delete(self):
        self.ctl("report", "cli-2", "aux", '{"a":1}')
        self.ctl("report", "cli-2", '{"a":2}')
        self.assertEqual([line.split()[0] for line in self.ctl("list", "cli-2").stdout.splitlines()], ["aux", "main"])
        self.assertIn("cli-2", self.ctl("things", "--prefix", "cli-").stdout.split())
        h = self.ctl("--json", "history", "cli-2", "aux")
        self.assertEqual(len(json.loads(h.stdout)["events"]), 1)
        d = self.ctl("delete", "cli-2", "aux")
        self.assertEqual(d.returncode, 0)
        self.assertIn("deleted reported", d.stdout)

    def test_failures_exit_non_zero_with_the_server_message(self):
        r = self.ctl("get", "cli-nobody")
        self.assertEqual(r.returncode, 1)
        self.assertIn("not_found", r.stderr)
        r = self.ctl("report", "cli-3", '{"t":{"ts":"noon"}}')
        self.assertEqual(r.returncode, 1)
        self.assertIn("invalid_timestamp", r.stderr)
        r = self.ctl("report", "cli-3", '{"a":1}', "--version", "5")
        self.assertEqual(r.returncode, 1)
        self.assertIn("version_conflict", r.stderr)
        r = subprocess.run([SHADOWCTL, "--server", "http://127.0.0.1:1", "get", "x"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot reach", r.stderr)


if __name__ == "__main__":
    unittest.main()


class ServerOptions(unittest.TestCase):
    def test_durations_beyond_a_century_are_refused_at_start(self):
        r = subprocess.run([SHADOWD, "--store", "memory", "--listen", "127.0.0.1:0", "--history-retention", "99999999999d"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("at most 36500d", r.stderr)

