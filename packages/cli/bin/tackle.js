#!/usr/bin/env node
// The `tackle` command: the build (dist/main.js) or, in a checkout, src/main.ts on Node 24 (see the launcher).
import { launch } from "@tackle/core/launcher";

await launch({ name: "tackle", binUrl: import.meta.url, built: "dist/main.js", source: "src/main.ts" });
