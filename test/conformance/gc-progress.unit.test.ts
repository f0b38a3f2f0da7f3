import { SqlGcProgressStore } from "../../src/adapters/sql/gc-progress.js";
import { freshPgliteHotStore } from "../support/pglite-template.js";
import { gcProgressConformance } from "./gc-progress.js";

gcProgressConformance("PGlite (in memory)", async () => {
  const store = await freshPgliteHotStore();
  return { progress: new SqlGcProgressStore(store.db), cleanup: () => store.close() };
});
