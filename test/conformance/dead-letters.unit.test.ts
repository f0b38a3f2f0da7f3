import { MemoryDeadLetterQueue } from "../../src/adapters/queue/memory-dead-letters.js";
import { ManualClock } from "../../src/ports/clock.js";
import { deadLetterConformance } from "./dead-letters.js";

deadLetterConformance("in memory", async () => {
  const clock = new ManualClock("2030-01-01T00:00:00Z");
  const queue = new MemoryDeadLetterQueue({ clock });
  return {
    queue,
    seed: async (letters) => {
      for (const l of letters) queue.add(l.body, l.attributes);
    },
    drainWorkQueue: async () => queue.redriven.splice(0),
    elapse: async (seconds) => clock.advance(seconds * 1000),
    close: async () => {},
  };
});
