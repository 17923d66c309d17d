"""Token authentication and role authorization: a case per role and per forbidden action."""
import base64
import hashlib
import subprocess
import os
import tempfile
import unittest
from urllib.parse import quote

from harness import Server, shadow_path

TOKENS = {"admin": "s3cret-admin", "app": "s3cret-app", "device": "s3cret-device", "house": "s3cret-house",
          "houseapp": "s3cret-house-app", "devshared": "s3cret-dev-shared", "kitchen": "s3cret-kitchen",
          "basement": "s3cret-basement"}


def sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


def base64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


class Auth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        fd, cls.token_file = tempfile.mkstemp()
        h = sha256
        with os.fdopen(fd, "w") as f:
            f.write("# sha256 role [patterns]\n")
            f.write(f"{h(TOKENS['admin'])} admin\n{h(TOKENS['app'])} app\n")
            f.write(f"{h(TOKENS['device'])} device\n  # a comment takes a whole line\n")
            f.write(f"{h(TOKENS['house'])} device house-1 house-2%23*\n")
            f.write(f"{h(TOKENS['houseapp'])} app house-*\n")
            f.write(f"{h(TOKENS['devshared'])} app app-dev-* shared\n")
            f.write(f"{h(TOKENS['kitchen'])} device %23kitchen\n")
            f.write(f"{h(TOKENS['basement'])} device My%20House%23Basement\n")
        cls.server = Server("--tokens", cls.token_file)
        cls.server.post(shadow_path("house-1", "main", "reported"), {"state": {"a": 1}}, token=TOKENS["admin"])

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        os.unlink(cls.token_file)

    def status(self, token, method, path, body=None):
        kw = {"json": body} if body is not None else {}
        r = self.server.request(method, path, token=TOKENS.get(token, token), **kw)
        if r.status_code in (401, 403):
            self.assertEqual(r.json()["error"]["code"], "unauthorized" if r.status_code == 401 else "forbidden")
        return r.status_code

    def test_loud_warning_only_without_token_file(self):
        self.assertFalse(any("OPEN" in l for l in self.server.log))
        self.assertTrue(any("authentication on" in l for l in self.server.log))

    def test_missing_or_wrong_token_is_401(self):
        r = self.server.get(shadow_path("house-1"))
        self.assertEqual(r.status_code, 401)
        self.assertEqual(r.headers["WWW-Authenticate"], "Bearer")
        self.assertEqual(self.status("not-a-token", "GET", shadow_path("house-1")), 401)
        r = self.server.request("GET", shadow_path("house-1"), headers={"Authorization": "Basic YTpi"})
        self.assertEqual(r.status_code, 401)

    def test_probes_answer_without_a_token(self):
        # Load balancers and Kubernetes probe without a token; /healthz says nothing, /readyz only
        # whether the store answers. /metrics still needs an admin token.
        for path in ("/healthz", "/readyz"):
            with self.subTest(path=path):
                self.assertEqual(self.server.get(path).status_code, 200)
                self.assertEqual(self.status("wrong", "GET", path), 200)
        self.assertEqual(self.server.get("/metrics").status_code, 401)
        self.assertEqual(self.status("app", "GET", "/metrics"), 403)
        self.assertEqual(self.status("admin", "GET", "/metrics"), 200)
        # A request refused before it was routed is counted under its route's template.
        self.assertEqual(self.status("wrong", "GET", shadow_path("house-1", "main", "history")), 401)
        self.assertEqual(self.status("wrong", "GET", "/v1/nothing/here"), 401)
        metrics = self.server.get("/metrics", token=TOKENS["admin"]).text
        self.assertIn('shadowd_http_requests_total{route="/v1/things/{thing}/shadows/{name}/history",method="GET",'
                      'status="401"} 1', metrics)
        self.assertIn('shadowd_http_requests_total{route="/metrics",method="GET",status="401"}', metrics)
        self.assertIn('route="unmatched",method="GET",status="401"', metrics)

    def test_admin_may_do_everything(self):
        for method, path, body in [("GET", shadow_path("house-1"), None),
                                   ("POST", shadow_path("adm", "main", "reported"), {"state": {"a": 1}}),
                                   ("POST", shadow_path("adm", "main", "desired"), {"state": {"b": 1}}),
                                   ("GET", "/v1/things", None), ("GET", "/v1/things/adm/shadows", None),
                                   ("GET", shadow_path("adm", "main", "history"), None), ("GET", "/metrics", None),
                                   ("DELETE", shadow_path("adm"), None)]:
            self.assertEqual(self.status("admin", method, path, body), 200, (method, path))

    def test_app_role(self):
        self.assertEqual(self.status("app", "GET", shadow_path("house-1")), 200)
        self.assertEqual(self.status("app", "POST", shadow_path("app-t", "main", "desired"), {"state": {"x": 1}}), 200)
        self.assertEqual(self.status("app", "GET", "/v1/things"), 200)
        self.assertEqual(self.status("app", "GET", "/v1/things/house-1/shadows"), 200)
        self.assertEqual(self.status("app", "GET", shadow_path("house-1", "main", "history")), 200)
        self.assertEqual(self.status("app", "DELETE", shadow_path("app-t")), 200)
        self.assertEqual(self.status("app", "POST", shadow_path("app-t", "main", "reported"), {"state": {"x": 1}}), 403)
        self.assertEqual(self.status("app", "GET", "/metrics"), 403)

    def test_device_role(self):
        self.assertEqual(self.status("device", "GET", shadow_path("house-1")), 200)
        self.assertEqual(self.status("device", "POST", shadow_path("dev-t", "main", "reported"), {"state": {"x": 1}}), 200)
        self.assertEqual(self.status("device", "POST", shadow_path("dev-t", "main", "desired"), {"state": {"x": 1}}), 403)
        self.assertEqual(self.status("device", "DELETE", shadow_path("dev-t")), 403)
        self.assertEqual(self.status("device", "GET", "/v1/things"), 403)
        self.assertEqual(self.status("device", "GET", "/v1/things/dev-t/shadows"), 403)
        self.assertEqual(self.status("device", "GET", shadow_path("dev-t", "main", "history")), 403)
        self.assertEqual(self.status("device", "GET", "/healthz"), 200)

    def test_thing_patterns_limit_a_token(self):
        self.assertEqual(self.status("house", "GET", shadow_path("house-1")), 200)
        self.assertEqual(self.status("house", "POST", shadow_path("house-2#kitchen", "main", "reported"), {"state": {"t": 1}}), 200)
        self.assertEqual(self.status("house", "POST", shadow_path("house-3", "main", "reported"), {"state": {"t": 1}}), 403)
        self.assertEqual(self.status("house", "GET", shadow_path("house-10")), 403)  # exact pattern, not a prefix
        r = self.server.post("/v1/batch/get", {"shadows": [{"thing": "house-1"}, {"thing": "elsewhere"}]}, token=TOKENS["house"])
        self.assertEqual([x.get("error", {}).get("code") for x in r.json()["shadows"]], [None, "forbidden"])
        r = self.server.post("/v1/batch/update", {"operations": [
            {"thing": "house-1", "section": "reported", "state": {"b": 2}},
            {"thing": "house-1", "section": "desired", "state": {"b": 2}},
            {"thing": "elsewhere", "section": "reported", "state": {"b": 2}}]}, token=TOKENS["house"])
        self.assertEqual([x.get("error", {}).get("code") for x in r.json()["results"]], [None, "forbidden", "forbidden"])

    def test_things_listing_is_filtered_by_patterns(self):
        for thing in ["house-9", "garage-1"]:
            self.server.post(shadow_path(thing, "main", "reported"), {"state": {"a": 1}}, token=TOKENS["admin"])
        everything = self.server.get("/v1/things", token=TOKENS["app"]).json()["things"]
        self.assertIn("garage-1", everything)
        mine = self.server.get("/v1/things", token=TOKENS["houseapp"]).json()["things"]
        self.assertIn("house-9", mine)
        self.assertTrue(all(t.startswith("house-") for t in mine), mine)
        self.assertEqual(self.status("houseapp", "GET", "/v1/things/garage-1/shadows"), 403)

    def test_listing_cursors_reveal_no_hidden_thing(self):
        # Regression: the cursor was the last name scanned, e.g. "#kitchen" for a token limited
        # to app-dev-* and shared, and empty pages with a cursor showed that hidden things exist.
        for thing in ["#kitchen", "app-dev-1", "app-dev-2", "apple", "shared", "shared2", "zebra"]:
            self.server.post(shadow_path(thing, "main", "reported"), {"state": {"a": 1}}, token=TOKENS["admin"])
        seen, cursor = [], None
        while True:
            query = "?limit=1" + (f"&cursor={cursor}" if cursor else "")
            r = self.server.get("/v1/things" + query, token=TOKENS["devshared"])
            self.assertEqual(r.status_code, 200, r.text)
            page = r.json()
            self.assertEqual(len(page["things"]), 1, page)  # never an empty page with a cursor
            seen += page["things"]
            if "cursor" not in page:
                break
            self.assertEqual(base64url_decode(page["cursor"]), page["things"][-1])
            cursor = page["cursor"]
        self.assertEqual(seen, ["app-dev-1", "app-dev-2", "shared"])
        # A forged cursor pointing at a hidden name reveals nothing either.
        forged = base64.urlsafe_b64encode(b"#kitchen").decode().rstrip("=")
        r = self.server.get(f"/v1/things?cursor={forged}", token=TOKENS["devshared"])
        self.assertEqual(r.json()["things"], ["app-dev-1", "app-dev-2", "shared"])

    def test_patterns_express_names_with_hash_and_spaces(self):
        # Regression: "#kitchen" was read as a comment (an unrestricted token) and
        # "My House#Basement" as the two patterns "My" and "House#Basement".
        for thing in ["#kitchen", "My House#Basement", "My", "House#Basement", "other"]:
            self.server.post(shadow_path(thing, "main", "reported"), {"state": {"a": 1}}, token=TOKENS["admin"])
        self.assertEqual(self.status("kitchen", "GET", shadow_path("#kitchen")), 200)
        self.assertEqual(self.status("kitchen", "GET", shadow_path("other")), 403)
        self.assertEqual(self.status("basement", "GET", shadow_path("My House#Basement")), 200)
        for thing in ["My", "House#Basement", "other"]:
            self.assertEqual(self.status("basement", "GET", shadow_path(thing)), 403, thing)

    def test_nothing_forbidden_was_stored(self):
        self.assertEqual(self.status("device", "POST", shadow_path("never", "main", "desired"), {"state": {"x": 1}}), 403)
        self.assertEqual(self.status("admin", "GET", shadow_path("never")), 404)


