/**
 * Brands: how Tackle recognises its own errors across copies of a package (two versions installed, a
 * bundle with its own copy), where `instanceof` fails. A brand is a `Symbol.for` key set to `true` on
 * the instance; each class has its own, so a check narrows to exactly that class.
 */

/** True when `value` carries `brand`. The one check behind every `isInstance` and `is…` guard. */
export function hasBrand(value: unknown, brand: symbol): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[brand] === true;
}

/** Sets `brand` on `target`, not enumerable, so it never shows in logs or spreads. */
export function setBrand(target: object, brand: symbol): void {
  Object.defineProperty(target, brand, { value: true, enumerable: false });
}

/** A class that declares its own `static readonly brand`. */
export interface BrandedClass {
  readonly brand: symbol;
  readonly name: string;
}

/**
 * Brands `instance` with the brand of every class from `leaf` up to (and including) `root` that
 * declares one of its own: an `InvalidInputError` is also a `ToolError`.
 */
export function brandChain(instance: object, leaf: Function, root: Function): void {
  for (let current: Function | null = leaf; current !== null; current = Object.getPrototypeOf(current)) {
    if (Object.hasOwn(current, "brand")) setBrand(instance, (current as unknown as BrandedClass).brand);
    if (current === root) break;
  }
}

/** The class's own brand; a subclass that declares none would otherwise answer for its parent. */
export function ownBrand(cls: BrandedClass): symbol {
  if (!Object.hasOwn(cls, "brand")) {
    throw new TypeError(
      `${cls.name} declares no brand of its own: add \`static override readonly brand = Symbol.for("…")\``,
    );
  }
  return cls.brand;
}
