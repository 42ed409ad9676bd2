/**
 * `@tackle/core/tokens`: token counts with a real tokenizer (`o200k_base`), for the budgets of what a
 * model reads. Needs `gpt-tokenizer`; its tables load on the first count.
 */
export { countTokens, fitsTokens, tokensOf } from "./count-tokens.ts";
