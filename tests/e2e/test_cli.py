"""shadowctl against a real server: readable output, --json, exit status and error messages."""
import json
import os
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


class ServerOptions(unittest.TestCase):
    def shadowd(self, *args, env=None):
        return subprocess.run([SHADOWD, "--store", "memory", "--listen", "127.0.0.1:0", *args], capture_output=True,
                              text=True, timeout=30, env=env)

    def test_durations_beyond_a_century_are_refused_at_start(self):
        r = self.shadowd("--history-retention", "99999999999d")
        self.assertEqual(r.returncode, 1)
        self.assertIn("at most 36500d", r.stderr)

    def test_a_count_of_zero_is_refused_naming_the_option(self):
        for option in ("--workers", "--io-threads", "--notify-concurrency", "--notify-window"):
            with self.subTest(option=option):
                r = self.shadowd(option, "0")
                self.assertNotIn(r.returncode, (0, 1), r.stderr)  # a command-line error, before starting
                self.assertIn(f"{option}: must be a whole number of at least 1, not 0", r.stderr)
        r = self.shadowd(env={**os.environ, "SHADOWD_WORKERS": "0"})
        self.assertNotIn(r.returncode, (0, 1), r.stderr)
        self.assertIn("--workers: must be a whole number of at least 1, not 0", r.stderr)
        r = self.shadowd("--io-threads", "-1")  # not read as 2^64 - 1
        self.assertIn("--io-threads: must be a whole number of at least 1, not -1", r.stderr)

    def test_a_nice_level_outside_0_to_19_is_refused(self):
        for value in ("-1", "20"):
            with self.subTest(value=value):
                r = self.shadowd("--notify-nice", value)
                self.assertNotIn(r.returncode, (0, 1), r.stderr)
                self.assertIn(f"--notify-nice: Value {value} not in range 0 to 19", r.stderr)

    def test_help_shows_defaults_as_they_are_written(self):
        r = subprocess.run([SHADOWD, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        text = " ".join(r.stdout.split())  # each description is on the line after its option
        self.assertIn("--history TEXT:{true,false,stream}=true (Env:SHADOWD_HISTORY) record the history journal: true, "
                      "false, or stream", text)
        self.assertIn("--min-free-bytes UINT=67108864 (Env:SHADOWD_MIN_FREE_BYTES) SQLite: /readyz answers 503 while "
                      "the filesystem holding the database has fewer bytes free than this --", text)
        self.assertIn("lowers this to 3/4 of that limit", text)
        self.assertIn("--workers UINT:AT LEAST 1=64", text)


class Help(unittest.TestCase):
    def help(self, *args):
        r = subprocess.run([SHADOWCTL, *args, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_report_and_desire_usage_names_the_optional_shadow_name(self):
        for command in ("report", "desire"):
            with self.subTest(command=command):
                self.assertIn(f"Usage: {SHADOWCTL} {command} [OPTIONS] thing [name] state", self.help(command))

    def test_the_global_footer_is_printed_once_and_only_in_the_top_level_help(self):
        text = self.help()
        self.assertEqual(text.count("Options above go before the command"), 1, text)
        for command in (["report"], ["registrations", "put"]):
            with self.subTest(command=command):
                text = self.help(*command)
                self.assertNotIn("Options above", text)
                self.assertIn(f"Global options go before the command: shadowctl --server URL --token T --json "
                              f"{' '.join(command)} ...", text)


if __name__ == "__main__":
    unittest.main()

