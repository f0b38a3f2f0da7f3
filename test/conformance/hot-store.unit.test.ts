import { PgliteDatabase, SqlHotStore } from "../../src/adapters/sql/index.js";
import { RecordingDatabase, type RecordedStatement } from "../support/recording-database.js";
import {
  hotStoreConformance,
  snapshotStatementConformance,
  sqlHotStoreConformance,
  typedPlaceholderConformance,
} from "./hot-store.js";

const statements: RecordedStatement[] = [];

const openInMemory = async () => {
  const store = new SqlHotStore(
    new RecordingDatabase(await PgliteDatabase.open(undefined), statements),
  );
  return { store, cleanup: () => store.close() };
};

hotStoreConformance("PGlite (in memory)", openInMemory);
sqlHotStoreConformance("PGlite (in memory)", openInMemory);
snapshotStatementConformance("PGlite (in memory)", openInMemory);
typedPlaceholderConformance("PGlite (in memory)", statements);
