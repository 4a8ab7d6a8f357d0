// Types of pollen-seen-set (hand-written; the package is plain JavaScript).
import type { RedisOptions } from 'ioredis';

export interface SeenSetOptions {
  /** Node addresses, local node first: "redis://host:port", "redis://:password@host:port", "rediss://...", or "host:port". */
  urls: string | string[];
  /** The filter's name. */
  filter: string | Buffer;
  /** Keys per BF.MADD / BF.MEXISTS (and per WAIT). Default 1000. */
  batchSize?: number;
  /** WAIT for this many other nodes after each batch. Default 0 (no WAIT). */
  waitReplicas?: number;
  /** WAIT's timeout in ms. Default 1000. */
  waitTimeoutMs?: number;
  /** A reply later than this counts the node as failed (a WAIT gets waitTimeoutMs more). Default 5000. */
  timeoutMs?: number;
  /** Connecting longer than this counts the node as failed. Default 5000. */
  connectTimeoutMs?: number;
  /** After failing over, how often to try the first node again, in ms. Default 30000. */
  homeRetryMs?: number;
  /** More ioredis options (e.g. tls); those that would make ioredis reconnect, queue or resend by itself are overridden. */
  redisOptions?: RedisOptions;
}

export class SeenSet {
  constructor(options: SeenSetOptions);
  readonly urls: string[];
  readonly filter: string | Buffer;
  readonly batchSize: number;
  /** The URL of the node in use. */
  readonly node: string;
  /** Moves to another node. */
  failovers: number;
  /** Keys answered "new" because their request failed in flight. */
  unvouched: number;
  /** WAITs that reached fewer than waitReplicas nodes. */
  shortWaits: number;
  /** BF.MADD and BF.MEXISTS commands that got their answers. */
  requests: number;
  /** Keys seenAdd answered "seen before". */
  seenKeys: number;
  /** Keys seenAdd answered "new". */
  newKeys: number;
  /** Adds keys; resolves to, per key, true if it was seen before. */
  seenAdd(keys: Iterable<string | Buffer>): Promise<boolean[]>;
  /** Per key, true if it may have been added (BF.MEXISTS; adds nothing). */
  seen(keys: Iterable<string | Buffer>): Promise<boolean[]>;
  /** Creates the filter (BF.RESERVE); an existing filter is left as it is. */
  reserve(errorRate: number, capacity: number, options?: { routed?: boolean }): Promise<void>;
  /** Deletes the filter (DEL: at every node, by replication); true if it existed at the node that answered. */
  delete(): Promise<boolean>;
  /** Waits for the calls already made, then closes the connection. Later calls reject. */
  close(): Promise<void>;
}

/** Every node in the list failed for one request. */
export class NoNodeAvailable extends Error {}
/** No reply within the timeout. */
export class ReplyTimeout extends Error {}
/** An error reply from a node (ioredis' ReplyError, from redis-errors). */
export const ReplyError: new (message?: string) => Error;

export interface WithSeenSetOptions {
  /** When no node answers, let the requests in instead of failing the add. Default false. */
  admitWhenUnavailable?: boolean;
}

export interface SeenSetQueueStats {
  /** uniqueKeys asked of the cluster. */
  asked: number;
  /** Answered seen: kept out of the queue. */
  dropped: number;
  /** Handed to the queue's storage (which may still find them present). */
  passed: number;
  /** Let in because no node answered (admitWhenUnavailable). */
  admittedUnavailable: number;
  /** Requests the cluster holds that the storage has not taken yet. */
  owed: number;
}

/** The part of a Crawlee RequestQueue that withSeenSet needs. */
export interface RequestQueueLike {
  client: {
    addRequest(request: any, options?: any): Promise<any>;
    batchAddRequests(requests: any[], options?: any): Promise<any>;
  };
}

/** Filters a Crawlee RequestQueue through a SeenSet, in place, and returns it. */
export function withSeenSet<Q extends RequestQueueLike>(queue: Q, seenSet: SeenSet, options?: WithSeenSetOptions): Q;
/** Counters of a queue filtered by withSeenSet, or undefined. */
export function seenSetStats(queue: object): SeenSetQueueStats | undefined;
/** The id Crawlee gives a request with this uniqueKey. */
export function requestIdFor(uniqueKey: string): string;
