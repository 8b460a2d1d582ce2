// Peer for bench/worker.mjs: the same proxy, limited by @upstash/ratelimit (sliding window, as edgelimit's rule in
// the bench), through the same bridge. Written as its README shows for Cloudflare Workers.
import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis/cloudflare";

let ratelimit;

export default {
  async fetch(request, env, ctx) {
    ratelimit ??= new Ratelimit({
      redis: new Redis({ url: env.EDGELIMIT_URL, token: env.EDGELIMIT_TOKEN, enableTelemetry: false }),
      limiter: Ratelimit.slidingWindow(1_000_000_000, "1 h"),
      prefix: "bench-upstash",
      ephemeralCache: false,
    });
    const ip = request.headers.get("cf-connecting-ip") ?? "unknown";
    const { success, pending } = await ratelimit.limit(ip);
    ctx.waitUntil(pending);
    if (!success) return new Response("Too Many Requests", { status: 429 });
    const url = new URL(request.url);
    const target = new URL(url.pathname + url.search, env.ORIGIN);
    return fetch(new Request(target, request));
  },
};
