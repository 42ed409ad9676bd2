import assert from "node:assert/strict";
import { it } from "node:test";
import { CATALOGUE_BUCKET, MEMBERSHIP_BUCKET } from "../membership/records.ts";
import { clientPermissions, nodePermissions } from "./permissions.ts";

const notes = { module: "notes", prefix: "acme.notes", seats: { pad: "acme.seats.pad" } };

it("a node may serve, answer and publish events for its modules, and write no membership", () => {
  const permissions = nodePermissions([notes], "_INBOX_N");
  assert.ok(permissions.sub.allow.includes("acme.notes.>"));
  assert.ok(permissions.sub.allow.includes("acme.seats.pad.>"));
  assert.ok(permissions.sub.allow.includes("_INBOX_N.>"));
  assert.ok(!permissions.sub.allow.some((subject) => subject.startsWith("_INBOX.")), "no other inbox");
  assert.ok(permissions.pub.allow.includes("acme.notes.tools.events.>"));
  assert.ok(permissions.pub.allow.includes("acme.notes.tools.serving"), "announces itself");
  assert.ok(permissions.pub.allow.includes(`$KV.${CATALOGUE_BUCKET}.notes`));
  assert.ok(permissions.pub.allow.includes("$KV.tackle-mesh-results-notes.>"));
  assert.ok(!permissions.pub.allow.some((subject) => subject.startsWith(`$KV.${MEMBERSHIP_BUCKET}`)));
  assert.deepEqual(permissions.resp, { max: 1, ttl: 0 });
});

it("a client may call its modules' tools and seats, read its own events and the nodes' announcements, and publish neither", () => {
  const permissions = clientPermissions([notes], "_INBOX_C");
  assert.ok(permissions.pub.allow.includes("acme.notes.>"));
  assert.ok(permissions.pub.allow.includes("acme.seats.pad.>"));
  assert.deepEqual(permissions.pub.deny, ["acme.notes.tools.events.>", "acme.notes.tools.serving"]);
  assert.deepEqual(permissions.sub.allow, [
    "_INBOX_C.>",
    "acme.notes.tools.events._INBOX_C.>",
    "acme.notes.tools.serving",
  ]);
  assert.ok(!permissions.pub.allow.some((subject) => subject.startsWith("$KV.")), "writes no bucket");
  assert.equal(permissions.resp, undefined);
});
