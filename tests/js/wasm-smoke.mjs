// The checks both wasm smoke tests run, inside whatever runtime loaded the package: Node or workerd.
// Returns a plain object so a Worker can send it back as JSON.
export async function smoke({ RestClient }, url, token) {
  const client = new RestClient(url, token, 5000);
  const wrongToken = await new RestClient(url, "wrong", 5000).command(["PING"]).catch((e) => e);
  const badArgument = await client.command([{}]).catch((e) => e);
  return {
    ping: await client.command(["PING"]),
    set: await client.command(["SET", "wasm:k", "wasm-value"]),
    get: await client.command(["GET", "wasm:k"]),
    incr: await client.command(["INCRBY", "wasm:n", 5]),
    nil: await client.command(["GET", "wasm:missing"]),
    script: await client.eval("return {KEYS[1], tonumber(ARGV[1]) * 2}", ["{w}:key"], [21]),
    wrongToken: { name: wrongToken.name, code: wrongToken.code },
    badArgument: { code: badArgument.code, message: badArgument.message },
  };
}

export const EXPECTED = {
  ping: "PONG",
  set: "OK",
  get: "wasm-value",
  incr: 5,
  nil: null,
  script: ["{w}:key", 42],
  wrongToken: { name: "EdgelimitError", code: "EDGELIMIT_AUTH" },
  badArgument: {
    code: "EDGELIMIT_INVALID_ARGUMENT",
    message: "invalid argument: command[0] must be a string or an integer, got object",
  },
};
