import assert from "node:assert/strict";
import { test } from "node:test";
import { redactBrokerUrl } from "./redact-broker-url.ts";

test("a broker URL's user, password or token never reaches a log line or a message", () => {
  assert.equal(redactBrokerUrl("nats://alice:s3cret@127.0.0.1:4222"), "nats://***@127.0.0.1:4222");
  assert.equal(redactBrokerUrl("tls://a-token@broker.example:4222"), "tls://***@broker.example:4222");
  assert.equal(redactBrokerUrl("bob:pw@10.0.0.1:4222"), "***@10.0.0.1:4222");
  assert.equal(
    redactBrokerUrl("nats://a:b@one:4222, nats://two:4222,wss://c:d@three/path@x"),
    "nats://***@one:4222, nats://two:4222,wss://***@three/path@x",
  );
});

test("a URL without credentials is shown as it is", () => {
  for (const plain of ["nats://127.0.0.1:4222", "127.0.0.1:4222", "nats://a:4222,nats://b:4222"]) {
    assert.equal(redactBrokerUrl(plain), plain);
  }
});
