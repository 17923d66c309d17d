"""The web console in a real browser: tests/e2e/console_browser.mjs (playwright-core driving
Debian's chromium) against shadowd on SQLite with tokens, and on DynamoDB Local as an open
server. Every screen; a live update; a conflict; As of; Redrive; a bulk job started, followed and
cancelled, and one that deletes the desired states. Labelled slow (a browser under
the sanitizers is costly); the default suite runs it, nothing skipped.

CONSOLE_SCREENSHOTS=DIR keeps PNGs of the main screens (docs/console/ holds the README's)."""
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import unittest
import uuid

from harness import SHADOWD, Server

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
ENDPOINT = os.environ.get("DS_DYNAMODB_ENDPOINT", "")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def playwright_modules():
    return subprocess.run([os.path.join(ROOT, "scripts", "playwright.sh")], capture_output=True, text=True,
                          check=True, timeout=600).stdout.strip()


def screenshots():
    """CONSOLE_SCREENSHOTS as an absolute path (a relative one is from the repository root)."""
    folder = os.environ.get("CONSOLE_SCREENSHOTS", "")
    return os.path.join(ROOT, folder) if folder else ""


def closed_port():
    """A local port where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ConsoleInBrowser(unittest.TestCase):
    """Runs the browser script against `server`; fails with its output when a step fails."""

    def run_browser(self, server, token, live, app_token=""):
        if not os.access(CHROMIUM, os.X_OK):
            self.fail(f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium")
        failures = tempfile.mkdtemp(prefix="console-failures-")
        env = dict(os.environ, CONSOLE_URL=server.url, CONSOLE_TOKEN=token, CONSOLE_APP_TOKEN=app_token, CONSOLE_LIVE=live,
                   CONSOLE_DEAD_URL=f"http://127.0.0.1:{closed_port()}/", PLAYWRIGHT_MODULES=playwright_modules(),
                   CONSOLE_SCREENSHOTS=screenshots() if live == "on" else "",
                   CONSOLE_SCREENSHOTS_ON_FAILURE=failures, CHROMIUM=CHROMIUM)
        r = subprocess.run(["node", os.path.join(HERE, "console_browser.mjs")], env=env, capture_output=True,
                           text=True, timeout=600)
        print(r.stdout)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}\nscreenshots of the failures: {failures}\n"
                                          f"server log:\n{''.join(server.log[-30:])}")
        shutil.rmtree(failures, ignore_errors=True)


class OnSqliteWithTokens(ConsoleInBrowser):
    def test_every_screen(self):
        token, app_token = "console-admin-" + uuid.uuid4().hex, "console-app-" + uuid.uuid4().hex
        with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as f:
            f.write(hashlib.sha256(token.encode()).hexdigest() + " admin\n")
            f.write(hashlib.sha256(app_token.encode()).hexdigest() + " app\n")
        os.chmod(f.name, 0o600)
        try:
            with Server("--tokens", f.name) as server:
                self.run_browser(server, token, live="on", app_token=app_token)
        finally:
            os.unlink(f.name)


class OnDynamoDbOpen(ConsoleInBrowser):
    def test_every_screen(self):
        if not ENDPOINT:
            self.fail("DS_DYNAMODB_ENDPOINT is not set: run under scripts/with-services.sh")
        table = "console-" + uuid.uuid4().hex[:12]
        made = subprocess.run([SHADOWD, "dynamodb", "create-table", "--table", table, "--dynamodb-endpoint", ENDPOINT],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(made.returncode, 0, made.stderr)
        with Server("--store", f"dynamodb:{table}", "--dynamodb-endpoint", ENDPOINT) as server:
            self.run_browser(server, "", live="on")


if __name__ == "__main__":
    unittest.main()
