/** Starts a Tackle command from its bin file: the build when there is one, else the source on Node 24. */
export declare function launch(command: {
  /** The command's name, as errors print it. */
  readonly name: string;
  /** The bin file's `import.meta.url`. */
  readonly binUrl: string;
  /** The built entry, relative to the package (`dist/main.js`). */
  readonly built: string;
  /** The source entry, relative to the package (`src/main.ts`). */
  readonly source: string;
}): Promise<void>;
