// The Redis server's clock, estimated between state reads (each carries the server's `now`) with the browser's
// monotonic clock. Only the animation uses it: every number the page shows comes from Redis.

let offset = null;

/** Records that the server said `serverNow` during a request sent at `sentAt` and answered at `receivedAt`. */
export function observe(serverNow, sentAt, receivedAt) {
  offset = serverNow - (sentAt + receivedAt) / 2;
}

/** The server's time now (unix ms), estimated; `null` before the first reading. */
export function serverNow() {
  return offset === null ? null : performance.now() + offset;
}
