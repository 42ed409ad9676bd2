/** The bench tool served over MCP stdio from a child process. */
import { serveMcpStdio } from "@tackle/core/mcp";
import { benchToolSet } from "./bench-tool.ts";

serveMcpStdio(benchToolSet, { name: "bench" });
