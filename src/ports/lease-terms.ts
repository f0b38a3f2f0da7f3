/**
 * What every lease carries, whatever it guards (a bucket, a GC root): the
 * holder's token, the generation that fences out every earlier holder, and
 * when the lease lapses unless renewed.
 */
export interface LeaseTerms {
  readonly token: string;
  readonly generation: number;
  readonly expiresAt: Date;
}
