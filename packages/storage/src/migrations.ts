/** What every store's migration list must satisfy, on either engine. */
import { StorageError } from "./errors.ts";

export interface MigrationStep {
  /** 1, 2, 3, … in order; never renumber or edit one that shipped, add the next. */
  readonly version: number;
  /** A short description, recorded where the engine keeps one. */
  readonly name: string;
}

/** Throws `invalid_migrations` unless the versions are exactly 1..n in order. Returns n. */
export function latestVersion(store: string, migrations: readonly MigrationStep[]): number {
  migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new StorageError(
        "invalid_migrations",
        `Store "${store}": migration #${index + 1} ("${migration.name}") has version ${migration.version}; versions must be 1, 2, 3, … in order`,
        { store },
      );
    }
  });
  return migrations.length;
}

export function schemaTooNew(store: string, found: number, supported: number, where: string): StorageError {
  return new StorageError(
    "schema_too_new",
    `${where} has schema version ${found} for store "${store}", newer than this code's ${supported}; upgrade the code (it would not know the newer tables)`,
    { store, found, supported },
  );
}
