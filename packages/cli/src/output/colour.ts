/** Colour for people, never for pipes: ANSI only on a TTY and when NO_COLOR is unset. */
export interface Paint {
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  dim(text: string): string;
  bold(text: string): string;
}

const plain = (text: string) => text;

export function createPaint(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): Paint {
  const enabled = stream.isTTY === true && (env.NO_COLOR ?? "") === "" && env.TERM !== "dumb";
  if (!enabled) return { green: plain, red: plain, yellow: plain, dim: plain, bold: plain };
  const wrap = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`;
  return {
    green: wrap(32, 39),
    red: wrap(31, 39),
    yellow: wrap(33, 39),
    dim: wrap(2, 22),
    bold: wrap(1, 22),
  };
}
