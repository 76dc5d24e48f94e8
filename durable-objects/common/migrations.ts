/**
 * Applies the numbered migration steps not yet applied (each object has its own). Cheap when up to date.
 */
export function migrate(storage: SqlStorage, steps: readonly string[]): void {
  storage.exec("CREATE TABLE IF NOT EXISTS spindle_schema (version INTEGER NOT NULL)");
  const row = storage.exec<{ version: number }>("SELECT version FROM spindle_schema").toArray()[0];
  if (row === undefined) storage.exec("INSERT INTO spindle_schema (version) VALUES (0)");
  for (let version = row?.version ?? 0; version < steps.length; version++) {
    // A step may hold several statements; exec runs them all.
    const step = steps[version];
    if (step) storage.exec(step);
    storage.exec("UPDATE spindle_schema SET version = ?", version + 1);
  }
}
