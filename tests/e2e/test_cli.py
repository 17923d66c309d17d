"""shadowctl against a real server: readable output, --json, exit status and error messages."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import requests

from harness import SHADOWCTL, SHADOWD, Server, ServerTestCase


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

    def test_options_are_checked_before_anything_is_sent(self):
        """Numbers that would wrap, empty values and unknown sections are refused by shadowctl (status
        105, CLI11's for a bad value), naming the option; nothing reaches the server."""
        self.assertEqual(self.ctl("report", "cli-opt", '{"a":1}').returncode, 0)
        for args, named in [(("desire", "cli-opt", '{"a":1}', "--version", "-1"), "--version"),
                            (("desire", "cli-opt", '{"a":1}', "--version", "99999999999999999999"), "--version"),
                            (("things", "--limit", "0"), "--limit"), (("things", "--limit", "-5"), "--limit"),
                            (("jobs", "start", 'eq(thing,"cli-opt")', "--desired", '{"a":2}', "--rate", "nan"), "--rate"),
                            (("jobs", "start", 'eq(thing,"cli-opt")', "--desired", '{"a":2}', "--rate", "0x10"), "--rate"),
                            (("jobs", "start", 'eq(thing,"cli-opt")', "--desired", '{"a":2}', "--abort-after", "-1"),
                             "--abort-after"),
                            (("delete", "cli-opt", "--section", "bogus"), "--section"),
                            (("report", "cli-opt", '{"a":1}', "--tz", ""), "--tz"), (("find", ""), "filter"),
                            (("registrations", "get", ""), "id"), (("get", "cli-opt", "--as-of", ""), "--as-of")]:
            r = self.ctl(*args)
            self.assertEqual(r.returncode, 105, (args, r.stderr))
            self.assertTrue(r.stderr.startswith(named + ":"), (args, r.stderr))
        self.assertEqual(len(json.loads(self.ctl("--json", "history", "cli-opt").stdout)["events"]), 1)  # no write went
        r = subprocess.run([SHADOWCTL, "--server", self.server.url, "--token", "abc\r\nX-Evil: 1", "get", "cli-opt"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 105, r.stderr)
        self.assertIn("--token: a token is visible ASCII", r.stderr)

    def test_server_urls_and_names_that_urls_could_bend(self):
        """A trailing '/' in --server (or SHADOWCTL_SERVER) is dropped; a query or fragment is refused;
        the names "." and ".." are shadows like any other."""
        for server in (self.server.url + "/", self.server.url + "//"):
            r = subprocess.run([SHADOWCTL, "--server", server, "report", "cli-url", '{"a":1}'], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
        env = dict(os.environ, SHADOWCTL_SERVER=self.server.url + "/")
        r = subprocess.run([SHADOWCTL, "get", "cli-url"], capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([SHADOWCTL, "--server", self.server.url + "/?x=1", "get", "cli-url"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 105, r.stderr)
        self.assertIn("--server: expected http://HOST[:PORT]", r.stderr)
        for name in (".", ".."):
            self.assertEqual(self.ctl("report", name, name, '{"n":1}').returncode, 0)
            encoded = name.replace(".", "%2E")
            r = self.server.get(f"/v1/things/{encoded}/shadows/{encoded}")
            self.assertEqual(r.json()["reported"]["state"], {"n": 1})
            self.assertIn(f"thing {name}  shadow {name}", self.ctl("get", name, name).stdout)

    def test_states_as_deep_as_the_server_allows_are_read_and_shown(self):
        deep = {"v": 1}
        for _ in range(150):
            deep = {"k": deep}
        with Server("--max-depth", "200") as server:
            r = subprocess.run([SHADOWCTL, "--server", server.url, "report", "cli-deep", "-"], input=json.dumps(deep),
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([SHADOWCTL, "--server", server.url, "get", "cli-deep"], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count('"k"'), 150)

    def test_an_answer_of_another_shape_prints_nothing_but_the_error(self):
        """Not shadowd (here: a web server answering every path with a JSON array) makes shadowctl
        fail without printing half a table."""
        import http.server
        import threading

        class Other(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"[1,2,3]"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        other = http.server.HTTPServer(("127.0.0.1", 0), Other)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            for args in (("get", "x"), ("things",), ("list", "x")):
                r = subprocess.run([SHADOWCTL, "--server", f"http://127.0.0.1:{other.server_port}", *args],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertIn("with an answer of another shape than expected", r.stderr)
        finally:
            other.shutdown()


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

    def test_a_config_file_line_shadowd_would_not_read_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write('store = "memory"\nmax_body_bytes = 5\n')
            f.flush()
            self.refused(f"--config: {f.name} line 2: no option is called max_body_bytes", "--config", f.name)

    def test_a_token_file_that_would_not_do_what_it_says_stops_shadowd(self):
        """An empty path, a file granting nothing, or one others may write: status 2 or 1, never an
        open server or one that refuses everyone."""
        self.refused("--tokens: the token file's path must not be empty", "--tokens", "")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tokens")
            for text, mode, message in [("# none yet\n", 0o644, "holds no token"),
                                        ("0" * 64 + " admin\n", 0o666, "has mode 0666"),
                                        ("0" * 64 + " device x\n" + "0" * 64 + " admin\n", 0o600,
                                         "line 2: this token's hash is on an earlier line too")]:
                with open(path, "w") as f:
                    f.write(text)
                os.chmod(path, mode)
                r = self.shadowd("--tokens", path)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(message, r.stderr)
            r = self.shadowd("--tokens", d)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("is not a regular file", r.stderr)

    def test_a_database_named_without_a_directory_is_made_where_shadowd_runs(self):
        with tempfile.TemporaryDirectory() as d:
            server = subprocess.Popen([os.path.abspath(SHADOWD), "--store", "sqlite:shadows.db", "--listen", "127.0.0.1:0"],
                                      cwd=d, stderr=subprocess.PIPE, text=True)
            try:
                lines = [server.stderr.readline() for _ in range(2)]
                while "listening" not in lines[-1] and lines[-1]:
                    lines.append(server.stderr.readline())
                self.assertIn("listening", lines[-1], lines)
                self.assertTrue(os.path.exists(os.path.join(d, "shadows.db")))
            finally:
                server.terminate()
                self.assertEqual(server.wait(timeout=30), 0)

    def test_a_stop_does_not_wait_a_read_timeout_for_a_stalled_body(self):
        """A client that sent half a body holds SIGTERM for at most 2 s, not --read-timeout-ms."""
        import socket
        import time
        server = Server("--store", "memory", "--read-timeout-ms", "60000")
        try:
            with socket.create_connection(("127.0.0.1", server.port)) as stalled:
                stalled.sendall(b"POST /v1/things/a/shadows/main/reported HTTP/1.1\r\nHost: x\r\n"
                                b"Content-Length: 100\r\n\r\n{\"state\":")
                time.sleep(0.3)
                started = time.monotonic()
                self.assertEqual(server.stop(), 0)
                self.assertLess(time.monotonic() - started, 20)  # a bound on liveness: 60 s before
        finally:
            server.close()

    def test_sighup_stops_as_sigterm_does_and_a_log_nobody_reads_ends_nothing(self):
        """The log's reader goes away (a pipe to a restarted log shipper): the next lines fail to be
        written, and the server neither dies of SIGPIPE nor stops serving."""
        import re
        import signal
        read_end, write_end = os.pipe()
        server = subprocess.Popen([SHADOWD, "--listen", "127.0.0.1:0", "--store", "memory"],
                                  stdout=subprocess.DEVNULL, stderr=write_end)
        os.close(write_end)
        try:
            log = b""
            with os.fdopen(read_end, "rb") as reader:
                while b"listening" not in log:
                    chunk = reader.readline()
                    self.assertTrue(chunk, log)
                    log += chunk
            port = int(re.search(rb"listening address=127\.0\.0\.1:(\d+)", log).group(1))
            url = f"http://127.0.0.1:{port}/v1/things/a/shadows/main/reported"
            self.assertEqual(requests.post(url, json={"state": {"n": 1}}, timeout=30).status_code, 200)
            server.send_signal(signal.SIGHUP)  # logs "stopped" into the closed pipe on its way out
            self.assertEqual(server.wait(timeout=30), 0)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()

    def test_under_nohup_sighup_is_ignored(self):
        import signal
        ignore = lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)
        server = Server("--store", "memory", preexec_fn=ignore)
        try:
            server.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            self.assertTrue(server.alive())
            self.assertEqual(server.get("/healthz").status_code, 200)
            self.assertEqual(server.stop(), 0)
        finally:
            server.close()

    def test_help_shows_defaults_as_they_are_written(self):
        r = subprocess.run([SHADOWD, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        text = " ".join(r.stdout.split())  # each description is on the line after its option
        self.assertIn("--history TEXT:{true,inline,false,off,stream}=true (Env:SHADOWD_HISTORY) record the history "
                      "journal: true (or inline: in each write's transaction), false (or off), or stream", text)
        self.assertIn("--min-free-bytes UINT:>=0=67108864 (Env:SHADOWD_MIN_FREE_BYTES) SQLite: /readyz answers 503 while "
                      "the filesystem holding the database has fewer bytes free than this --", text)
        self.assertIn("lowers this to 3/4 of the descriptors that limit leaves once started", text)
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

