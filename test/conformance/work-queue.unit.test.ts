import { MemoryWorkQueue } from "../../src/adapters/queue/memory.js";
import { ManualClock } from "../../src/ports/clock.js";
import { workQueueConformance } from "./work-queue.js";

workQueueConformance("in memory", async () => {
  const clock = new ManualClock("2030-01-01T00:00:00Z");
  const queue = new MemoryWorkQueue({ clock, visibilityTimeoutSeconds: 30 });
  return {
    queue,
    visibilityTimeoutSeconds: 30,
    receive: async (max) => queue.receive(max),
    delete: async (receipt) => queue.delete(receipt),
    elapse: async (seconds) => clock.advance(seconds * 1000),
    close: async () => {},
  };
});
