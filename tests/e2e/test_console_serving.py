"""The web console's files as shadowd serves them (docs/console.md): content types, caching,
the security headers, HEAD, the redirect, 404 and 405, no token needed even on a server with
tokens, and --console false. What the pages do is tested in a browser (test_console.py)."""
import hashlib
import http.client
import os
import tempfile
import unittest

import requests

from harness import Server

CONSOLE_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "console")
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".svg": "image/svg+xml"}
SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'  # a name, not a place anything is loaded from


class ConsoleServing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tokens = tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False)
        cls.tokens.write(hashlib.sha256(b"s3cret-admin").hexdigest() + " admin\n")
        cls.tokens.close()
        os.chmod(cls.tokens.name, 0o600)
        cls.server = Server("--tokens", cls.tokens.name)
        cls.http = requests.Session()  # the console is no API v1 route: not checked against the OpenAPI document

    @classmethod
    def tearDownClass(cls):
        cls.http.close()
        cls.server.close()
        os.unlink(cls.tokens.name)

    def get(self, path, method="GET", **kw):
        return self.http.request(method, self.server.url + path, allow_redirects=False, timeout=30, **kw)

    def assertSecured(self, r):
        policy = r.headers["Content-Security-Policy"]
        self.assertIn("default-src 'self'", policy)
        self.assertIn("script-src 'self';", policy)
        self.assertNotIn("unsafe-inline", policy)
        self.assertNotIn("http", policy)  # no other origin anywhere
        self.assertEqual(r.headers["X-Content-Type-Options"], "nosniff")

    def test_every_file_is_served_as_built_with_its_type_and_without_a_token(self):
        files = sorted(os.listdir(CONSOLE_DIR))
        self.assertIn("index.html", files)
        for name in files:
            with self.subTest(name=name):
                r = self.get("/console/" + name)
                self.assertEqual(r.status_code, 200, r.text)
                self.assertEqual(r.headers["Content-Type"], TYPES[os.path.splitext(name)[1]])
                with open(os.path.join(CONSOLE_DIR, name), "rb") as f:
                    self.assertEqual(r.content, f.read())
                self.assertEqual(r.headers["Cache-Control"], "no-cache")
                self.assertRegex(r.headers["ETag"], r'^"[0-9a-f]{20}"$')
                self.assertSecured(r)

    def test_the_directory_is_index_html_and_the_bare_path_redirects(self):
        index = self.get("/console/")
        self.assertEqual(index.status_code, 200)
        self.assertEqual(index.headers["Content-Type"], "text/html; charset=utf-8")
        self.assertIn(b'<script type="module" src="app.js"></script>', index.content)
        self.assertEqual(self.get("/console/?x=1").content, index.content)
        bare = self.get("/console")
        self.assertEqual(bare.status_code, 301)
        self.assertEqual(bare.headers["Location"], "/console/")

    def test_the_page_loads_nothing_from_another_origin_and_has_no_inline_script_or_style(self):
        index = self.get("/console/").text
        self.assertNotRegex(index, r"(src|href)=\"(https?:)?//")
        self.assertNotRegex(index, r"<script>|<style|style=")
        for name in os.listdir(CONSOLE_DIR):
            text = self.get("/console/" + name).text.replace(SVG_NAMESPACE, "")
            self.assertNotRegex(text, r"https?://", name)
            self.assertNotIn("localStorage", text, name)

    def test_an_unchanged_file_is_revalidated_with_304(self):
        first = self.get("/console/app.js")
        again = self.get("/console/app.js", headers={"If-None-Match": first.headers["ETag"]})
        self.assertEqual(again.status_code, 304)
        self.assertEqual(again.content, b"")
        self.assertEqual(again.headers["ETag"], first.headers["ETag"])
        listed = self.get("/console/app.js", headers={"If-None-Match": 'W/"other", ' + first.headers["ETag"]})
        self.assertEqual(listed.status_code, 304)
        other = self.get("/console/app.js", headers={"If-None-Match": '"other"'})
        self.assertEqual(other.status_code, 200)
        self.assertEqual(other.content, first.content)

    def test_head_answers_the_get_headers_without_a_body_and_keeps_the_connection(self):
        get = self.get("/console/style.css")
        head = self.get("/console/style.css", method="HEAD")
        self.assertEqual(head.status_code, 200)
        self.assertEqual(head.content, b"")
        self.assertEqual(head.headers["Content-Length"], str(len(get.content)))
        self.assertEqual(head.headers["ETag"], get.headers["ETag"])
        # The same kept-alive connection goes on with the next request.
        self.assertEqual(self.get("/console/index.html").status_code, 200)

    def test_unknown_files_are_404_and_other_methods_405_with_the_api_error_body(self):
        for path in ("/console/nope.js", "/console/../v1/things", "/console/app.js/", "/console/APP.JS", "/consolex/"):
            with self.subTest(path=path):
                r = self.get(path)
                self.assertIn(r.status_code, (401, 404), r.text)  # /consolex/ is API v1's: it wants a token
                self.assertIn(r.json()["error"]["code"], ("not_found", "unauthorized"))
        self.assertEqual(self.get("/console/nope.js").json()["error"]["code"], "not_found")
        for method in ("POST", "PUT", "DELETE"):
            r = self.get("/console/", method=method)
            self.assertEqual(r.status_code, 405)
            self.assertEqual(r.headers["Allow"], "GET, HEAD")
            self.assertEqual(r.json()["error"]["code"], "method_not_allowed")

    def test_raw_targets_outside_the_files_are_404_never_another_file(self):
        # Sent as written (requests would normalize them): dot segments, escapes, odd bytes.
        for target in ("/console/../v1/things", "/console/%2e%2e/v1/things", "/console/..%2F..%2Fetc%2Fpasswd",
                       "/console//app.js", "/console/app.js%00", "/console/" + "a" * 4000, "/console/index.html/.."):
            with self.subTest(target=target[:60]):
                conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
                conn.request("GET", target)
                r = conn.getresponse()
                body = r.read()
                conn.close()
                self.assertEqual(r.status, 404, body)
                self.assertIn(b'"not_found"', body)

    def test_the_api_still_needs_the_token(self):
        self.assertEqual(self.get("/v1/things").status_code, 401)
        ok = self.get("/v1/things", headers={"Authorization": "Bearer s3cret-admin"})
        self.assertEqual(ok.status_code, 200)


class ConsoleOff(unittest.TestCase):
    def test_console_false_serves_no_console(self):
        os.environ["SHADOWD_CONSOLE"] = "false"  # the variable is read like the flag
        try:
            servers = [Server("--console", "false"), Server()]
        finally:
            del os.environ["SHADOWD_CONSOLE"]
        for server in servers:
            with server:
                r = requests.get(server.url + "/console/", timeout=30)
                self.assertEqual(r.status_code, 404)
                self.assertEqual(r.json()["error"]["code"], "not_found")
                self.assertNotIn("Content-Security-Policy", r.headers)

    def test_an_invalid_value_is_refused_at_start(self):
        with self.assertRaises(RuntimeError) as caught:
            Server("--console", "maybe")
        self.assertIn("--console", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
