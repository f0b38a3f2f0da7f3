/**
 * The capacity and cost table of bench/README.md is generated from
 * bench/fleet.json (issue 42 §4): the README must hold exactly the
 * rendering of the committed run, so no figure in it is written by hand.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  TABLE_END,
  TABLE_START,
  renderedReadme,
  withCapacityTable,
  type FleetEconomicsJson,
} from "../../../bench/fleet-table.js";

const README = fileURLToPath(new URL("../../../bench/README.md", import.meta.url));
const FLEET_JSON = fileURLToPath(new URL("../../../bench/fleet.json", import.meta.url));

describe("the fleet capacity table", () => {
  it("in bench/README.md is exactly the rendering of the committed bench/fleet.json", async () => {
    const run = JSON.parse(readFileSync(FLEET_JSON, "utf8")) as FleetEconomicsJson;
    expect(readFileSync(README, "utf8")).toBe(await renderedReadme(README, run));
  });

  it("is refused a README without its markers, naming them", () => {
    expect(() => withCapacityTable("# bench\n", "table")).toThrow(
      new RegExp(`${TABLE_START.slice(0, 20)}[\\s\\S]*${TABLE_END.slice(0, 10)}`),
    );
  });
});
