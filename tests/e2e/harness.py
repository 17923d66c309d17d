"""Starts a real shadowd for end-to-end tests and talks to it over HTTP."""
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from urllib.parse import quote

import requests

import exposition
from contract import CONTRACT

SHADOWD = os.environ.get("SHADOWD", "build/default/shadowd")
SHADOWCTL = os.environ.get("SHADOWCTL", "build/default/shadowctl")


class ContractViolation(AssertionError):
    """A response of shadowd that docs/openapi.yaml does not allow."""


# Violations seen on threads other than the main one, where raising fails no test: the next
# Server.close() raises them.
_thread_violations = []


def check_contract(response, *args, **kwargs):
    """A requests response hook: checks the response against docs/openapi.yaml (contract.py)."""
    # A live stream's body never ends: its headers are checked (read it with stream=True).
    streamed = response.headers.get("Content-Type", "").startswith("text/event-stream")
    problems = CONTRACT.check(response.request.method, response.request.path_url, response.status_code,
                              response.headers, b"" if streamed else response.content)
    if problems:
        if threading.current_thread() is not threading.main_thread():
            _thread_violations.extend(problems)
        raise ContractViolation("\n".join(problems))


def checked_session():
    """A requests session whose every response is checked against docs/openapi.yaml. Give each
    thread its own."""
    s = requests.Session()
    s.hooks["response"].append(check_contract)
    return s


class Server:
    """One shadowd process on a free port; stderr is kept for inspection. `open_files`: its
    open-file limit, soft and hard (shadowd raises the soft one to the hard one). `port`: 0 for a
    free one, or a given one (to restart a server where its clients look for it)."""

    def __init__(self, *args, data_dir=None, open_files=None, port=0, preexec_fn=None):
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="shadowd-e2e-")
        self.requested_port = port
        self.args = list(args)
        self.open_files = open_files
        self.preexec_fn = preexec_fn  # run in the child before shadowd starts
        self.proc = None
        self.log = []
        self.start()

    def start(self):
        store = [] if any(a.startswith("--store") for a in self.args) else ["--store", f"sqlite:{self.data_dir}/shadows.db"]
        def limit():
            if self.open_files:
                resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))
            if self.preexec_fn:
                self.preexec_fn()
        self.proc = subprocess.Popen([SHADOWD, "--listen", f"127.0.0.1:{self.requested_port}", *store, *self.args],
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=limit)
        self.log = []
        deadline = time.time() + 20
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                self.proc.wait(timeout=30)
                self.proc.stderr.close()
                raise RuntimeError("shadowd exited: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening address=127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        else:
            raise RuntimeError("shadowd did not start")
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"
        self.session = checked_session()

    def _drain(self, stream):
        with stream:
            for line in stream:
                self.log.append(line)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.session.close()
        return self.proc.returncode

    def close(self):
        self.check_metrics()
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if _thread_violations:
            problems = "\n".join(_thread_violations)
            _thread_violations.clear()
            raise ContractViolation(problems)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check_metrics(self):
        """Reads /metrics as Prometheus does (exposition.py), as every test leaves it: whatever
        the test made shadowd count must keep the exposition valid. A server behind tokens or no
        longer running is passed over."""
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            r = self.session.get(self.url + "/metrics", timeout=30)
        except requests.RequestException:
            return
        if r.status_code == 200:
            found = exposition.problems(r.text)
            if found:
                _thread_violations.append("/metrics is not valid Prometheus text: " + "; ".join(found[:10]))

    def alive(self):
        return self.proc.poll() is None and self.get("/healthz").status_code == 200

    # HTTP helpers: paths are given unencoded pieces via shadow_path.
    def request(self, method, path, token=None, **kw):
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return self.session.request(method, self.url + path, headers=headers, timeout=30, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, json=body, **kw) if body is not None else self.request("POST", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)


def kill_9_under_load(server, writers, seconds):
    """Runs each writers[i](stop) in a thread, SIGKILLs shadowd after `seconds` while they write,
    then sets `stop` (a threading.Event) and waits for them."""
    stop = threading.Event()
    threads = [threading.Thread(target=w, args=(stop,)) for w in writers]
    for t in threads:
        t.start()
    time.sleep(seconds)
    server.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()


def eventually(check, timeout=30.0):
    """Polls check() until it returns a true value and returns that value, or the last one after
    `timeout` seconds (a bound on liveness, not a timing test)."""
    deadline = time.time() + timeout
    while True:
        value = check()
        if value or time.time() > deadline:
            return value
        time.sleep(0.02)


def shadow_path(thing, name="main", *rest):
    return "/v1/things/" + quote(thing, safe="") + "/shadows/" + quote(name, safe="") + "".join("/" + r for r in rest)


class ApiTestCase(unittest.TestCase):
    """Assertions on the API's answers."""

    def assertError(self, response, status, code):
        self.assertEqual(response.status_code, status, response.text)
        self.assertEqual(response.headers["Content-Type"], "application/json")
        body = response.json()
        self.assertEqual(body["error"]["code"], code, body)
        self.assertTrue(body["error"]["message"])
        return body["error"]


class ServerTestCase(ApiTestCase):
    """A test class sharing one open server on SQLite."""

    server_args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = Server(*cls.server_args)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
