"""The contract test: every response shadowd gives the end-to-end tests is checked against
docs/openapi.yaml. harness.py calls check() for each response its sessions receive.

A response is matched to the document's operation by method and path template (a literal
segment wins over a template one; a path parameter with an enum must hold one of its values).
Then:
- a documented operation: the status must be one it lists, the media type one the status lists,
  a JSON body must match the schema (JSON Schema 2020-12, formats checked), required headers
  must be there;
- a documented path with a method it does not list: 405 `method_not_allowed` whose `Allow`
  header names exactly the documented methods (so a method the server has and the document
  lacks fails here);
- an unknown path: 404 `not_found` (a route the server has and the document lacks fails here);
- and any request may be refused before routing (BEFORE_ROUTING).
"""
import atexit
import collections
import json
import os
import sys
import threading
from urllib.parse import urlsplit

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DOCUMENT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.yaml"))
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
# Statuses any request may get before it is routed, with their codes (docs/openapi.yaml, info).
BEFORE_ROUTING = {400: {"invalid_request"}, 401: {"unauthorized"}, 413: {"document_too_large"},
                  431: {"invalid_request"}, 503: {"unavailable"}}
BASE = "urn:deviceshadow:openapi"


def pointer(*parts):
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class Contract:
    def __init__(self, path=DOCUMENT):
        with open(path, encoding="utf-8") as f:
            self.document = yaml.safe_load(f)
        self.registry = Registry().with_resource(BASE, Resource.from_contents(self.document, DRAFT202012))
        self.paths = [(template.split("/")[1:], template) for template in self.document["paths"]]
        self.validators = {}
        self.lock = threading.Lock()
        self.counts = collections.Counter()  # (operation, status) -> responses checked

    # ---- the document -------------------------------------------------------------------
    def resolve(self, node):
        """Follows local $refs: returns (the node, its JSON Pointer or None if not a $ref)."""
        where = None
        while isinstance(node, dict) and "$ref" in node:
            where = node["$ref"][1:]
            node = self.document
            for part in where.split("/")[1:]:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node, where

    def validator(self, where):
        with self.lock:
            if where not in self.validators:
                self.validators[where] = Draft202012Validator(
                    {"$ref": BASE + "#" + where}, registry=self.registry,
                    format_checker=Draft202012Validator.FORMAT_CHECKER)
            return self.validators[where]

    def parameter_enum(self, item, name):
        for p in item.get("parameters", []):
            p, _ = self.resolve(p)
            if p["in"] == "path" and p["name"] == name:
                schema, _ = self.resolve(p.get("schema", {}))
                return schema.get("enum")
        return None

    def match(self, path):
        """The path template of the document that `path` (still percent-encoded) falls under."""
        segments = path.split("/")[1:]
        best, best_literals = None, -1
        for parts, template in self.paths:
            if len(parts) != len(segments):
                continue
            item = self.document["paths"][template]
            literals = 0
            for part, segment in zip(parts, segments):
                if part.startswith("{"):
                    allowed = self.parameter_enum(item, part[1:-1])
                    if allowed is not None and segment not in allowed:
                        break
                elif part != segment:
                    break
                else:
                    literals += 1
            else:
                if literals > best_literals:
                    best, best_literals = template, literals
        return best

    # ---- responses ----------------------------------------------------------------------
    def check(self, method, url, status, headers, body):
        """The ways a response breaks the document (empty when it does not)."""
        path = urlsplit(url).path
        template = self.match(path)
        item = self.document["paths"][template] if template else None
        operation = item.get(method.lower()) if item else None
        where = f"{method} {path} answered {status}"
        if operation is None:
            return self.check_unrouted(where, method, item, status, headers, body)
        problems = []
        responses = operation["responses"]
        if str(status) not in responses:
            return [f"{where}: {operation['operationId']} does not document status {status} ({sorted(responses)})"]
        response, ref = self.resolve(responses[str(status)])
        base = ref or pointer("paths", template, method.lower(), "responses", str(status))
        for name, header in response.get("headers", {}).items():
            header, _ = self.resolve(header)
            if header.get("required") and name not in headers:
                problems.append(f"{where}: header {name} is missing")
        content = response.get("content")
        media = headers.get("Content-Type", "").split(";")[0].strip()
        if not content:
            if body:
                problems.append(f"{where}: a body where the document has none")
        elif media not in content:
            problems.append(f"{where}: Content-Type {media!r}, documented {sorted(content)}")
        elif media == "application/json" or media.endswith("+json"):
            problems += self.check_json(where, base + pointer("content", media, "schema"), body)
        with self.lock:
            self.counts[(operation["operationId"], status)] += 1
        return problems

    def check_unrouted(self, where, method, item, status, headers, body):
        """A response to a method or path the document lacks."""
        if item is not None:
            expected = {405: {"method_not_allowed"}}
            documented = {m.upper() for m in METHODS if m in item}
            allow = {m.strip() for m in headers.get("Allow", "").split(",") if m.strip()}
            if status == 405 and allow != documented:
                return [f"{where}: Allow {sorted(allow)} but the document has {sorted(documented)}"]
        else:
            expected = {404: {"not_found"}}
        expected.update(BEFORE_ROUTING)
        if status not in expected:
            what = "a method the document does not list" if item is not None else "a path the document does not have"
            return [f"{where}: {what}, answered {status} (expected one of {sorted(expected)})"]
        problems = self.check_json(where, "/components/schemas/Error", body)
        if not problems and json.loads(body)["error"]["code"] not in expected[status]:
            problems.append(f"{where}: code {json.loads(body)['error']['code']} with status {status}")
        with self.lock:
            self.counts[("(undocumented)", status)] += 1
        return problems

    def check_delivery(self, headers, body):
        """The ways a webhook delivery (the document's webhook shadowEvent) breaks the document."""
        operation = self.document["webhooks"]["shadowEvent"]["post"]
        where = "webhook delivery"
        media = headers.get("Content-Type", "").split(";")[0].strip()
        content = operation["requestBody"]["content"]
        if media not in content:
            return [f"{where}: Content-Type {media!r}, documented {sorted(content)}"]
        problems = []
        for parameter in operation.get("parameters", []):
            value = headers.get(parameter["name"])
            if value is not None and not self.validator_for(parameter["schema"]).is_valid(value):
                problems.append(f"{where}: header {parameter['name']}: {value!r} does not match the document")
        problems += self.check_json(where, pointer("webhooks", "shadowEvent", "post", "requestBody", "content", media, "schema"), body)
        with self.lock:
            self.counts[(operation["operationId"], "delivery")] += 1
        return problems

    def validator_for(self, schema):
        return Draft202012Validator(schema, registry=self.registry)

    def check_json(self, where, schema, body):
        try:
            value = json.loads(body)
        except ValueError as e:
            return [f"{where}: the body is not JSON ({e}): {body[:200]!r}"]
        errors = sorted(self.validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
        return [f"{where}: at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]} (schema {schema})"
                for e in errors[:5]]

    def summary(self):
        total = sum(self.counts.values())
        operations = len({op for op, _ in self.counts if op != "(undocumented)"})
        return f"contract: {total} responses checked against docs/openapi.yaml ({operations} operations)"


CONTRACT = Contract()


@atexit.register
def _report():
    if CONTRACT.counts:
        print(CONTRACT.summary(), file=sys.stderr)
        if os.environ.get("DS_CONTRACT_STATS"):  # a file to add the counts to, as JSON lines
            with open(os.environ["DS_CONTRACT_STATS"], "a", encoding="utf-8") as f:
                for (operation, status), n in sorted(CONTRACT.counts.items()):
                    f.write(json.dumps({"operation": operation, "status": status, "count": n}) + "\n")
