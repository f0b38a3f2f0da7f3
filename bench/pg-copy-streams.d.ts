/** The part of pg-copy-streams the bench uses (the package ships no types). */
declare module "pg-copy-streams" {
  import type { Readable } from "node:stream";
  import type { Submittable } from "pg";

  export function to(sql: string): Readable & Submittable;
}
