// A test Worker around the real shim (worker/index.js) that makes the wasm core trap for real, once, in the middle
// of a decision: the next `Headers.get` the core calls (it reads the client IP through it) first calls the core's
// allocator with an impossible size, which aborts — a genuine `unreachable` trap unwinding out of the core with the
// gate still borrowed, as a Rust panic would. Requests with `x-trap: 1` arm it.
import shim from "../../worker/index.js";
import wasmModule from "../../worker/wasm/core_bg.wasm";
import { initSync } from "../../worker/wasm/core.js";

let armed = false;
const get = Headers.prototype.get;
Headers.prototype.get = function (name) {
  if (armed) {
    armed = false;
    // initSync on a live instance returns its exports.
    initSync({ module: wasmModule }).__wbindgen_malloc(0xffffffff, 0x80000000);
  }
  return get.call(this, name);
};

export default {
  fetch(request, env, ctx) {
    armed = request.headers.has("x-trap");
    return shim.fetch(request, env, ctx);
  },
};
