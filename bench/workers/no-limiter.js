// Baseline for bench/worker.mjs: the same proxy as the edgelimit Worker, with no limiter.
export default {
  fetch(request, env) {
    const url = new URL(request.url);
    const target = new URL(url.pathname + url.search, env.ORIGIN);
    return fetch(new Request(target, request));
  },
};
