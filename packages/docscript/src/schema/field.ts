/** Field builders of the schema DSL: each returns a plain, serializable field spec. */

/** Options every field accepts. */
export interface FieldOptions {
  /** `null` is a valid value. A nullable field with no default starts as `null`. */
  readonly nullable?: boolean;
  /** The field may be absent from the payload. */
  readonly optional?: boolean;
  /** Written only by the host (for example a stored file's `storageKey`); a script's write is refused. */
  readonly hostOnly?: boolean;
  /** Once the field holds a non-null value it never changes again. */
  readonly fixed?: boolean;
  readonly description?: string;
}

export interface StringField extends FieldOptions {
  readonly type: "string";
  readonly default?: string | null;
  readonly enum?: readonly string[];
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
}

export interface NumberField extends FieldOptions {
  readonly type: "number";
  readonly default?: number | null;
  readonly integer?: boolean;
  readonly min?: number;
  readonly max?: number;
}

export interface BooleanField extends FieldOptions {
  readonly type: "boolean";
  readonly default?: boolean | null;
}

/** A field whose only value is `null` (a Caption's `durationMs`: it has no length of its own). */
export interface NullField extends FieldOptions {
  readonly type: "null";
}

/** Collaborative text (a Loro text container), edited by code-point splices. */
export interface TextField extends FieldOptions {
  readonly type: "text";
  readonly default?: string;
  readonly maxLength?: number;
}

/** A list addressed by index; items are scalars or records stored as whole values. */
export interface ListField extends FieldOptions {
  readonly type: "list";
  readonly items: ItemField;
  readonly default?: readonly unknown[];
  readonly minItems?: number;
  readonly maxItems?: number;
}

/** A nested record; each sub-field merges on its own. */
export interface RecordField extends FieldOptions {
  readonly type: "record";
  readonly fields: Readonly<Record<string, FieldSpec>>;
  readonly default?: Readonly<Record<string, unknown>> | null;
}

export type ScalarField = StringField | NumberField | BooleanField | NullField;
export type ItemField = ScalarField | RecordField;
export type FieldSpec = ScalarField | TextField | ListField | RecordField;

type Options<F extends FieldSpec> = Omit<F, "type">;

/** The field builders: `field.string({ maxLength: 80 })`, `field.list(field.number())`, ... */
export const field = {
  string: (options: Options<StringField> = {}): StringField => ({ type: "string", ...options }),
  number: (options: Options<NumberField> = {}): NumberField => ({ type: "number", ...options }),
  integer: (options: Omit<Options<NumberField>, "integer"> = {}): NumberField => ({
    type: "number",
    integer: true,
    ...options,
  }),
  boolean: (options: Options<BooleanField> = {}): BooleanField => ({ type: "boolean", ...options }),
  null: (options: Options<NullField> = {}): NullField => ({ type: "null", ...options }),
  enum: (values: readonly string[], options: Omit<Options<StringField>, "enum"> = {}): StringField => ({
    type: "string",
    enum: values,
    ...options,
  }),
  text: (options: Options<TextField> = {}): TextField => ({ type: "text", ...options }),
  list: (items: ItemField, options: Omit<Options<ListField>, "items"> = {}): ListField => ({
    type: "list",
    items,
    ...options,
  }),
  record: (
    fields: Readonly<Record<string, FieldSpec>>,
    options: Omit<Options<RecordField>, "fields"> = {},
  ): RecordField => ({ type: "record", fields, ...options }),
};
