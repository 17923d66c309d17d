#!/usr/bin/env python3
"""Requests of botocore's own iot-data client, signed by botocore, for the C++ SigV4 verifier to
accept (tests/awsiot/sigv4_verifier_test.cpp runs this script).

Each call goes through the client as an application makes it (GetThingShadow, UpdateThingShadow,
DeleteThingShadow, ListNamedShadowsForThing); a before-send hook takes the request botocore would
put on the wire and answers it locally. A few are signed again for the service name
iotdevicegateway. Prints one JSON object per line:
{"name", "method", "target", "headers": [[name, value]...], "body", "access_key", "signed_at"}
where signed_at is X-Amz-Date in seconds since the epoch. The keys are those of
CREDENTIALS below, which the C++ test loads as a credentials file."""
import calendar
import json
import sys
import time
from urllib.parse import urlsplit

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.credentials import Credentials

ENDPOINT = "http://127.0.0.1:8443"
# access key id, secret; the C++ test gives the first the admin role, the second device.
CREDENTIALS = [("AKIAADMINEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), ("device-key-1", "s3cr3t+/=key")]
NAMES = ["main", "a b", "has#hash", "100%", "é☃", "a/b", "plus+sign", "$package", "my:thing", "semi;colon", "~tilde"]


class _EmptyBody:
    def stream(self, **_):
        return iter([b"{}"])


def client(key, region):
    session = botocore.session.get_session()
    c = session.create_client("iot-data", region_name=region, endpoint_url=ENDPOINT,
                              aws_access_key_id=key[0], aws_secret_access_key=key[1])
    sent = []

    def capture(request, **_):
        sent.append(request)
        return AWSResponse(request.url, 200, {}, _EmptyBody())

    c.meta.events.register("before-send", capture)
    return c, sent


def wire_headers(url, headers, body):
    """The headers as they reach the server: the transport adds Host (and Content-Length)."""
    out = [["Host", urlsplit(url).netloc]]
    for name, value in headers.items():
        if name.lower() == "host":
            continue
        out.append([name, value.decode() if isinstance(value, bytes) else value])
    if body and not any(n.lower() == "content-length" for n, _ in out):
        out.append(["Content-Length", str(len(body))])
    out.append(["Accept-Encoding", "identity"])
    return out


def record(name, request, key):
    parts = urlsplit(request.url)
    target = parts.path + ("?" + parts.query if parts.query else "")
    body = request.body or b""
    if not isinstance(body, bytes):
        body = body.encode()
    headers = wire_headers(request.url, request.headers, body)
    amz_date = next(v for n, v in headers if n.lower() == "x-amz-date")
    signed_at = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    return {"name": name, "method": request.method, "target": target, "headers": headers,
            "body": body.decode(), "access_key": key[0], "signed_at": signed_at}


def main():
    out = []
    for key, region in [(CREDENTIALS[0], "us-east-1"), (CREDENTIALS[1], "eu-north-1")]:
        c, sent = client(key, region)
        for thing in ["thing-1", "my thing", "t#1%", "ünï"]:
            c.get_thing_shadow(thingName=thing)
            for shadow in NAMES:
                c.get_thing_shadow(thingName=thing, shadowName=shadow)
        for shadow in NAMES:
            payload = json.dumps({"state": {"reported": {"temp": 21.5, "note": "é ☃ #%"}}}, ensure_ascii=False)
            c.update_thing_shadow(thingName="thing-1", shadowName=shadow, payload=payload.encode())
            c.delete_thing_shadow(thingName="thing-1", shadowName=shadow)
        c.update_thing_shadow(thingName="thing-1", payload=b'{"state":{"desired":{"on":true}}}')
        c.list_named_shadows_for_thing(thingName="thing-1")
        c.list_named_shadows_for_thing(thingName="my thing", pageSize=5, nextToken="a+b/c=d e")
        out += [record("%s %s" % (r.method, r.url), r, key) for r in sent]

    # The same requests signed for the other service name AWS IoT accepts.
    for i in range(0, len(out), 7):
        v = out[i]
        key = next(k for k in CREDENTIALS if k[0] == v["access_key"])
        request = AWSRequest(method=v["method"], url=ENDPOINT + v["target"], data=v["body"].encode(),
                             headers={"Host": urlsplit(ENDPOINT).netloc})
        SigV4Auth(Credentials(*key), "iotdevicegateway", "ap-south-1").add_auth(request)
        out.append(record("iotdevicegateway " + v["name"], request, key))

    for v in out:
        print(json.dumps(v, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
