/** The command's logger: pino on stderr — JSON lines for machines, one readable line per event on a TTY. */
import type { Logger } from "@tackle/core";
import pino from "pino";
import { createPaint } from "./colour.ts";

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

export function createCliLogger(options: { level?: LogLevel; stream?: NodeJS.WriteStream } = {}): Logger {
  const stream = options.stream ?? process.stderr;
  const fd = (stream as { fd?: number }).fd ?? 2;
  const level = options.level ?? (process.env.TACKLE_LOG_LEVEL as LogLevel | undefined) ?? "info";
  const destination = stream.isTTY === true ? readableLines(stream) : pino.destination({ fd, sync: true });
  const instance = pino({ level, base: null, timestamp: pino.stdTimeFunctions.isoTime }, destination);
  const log =
    (method: "debug" | "info" | "warn" | "error") => (message: string, fields?: Record<string, unknown>) =>
      fields === undefined ? instance[method](message) : instance[method](fields, message);
  return { debug: log("debug"), info: log("info"), warn: log("warn"), error: log("error") };
}

const levelNames: Record<number, string> = { 20: "debug", 30: "info", 40: "warn", 50: "error" };

function readableLines(stream: NodeJS.WriteStream): { write(line: string): void } {
  const paint = createPaint(stream);
  return {
    write(line: string) {
      const { level, time, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
      const name = levelNames[level as number] ?? "log";
      const tag = name === "error" ? paint.red(name) : name === "warn" ? paint.yellow(name) : paint.dim(name);
      const extra = Object.entries(fields)
        .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
        .join(" ");
      stream.write(
        `${paint.dim(String(time).slice(11, 19))} ${tag} ${String(msg)}${extra === "" ? "" : ` ${paint.dim(extra)}`}\n`,
      );
    },
  };
}
