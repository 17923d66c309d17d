// A device built on AWS's IoT Device SDK v2 (IotShadowClientv2 over an MQTT 5 client) against a
// shadowd serving the shadow topics through Mosquitto. Run by test_aws_iot_sdk.py with
// NODE_PATH set to the SDK (scripts/aws-iot-sdk.sh), BROKER_PORT and SHADOWD_URL; prints one line
// per check and exits non-zero at the first failure.
"use strict";
const { mqtt5, iotshadow, mqtt_request_response } = require("aws-iot-device-sdk-v2");
const assert = require("assert");

const port = Number(process.env.BROKER_PORT);
const shadowd = process.env.SHADOWD_URL;

function once(emitter, event, timeoutMs = 15000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out waiting for " + event)), timeoutMs);
    emitter.once(event, (e) => { clearTimeout(timer); resolve(e); });
  });
}

async function rest(method, path, body) {
  const r = await fetch(shadowd + path, { method, body: body && JSON.stringify(body) });
  const text = await r.text();
  assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
  return JSON.parse(text);
}

async function expectRejected(promise, code) {
  try {
    await promise;
  } catch (e) {
    assert.strictEqual(e.modeledError && e.modeledError.code, code, `expected ${code}, got ${e} ${JSON.stringify(e.modeledError)}`);
    return e.modeledError;
  }
  assert.fail(`expected a rejection with ${code}`);
}

// One shadow's checks; `named` false: the classic shadow (shadowd's "main").
async function exercise(shadow, thingName, shadowName) {
  const named = shadowName !== undefined;
  const ids = named ? { thingName, shadowName } : { thingName };
  const label = named ? `${thingName}/${shadowName}` : `${thingName} (classic)`;
  const call = (op, request) => (named ? shadow[op.replace("Shadow", "NamedShadow")] : shadow[op]).call(shadow, { ...ids, ...request });

  const missing = await expectRejected(call("getShadow", {}), 404);
  assert.ok(missing.message.includes(named ? shadowName : thingName));
  console.log(`ok ${label}: get of a missing shadow is rejected 404`);

  const deltaStream = named
    ? shadow.createNamedShadowDeltaUpdatedStream({ thingName, shadowName })
    : shadow.createShadowDeltaUpdatedStream({ thingName });
  const subscribed = once(deltaStream, mqtt_request_response.StreamingOperation.SUBSCRIPTION_STATUS);
  deltaStream.open();
  await subscribed;

  const accepted = await call("updateShadow", { state: { reported: { color: "blue", on: true } } });
  assert.deepStrictEqual(accepted.state.reported, { color: "blue", on: true });
  assert.ok(Number.isInteger(accepted.version));
  console.log(`ok ${label}: update accepted, version ${accepted.version}`);

  // An application sets desired through REST API v1: the device hears of it on its delta stream,
  // and get shows it.
  const restDelta = once(deltaStream, mqtt_request_response.StreamingOperation.INCOMING_PUBLISH);
  const written = await rest("POST", `/v1/things/${encodeURIComponent(thingName)}/shadows/${encodeURIComponent(named ? shadowName : "main")}/desired`,
             { state: { color: "red" } });
  const heard = (await restDelta).message;
  assert.deepStrictEqual(heard.state, { color: "red" });
  assert.ok(Number.isInteger(heard.version) && heard.version > accepted.version, JSON.stringify([heard, written]));
  console.log(`ok ${label}: delta stream after a desired change made through REST`);
  const doc = await call("getShadow", {});
  assert.deepStrictEqual(doc.state.delta, { color: "red" });
  assert.deepStrictEqual(doc.state.desired, { color: "red" });
  console.log(`ok ${label}: get shows the delta of a desired value set through REST`);

  // A desired change through MQTT arrives on the delta stream.
  const delta = once(deltaStream, mqtt_request_response.StreamingOperation.INCOMING_PUBLISH);
  const desired = await call("updateShadow", { state: { desired: { color: "green" } } });
  const event = (await delta).message;
  assert.deepStrictEqual(event.state, { color: "green" });
  assert.strictEqual(event.version, desired.version);
  console.log(`ok ${label}: delta stream after a desired change`);

  const conflict = await expectRejected(call("updateShadow", { state: { reported: { color: "green" } }, version: desired.version - 1 }), 409);
  assert.strictEqual(conflict.message, "Version conflict");
  console.log(`ok ${label}: stale version rejected 409`);

  const pinned = await call("updateShadow", { state: { reported: { color: "green" } }, version: desired.version });
  assert.strictEqual(pinned.version, desired.version + 1);
  console.log(`ok ${label}: update pinned to the current version accepted`);

  const deleted = await call("deleteShadow", {});
  assert.ok(deleted.version >= pinned.version);
  await expectRejected(call("getShadow", {}), 404);
  console.log(`ok ${label}: delete accepted, then get 404`);
  deltaStream.close();
}

async function main() {
  const client = new mqtt5.Mqtt5Client({ hostName: "127.0.0.1", port, connectProperties: { clientId: "sdk-device-" + process.pid, keepAliveIntervalSeconds: 30 } });
  const connected = once(client, "connectionSuccess");
  client.start();
  await connected;
  const shadow = iotshadow.IotShadowClientv2.newFromMqtt5(client, {
    maxRequestResponseSubscriptions: 4, maxStreamingSubscriptions: 4, operationTimeoutInSeconds: 10,
  });
  try {
    await exercise(shadow, "sdk-thing", "config");
    await exercise(shadow, "sdk-thing");
  } finally {
    shadow.close();
    const stopped = once(client, "stopped");
    client.stop();
    await stopped;
    client.close();
  }
}

main().then(() => process.exit(0), (e) => { console.error("FAILED:", e && e.stack || e); process.exit(1); });
