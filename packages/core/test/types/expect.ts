/**
 * Compile-time assertions for the type tests in this folder. These files are type-checked by
 * `npm run typecheck` (part of `npm test`) and never run: `Expect<Equal<A, B>>` fails the check when the
 * types differ, and each `// @ts-expect-error` line fails it when the line compiles.
 */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export type Expect<T extends true> = T;
