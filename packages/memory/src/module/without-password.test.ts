import assert from "node:assert/strict";
import { it } from "node:test";
import { withoutPassword } from "./bundle.ts";

it("a PostgreSQL store URL reaches the log without its password", () => {
  const logged = withoutPassword("postgres://app:pg-secret-pw@db.internal:5432/memory");
  assert.doesNotMatch(logged, /pg-secret-pw/);
  assert.match(logged, /^postgres:\/\/app:\*\*\*@db\.internal:5432\/memory$/);
  assert.equal(withoutPassword("/var/lib/tackle/memory.db"), "/var/lib/tackle/memory.db");
  assert.equal(withoutPassword("postgres://app@db/memory"), "postgres://app@db/memory");
});
