/**
 * The suites under a busy machine's load: starts CPU burners until the 1-minute load average reaches
 * the target (default 12, the shape of a busy 2-core CI machine), runs `scripts/run-tests.ts` with the
 * given arguments while they burn, and prints the load it held beside the closing count line. The
 * burners top the machine's load up to the target rather than add to it: while other work (the suite's
 * own processes, anything else on the machine) holds the load above it, burners are stopped, and
 * started again when it falls, so the run is at the target load, not at the target plus whatever else.
 *
 *   node scripts/test-under-load.ts [--load 12] [globs…]      (npm run test:under-load)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { loadavg } from "node:os";
import path from "node:path";

const args = process.argv.slice(2);
const at = args.indexOf("--load");
const target = at === -1 ? 12 : Number(args[at + 1]);
if (!(Number.isFinite(target) && target > 0)) {
  process.stderr.write("test-under-load: --load takes a positive number (a load average)\n");
  process.exit(2);
}
/** The 1-minute load average. */
const load1 = (): number => loadavg()[0] ?? 0;
const globs = at === -1 ? args : [...args.slice(0, at), ...args.slice(at + 2)];

// One burner per unit of load: each is a runnable process for as long as it lives.
const burners: ChildProcess[] = [];
const startBurner = () => burners.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
const stopBurners = () => {
  for (const burner of burners.splice(0)) burner.kill("SIGKILL");
};
for (let index = 0; index < Math.ceil(target); index++) startBurner();
process.on("exit", stopBurners);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stopBurners();
    process.exit(130);
  });
}

/**
 * Every 10 s: below the target plus one, one more burner (up to one per unit of target); above the
 * target plus four, one fewer. The 1-minute average follows within a minute or so, so the steps are small.
 */
function topUp(): void {
  const load = load1();
  if (load < target + 1 && burners.length < Math.ceil(target)) startBurner();
  else if (load > target + 4 && burners.length > 0) burners.pop()?.kill("SIGKILL");
}

// The 1-minute average climbs over a minute or two; the run starts once it is there (at most 5 min).
const deadline = Date.now() + 5 * 60_000;
while (load1() < target && Date.now() < deadline) {
  process.stdout.write(`test-under-load: load ${load1().toFixed(1)}, waiting for ${target}\n`);
  await new Promise((resolve) => setTimeout(resolve, 10_000));
}
if (load1() < target) {
  process.stdout.write(`test-under-load: load reached only ${load1().toFixed(1)} in 5 min; running anyway\n`);
}

const samples: number[] = [];
const sampler = setInterval(() => samples.push(load1()), 15_000);
const controller = setInterval(topUp, 10_000);
const tests = spawn(process.execPath, [path.join(import.meta.dirname, "run-tests.ts"), ...globs], {
  stdio: "inherit",
});
const code = await new Promise<number>((resolve) => tests.on("exit", (exit) => resolve(exit ?? 1)));
clearInterval(sampler);
clearInterval(controller);
stopBurners();
// Samples taken while the suites ran: a reading after they ended would show the machine going idle.
const low = samples.length === 0 ? load1() : Math.min(...samples);
const mean = samples.length === 0 ? load1() : samples.reduce((sum, value) => sum + value, 0) / samples.length;
process.stdout.write(
  `test-under-load: load during the run: min ${low.toFixed(1)}, mean ${mean.toFixed(1)} (target ${target})\n`,
);
process.exit(code);
