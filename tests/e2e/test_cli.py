"""shadowctl against a real server: readable output, --json, exit status and error messages."""
import json
import os
import subprocess
import tempfile
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

    def test_time_travel_get_as_of_bounds_diff_series(self):
        self.ctl("report", "cli-tt", '{"temp":{"value":20,"ts":"2026-01-01T00:00:00Z"},"mode":"eco"}')
        first = json.loads(self.ctl("--json", "history", "cli-tt", "--limit", "1").stdout)["events"][0]
        self.ctl("report", "cli-tt", '{"temp":{"value":21,"ts":"2026-01-01T00:01:00Z"},"mode":null}')
        for moment in (first["id"], first["timestamp"]):
            with self.subTest(moment=moment):
                r = self.ctl("--json", "get", "cli-tt", "--as-of", moment)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["reported"]["state"]["mode"], "eco")
        r = self.ctl("get", "cli-tt", "main", "--as-of", first["id"])
        self.assertIn(f"as of {first['timestamp']}  event {first['id']}", r.stdout)

        r = self.ctl("history", "cli-tt", "--bounds")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"oldest  {first['timestamp']}  {first['id']}  reported v1  desired v0", r.stdout)
        self.assertIn("complete", r.stdout)
        self.assertNotEqual(self.ctl("history", "cli-tt", "--bounds", "--order", "asc").returncode, 0)

        for args in ((first["id"],), ("main", first["id"]), (first["timestamp"], first["id"])):
            with self.subTest(args=args):
                r = self.ctl("diff", "cli-tt", *args)
                self.assertEqual(r.returncode, 0, r.stderr)
                if len(args) == 2 and args[0] != "main":
                    self.assertNotIn("remove", r.stdout)
                else:
                    self.assertIn("remove reported /mode", r.stdout)
                    self.assertIn("update reported /temp", r.stdout)

        r = self.ctl("series", "cli-tt", "/temp")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertIn('v2  {"value":21,"ts":"2026-01-01T00:01:00Z"}  ts 2026-01-01T00:01:00.000000000Z', lines[1])
        self.assertIn("(removed)", self.ctl("series", "cli-tt", "main", "/mode").stdout.splitlines()[1])
        page = json.loads(self.ctl("--json", "series", "cli-tt", "/temp", "--limit", "1").stdout)
        self.assertEqual(len(page["series"]), 1)
        self.assertIn("cursor", page)
        r = self.ctl("series", "cli-tt", "temp")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("invalid_request", r.stderr)

    def test_readable_output_escapes_what_a_device_could_use_to_drive_a_terminal(self):
        # A device token writes the client token and state keys; an operator reads them.
        evil = "\x1b]0;pwned\x07\x1b[2J\u009b31m"
        body = {"state": {f"k{evil}": f"v{evil}", "t": {"ts": 1700000000, "v": evil}}, "clientToken": f"tok{evil}"}
        self.assertEqual(self.server.post("/v1/things/cli-esc/shadows/main/reported", body).status_code, 200)
        for args in (("get", "cli-esc"), ("history", "cli-esc"), ("list", "cli-esc"), ("things", "--prefix", "cli-e")):
            with self.subTest(args=args):
                r = self.ctl(*args)
                self.assertEqual(r.returncode, 0, r.stderr)
                for raw in ("\x1b", "\x07", "\u009b"):
                    self.assertNotIn(raw, r.stdout)
        self.assertIn("clientToken tok\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m", self.ctl("get", "cli-esc").stdout)
        # --json output is JSON: escaped by JSON's own rules.
        self.assertEqual(json.loads(self.ctl("--json", "get", "cli-esc").stdout)["reported"]["clientToken"], f"tok{evil}")

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

    def refused(self, message, *args, env=None):
        """A bad option stops shadowd before it starts: one line naming the option, exit status 2."""
        r = self.shadowd(*args, env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, f"shadowd: {message}\n")

    def test_a_database_that_cannot_be_made_is_a_clear_error(self):
        with tempfile.NamedTemporaryFile() as f:  # a file where a directory should be
            r = subprocess.run([SHADOWD, "--store", f"sqlite:{f.name}/shadows.db", "--listen", "127.0.0.1:0"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"shadowd: cannot create the directory of {f.name}/shadows.db: Not a directory", r.stderr)

    def test_durations_beyond_a_century_are_refused_at_start(self):
        self.refused("--history-retention: 99999999999d is longer than 36500d", "--history-retention", "99999999999d")
        self.refused("--history-retention: 99999999999999999999d is longer than 36500d",
                     "--history-retention", "99999999999999999999d")
        self.refused("--tombstone-retention: '' is not a duration (a whole number and s, m, h or d: 90s, 15m, 48h, 30d)",
                     "--tombstone-retention", "")

    def test_a_count_of_zero_is_refused_naming_the_option(self):
        for option, most in (("--workers", 4096), ("--io-threads", 256), ("--notify-concurrency", 1024),
                             ("--notify-window", 10000000)):
            with self.subTest(option=option):
                self.refused(f"{option}: 0 is out of range (1-{most})", option, "0")
        self.refused("--workers: 0 is out of range (1-4096)", env={**os.environ, "SHADOWD_WORKERS": "0"})
        self.refused("--io-threads: '-1' is not a whole number (1-256)", "--io-threads", "-1")  # not 2^64 - 1

    def test_a_nice_level_outside_0_to_19_is_refused(self):
        self.refused("--notify-nice: '-1' is not a whole number (0-19)", "--notify-nice", "-1")
        self.refused("--notify-nice: 20 is out of range (0-19)", "--notify-nice", "20")

    def test_ports_out_of_range_are_refused_not_wrapped(self):
        self.refused("--listen: port 70000 is out of range (0-65535)", "--listen", "127.0.0.1:70000")
        self.refused("--listen: port 65536 is out of range (0-65535)", "--listen", "127.0.0.1:65536")
        self.refused("--listen: port -1 is out of range (0-65535)", "--listen", "127.0.0.1:-1")
        self.refused("--mqtt: port '71883' is out of range (1-65535) in mqtt://127.0.0.1:71883",
                     "--mqtt", "mqtt://127.0.0.1:71883")

    def test_numbers_that_would_break_every_connection_or_spin_are_refused(self):
        self.refused("--max-body-bytes: '' is not a whole number (1-4294967296)", "--max-body-bytes", "")
        self.refused("--max-connections: 99999999999999999999 is out of range (1-9223372036854775807)",
                     "--max-connections", "99999999999999999999")
        self.refused("--read-timeout-ms: 0 is out of range (1-3600000)", "--read-timeout-ms", "0")
        self.refused("--read-timeout-ms: '-1' is not a whole number (1-3600000)", "--read-timeout-ms", "-1")
        self.refused("--idle-timeout-ms: '-1' is not a whole number (1-3600000)", "--idle-timeout-ms", "-1")
        self.refused("--purge-interval: must be at least 1s, not 0", "--purge-interval", "0")

    def test_a_store_without_a_path_is_refused(self):
        self.refused("--store: sqlite: needs a file path, as in sqlite:./shadowd-data/shadows.db", "--store", "sqlite:")

    def test_a_config_file_sets_options_and_is_checked_like_flags(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write('listen = "127.0.0.1:70000"\n')
            f.flush()
            r = subprocess.run([SHADOWD, "--store", "memory", "--config", f.name], capture_output=True, text=True,
                               timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, "shadowd: --listen: port 70000 is out of range (0-65535)\n")

    def test_help_shows_defaults_as_they_are_written(self):
        r = subprocess.run([SHADOWD, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        text = " ".join(r.stdout.split())  # each description is on the line after its option
        self.assertIn("--history TEXT:{true,inline,false,off,stream}=true (Env:SHADOWD_HISTORY) record the history "
                      "journal: true (or inline: in each write's transaction), false (or off), or stream", text)
        self.assertIn("--min-free-bytes UINT=67108864 (Env:SHADOWD_MIN_FREE_BYTES) SQLite: /readyz answers 503 while "
                      "the filesystem holding the database has fewer bytes free than this --", text)
        self.assertIn("lowers this to 3/4 of that limit", text)
        self.assertIn("--workers UINT:1-4096=64", text)


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

