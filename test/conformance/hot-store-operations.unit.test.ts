import { openPgliteHotStore } from "../../src/adapters/sql/index.js";
import { heldBucketsConformance, hotStoreOperationsConformance } from "./hot-store-operations.js";

const openInMemory = async () => {
  const store = await openPgliteHotStore(undefined, { migrate: true });
  return { store, cleanup: () => store.close() };
};

hotStoreOperationsConformance("PGlite (in memory)", openInMemory);
heldBucketsConformance("PGlite (in memory)", openInMemory);
