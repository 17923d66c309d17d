"""docs/openapi.yaml against the running server: shadowd serves it, without a token, and answers
each documented path with exactly the documented methods. (Every response of every suite is
checked against the document as well: contract.py, called by the harness.)"""
import hashlib
import os
import tempfile
import unittest
from urllib.parse import quote

from contract import CONTRACT, METHODS
from harness import Server, ServerTestCase

# A value for each path parameter of the document, to fill its path templates with.
SAMPLES = {"thing": "probe/thing #1", "name": "main", "section": "reported", "id": "probe", "eventId": "1#R1"}
# Paths the document does not have: each must be 404 (contract.py checks the answers).
UNKNOWN_PATHS = ["/", "/v1", "/v2/things", "/v1/things/a", "/v1/things/a/shadow/main",
                 "/v1/things/a/shadows/main/other", "/v1/things/a/shadows/main/reported/x", "/v1/batch",
                 "/v1/batch/delete", "/v1/registrations/p/other", "/v1/registrations/p/dead-letters/a/b",
                 "/healthz/x", "/openapi.json", "/v1/openapi.yaml"]


def fill(template):
    return "/".join(quote(SAMPLES[p[1:-1]], safe="") if p.startswith("{") else p for p in template.split("/"))


class Contract(ServerTestCase):
    def test_serves_the_document_as_json(self):
        r = self.server.get("/v1/openapi.json")
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(r.headers["Content-Type"], "application/json")
        self.assertEqual(r.json(), CONTRACT.document)

    def test_each_documented_path_answers_exactly_its_documented_methods(self):
        # An undocumented method must be a 405 whose Allow header lists the documented ones
        # (checked by contract.py); a documented one must reach its operation.
        for template, item in CONTRACT.document["paths"].items():
            for method in METHODS[:5]:
                with self.subTest(method=method.upper(), path=template):
                    # A live stream answers with a body that never ends: only its head is read.
                    r = self.server.request(method.upper(), fill(template), stream=template.endswith("/events"))
                    r.close()
                    if method in item:
                        self.assertNotEqual(r.status_code, 405, r.text)
                        if r.status_code == 404:
                            self.assertNotIn("no such endpoint", r.json()["error"]["message"])

    def test_unknown_paths_are_not_found(self):
        for path in UNKNOWN_PATHS:
            for method in ("GET", "POST"):
                with self.subTest(method=method, path=path):
                    self.assertError(self.server.request(method, path), 404, "not_found")


class PublicDocument(unittest.TestCase):
    def test_the_document_needs_no_token_when_everything_else_does(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tokens") as tokens:
            tokens.write(hashlib.sha256(b"t0ken").hexdigest() + " admin\n")
            tokens.flush()
            os.chmod(tokens.name, 0o600)
            with Server("--tokens", tokens.name) as server:
                self.assertEqual(server.get("/v1/openapi.json").status_code, 200)
                self.assertEqual(server.get("/healthz").status_code, 200)  # probes carry no token
                self.assertEqual(server.get("/v1/things").status_code, 401)
                self.assertEqual(server.get("/v1/openapi.json", token="wrong").status_code, 200)
                self.assertEqual(server.request("POST", "/v1/openapi.json").status_code, 405)


if __name__ == "__main__":
    unittest.main()
