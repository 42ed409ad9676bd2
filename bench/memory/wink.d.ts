/** The parts of wink-bm25-text-search and wink-nlp-utils the library baseline uses (neither ships types). */
declare module "wink-bm25-text-search" {
  interface Engine {
    defineConfig(config: {
      fldWeights: Record<string, number>;
      bm25Params?: Record<string, number>;
    }): boolean;
    definePrepTasks(tasks: readonly ((input: never) => unknown)[]): number;
    addDoc(document: Record<string, string>, id: string | number): number;
    consolidate(fp?: number): boolean;
    search(text: string, limit?: number): [string | number, number][];
  }
  const bm25: () => Engine;
  export default bm25;
}
declare module "wink-nlp-utils" {
  type Task = (input: never) => unknown;
  const nlp: {
    string: { lowerCase: Task; tokenize0: Task; stem: (word: string) => string };
    tokens: { removeWords: Task; stem: Task; propagateNegations: Task };
  };
  export default nlp;
}
