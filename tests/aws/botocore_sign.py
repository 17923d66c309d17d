#!/usr/bin/env python3
"""Generates random requests and signs them with botocore's SigV4Auth, for the C++ signer to
match. Prints one JSON object per line. Usage: botocore_sign.py COUNT SEED"""
import json
import random
import sys

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

count, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
ALPHABET = "abcXYZ019-_.~ !$&'()*+,;=:@%/é☃"


def text(n, alphabet=ALPHABET):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))


for i in range(count):
    segments = [rng.choice([text(8, ALPHABET.replace("/", "")), ".", "..", ""]) for _ in range(rng.randint(0, 4))]
    path = "/" + "/".join(segments) + rng.choice(["", "/"])
    query = {text(6, "abcXYZ019-_.~ =&é") or "k": text(8) for _ in range(rng.randint(0, 4))}
    host = rng.choice(["dynamodb.us-east-1.amazonaws.com", "127.0.0.1:8000", "localhost"])
    headers = {"Host": host}
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(["Content-Type", "X-Amz-Target", "X-Custom-Header", "x-lower", "X-Multi"])
        headers[name] = rng.choice(["  padded   value  ", "application/x-amz-json-1.0", "a\tb  c", text(10, "abc =;,")])
    body = text(50, ALPHABET + '{}"[]') if rng.random() < 0.7 else ""
    method = rng.choice(["GET", "POST", "PUT", "DELETE"])
    region = rng.choice(["us-east-1", "eu-north-1", "local"])
    service = rng.choice(["dynamodb", "sqs", "iam"])
    token = text(20, "abcdefXYZ0123456789/+=") if rng.random() < 0.5 else ""
    # Half the requests keep the previous day or secret, so the signer's key cache both hits and
    # misses; some secrets are longer than the HMAC block (64 bytes).
    if i == 0 or rng.random() < 0.5:
        timestamp = "2026%02d%02dT%02d%02d%02dZ" % (rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                                                    rng.randint(0, 59), rng.randint(0, 59))
    if i == 0 or rng.random() < 0.5:
        secret = text(rng.choice([30, 90]), "abcdefXYZ0123456789/+") or "s"
    creds = Credentials("AKID" + str(i), secret, token or None)
    signed_headers = dict(headers)
    signed_headers["X-Amz-Date"] = timestamp
    if token:
        signed_headers["X-Amz-Security-Token"] = token
    request = AWSRequest(method=method, url="http://" + host + path, params=query, headers=signed_headers,
                         data=body.encode())
    request.context["timestamp"] = timestamp
    auth = SigV4Auth(creds, service, region)
    canonical = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical), request)
    authorization = "AWS4-HMAC-SHA256 Credential=%s, SignedHeaders=%s, Signature=%s" % (
        auth.scope(request), auth.signed_headers(auth.headers_to_sign(request)), signature)
    print(json.dumps({"method": method, "path": path, "query": list(query.items()), "headers": list(headers.items()),
                      "body": body, "region": region, "service": service, "amz_date": timestamp,
                      "access_key": creds.access_key, "secret": creds.secret_key, "token": token,
                      "canonical_request": canonical, "authorization": authorization}))