class PrivateReadyz(unittest.TestCase):
    def test_private_readyz_needs_a_token_and_healthz_still_does_not(self):
        fd, token_file = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(f"{sha256(TOKENS['device'])} device\n")
        server = Server("--tokens", token_file, "--private-readyz", "true")
        try:
            self.assertEqual(server.get("/readyz").status_code, 401)
            self.assertEqual(server.get("/readyz", token=TOKENS["device"]).status_code, 200)
            self.assertEqual(server.get("/healthz").status_code, 200)
        finally:
            server.close()
            os.unlink(token_file)


class TokenFile(unittest.TestCase):
    def test_ambiguous_lines_refuse_to_start_naming_the_line(self):
        h = sha256("x")
        for line in [f"{h} device #kitchen", f"{h} device My House#Basement", f"{h} app house-1 # comment",
                     f"{h} device 100%", f"{h} device bad%zz", f"{h} device %FF"]:
            with tempfile.NamedTemporaryFile("w", suffix=".tokens") as f:
                f.write(f"# tokens\n{h} admin\n{line}\n")
                f.flush()
                with tempfile.TemporaryDirectory() as data:
                    p = subprocess.run([os.environ.get("SHADOWD", "build/default/shadowd"), "--listen", "127.0.0.1:0",
                                        "--store", f"sqlite:{data}/s.db", "--tokens", f.name],
                                       capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0, line)
            self.assertIn("token file line 3: pattern", p.stderr, line)


if __name__ == "__main__":
    unittest.main()
