import { openPgliteHotStore } from "../../src/adapters/sql/index.js";
import { hotStoreConformance, sqlHotStoreConformance } from "./hot-store.js";

const openInMemory = async () => {
  const store = await openPgliteHotStore(undefined);
  return { store, cleanup: () => store.close() };
};

hotStoreConformance("PGlite (in memory)", openInMemory);
sqlHotStoreConformance("PGlite (in memory)", openInMemory);
