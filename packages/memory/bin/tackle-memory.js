#!/usr/bin/env node
// The `tackle-memory` command: the build (dist/server/main.js) or, in a checkout, src/server/main.ts on
// Node 24 (see the launcher).
import { launch } from "@tackle/core/launcher";

await launch({
  name: "tackle-memory",
  binUrl: import.meta.url,
  built: "dist/server/main.js",
  source: "src/server/main.ts",
});
