//! Lua scripts and how they are run: `EVALSHA` first, `EVAL` only when Redis answers `NOSCRIPT` (nothing ran).

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::rest::{Command, RestClient};
use crate::value::Value;

/// A Lua script with its SHA1, as Redis's script cache names it.
#[derive(Debug, Clone)]
pub struct Script {
    sha1: Cow<'static, str>,
    text: Cow<'static, str>,
}

impl Script {
    /// Wraps a script's text and computes its SHA1 (lowercase hex, as `SCRIPT LOAD` returns it).
    pub fn new(source: impl Into<String>) -> Self {
        let source = source.into();
        let sha1 = sha1_smol::Sha1::from(source.as_bytes()).digest().to_string();
        Script { sha1: Cow::Owned(sha1), text: Cow::Owned(source) }
    }

    /// One of the crate's scripts, with the SHA1 `build.rs` computed for its text.
    pub(crate) const fn built(sha1: &'static str, text: &'static str) -> Self {
        Script { sha1: Cow::Borrowed(sha1), text: Cow::Borrowed(text) }
    }

    /// The script's text.
    pub fn source(&self) -> &str {
        &self.text
    }

    /// The SHA1 of the text, lowercase hex.
    pub fn sha1(&self) -> &str {
        &self.sha1
    }

    /// The `EVALSHA` command for these keys and arguments.
    pub fn evalsha_command<K: ToString, A: ToString>(&self, keys: &[K], args: &[A]) -> Command {
        Self::invocation("EVALSHA", self.sha1(), keys, args)
    }

    /// The `EVAL` command (the full text) for these keys and arguments.
    pub fn eval_command<K: ToString, A: ToString>(&self, keys: &[K], args: &[A]) -> Command {
        Self::invocation("EVAL", self.source(), keys, args)
    }

    fn invocation<K: ToString, A: ToString>(verb: &str, script: &str, keys: &[K], args: &[A]) -> Command {
        Command::new(verb)
            .arg(script)
            .arg(keys.len())
            .args(keys.iter().map(ToString::to_string))
            .args(args.iter().map(ToString::to_string))
    }

    /// Runs the script atomically in Redis: `EVALSHA`, and `EVAL` with the full text if the cache misses. Every key
    /// the script touches must be in `keys`.
    pub async fn run<K: ToString, A: ToString>(&self, client: &RestClient, keys: &[K], args: &[A]) -> Result<Value> {
        match client.command(&self.evalsha_command(keys, args)).await {
            Err(error) if error.is_noscript() => client.command(&self.eval_command(keys, args)).await,
            reply => reply,
        }
    }

    /// Runs the script as [`run`](Script::run) does, with `then` behind it in the same pipeline: the script's reply,
    /// and theirs in order. On `NOSCRIPT` only the script is sent again, with its text.
    pub async fn run_then<K: ToString, A: ToString>(
        &self,
        client: &RestClient,
        keys: &[K],
        args: &[A],
        then: &[Command],
    ) -> Result<(Result<Value>, Vec<Result<Value>>)> {
        let mut commands = vec![self.evalsha_command(keys, args)];
        commands.extend_from_slice(then);
        let mut replies = client.pipeline(&commands).await?.into_iter();
        let reply = replies.next().ok_or_else(|| Error::malformed("a reply per command", "none"))?;
        let reply = match reply {
            Err(error) if error.is_noscript() => client.command(&self.eval_command(keys, args)).await,
            reply => reply,
        };
        Ok((reply, replies.collect()))
    }

    /// Runs several script calls in one pipeline, each atomic on its own but not together. Calls whose script was not
    /// cached are resent with the text in a second pipeline; if that fails, its error is those calls' reply alone.
    pub async fn run_many(client: &RestClient, calls: &[ScriptCall<'_>]) -> Result<Vec<Result<Value>>> {
        let evalsha: Vec<Command> =
            calls.iter().map(|call| call.script.evalsha_command(&call.keys, &call.args)).collect();
        let mut replies = client.pipeline(&evalsha).await?;
        let missing: Vec<usize> =
            (0..replies.len()).filter(|&i| matches!(&replies[i], Err(error) if error.is_noscript())).collect();
        if !missing.is_empty() {
            let eval: Vec<Command> =
                missing.iter().map(|&i| calls[i].script.eval_command(&calls[i].keys, &calls[i].args)).collect();
            match client.pipeline(&eval).await {
                Ok(resent) => {
                    for (i, reply) in missing.into_iter().zip(resent) {
                        replies[i] = reply;
                    }
                }
                Err(error) => {
                    for i in missing {
                        replies[i] = Err(error.clone());
                    }
                }
            }
        }
        Ok(replies)
    }
}

/// Two scripts are the same script when their SHA1s are: Redis's script cache cannot tell them apart either.
impl PartialEq for Script {
    fn eq(&self, other: &Script) -> bool {
        self.sha1 == other.sha1
    }
}

impl Eq for Script {}

/// One script call of a pipeline: [`Script::run_many`].
#[derive(Debug, Clone)]
pub struct ScriptCall<'a> {
    /// The script.
    pub script: &'a Script,
    /// Its keys.
    pub keys: Vec<String>,
    /// Its arguments.
    pub args: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_redis_script_load() {
        // `redis-cli SCRIPT LOAD "return 1"` answers this digest.
        assert_eq!(Script::new("return 1").sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }

    #[test]
    fn invocations_carry_numkeys_keys_then_args() {
        let script = Script::new("return 1");
        let command = script.evalsha_command(&["{a}:x", "{a}:y"], &[5]);
        assert_eq!(command.words(), ["EVALSHA", script.sha1(), "2", "{a}:x", "{a}:y", "5"]);
        let command = script.eval_command::<&str, &str>(&[], &[]);
        assert_eq!(command.words(), ["EVAL", "return 1", "0"]);
    }
}
